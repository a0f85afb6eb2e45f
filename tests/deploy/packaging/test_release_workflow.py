"""The release workflow (.github/workflows/release.yml): actionlint finds nothing in it, and it
publishes what the chart and the docs expect: every image the repository builds, under the name
the chart's values pull, for amd64 and arm64, the chart as an OCI artifact, on the tag the
runbook links name.

actionlint is built by `make actionlint` (the Go module github.com/rhysd/actionlint, into the
venv's bin; `make test` runs it first).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer import __version__

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VALUES = ROOT / "charts" / "rebalancer" / "values.yaml"
PROMETHEUS_RULE = ROOT / "charts" / "rebalancer" / "templates" / "prometheusrule.yaml"


def find_actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("actionlint")


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    binary = find_actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed: run `make actionlint`")
    return subprocess.run(
        [binary, "-no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return loaded


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(f"{action}@")]


def test_actionlint_finds_nothing() -> None:
    done = actionlint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_would_find_a_wrong_input(tmp_path: Path) -> None:
    # The check has teeth: a misspelt input of build-push-action is an error.
    broken = WORKFLOW.read_text(encoding="utf-8").replace("platforms:", "platform:")
    path = tmp_path / ".github" / "workflows" / "release.yml"
    path.parent.mkdir(parents=True)
    path.write_text(broken, encoding="utf-8")
    done = actionlint(path)
    assert done.returncode != 0
    assert "platform" in done.stdout


def test_it_runs_on_version_tags_and_checks_the_tag_is_the_version() -> None:
    # PyYAML reads the key `on` as True.
    assert workflow()[True] == {"push": {"tags": ["v*"]}}
    check = workflow()["jobs"]["version"]["steps"][1]["run"]
    assert "operator/rebalancer/__init__.py" in check
    assert '"$TAG" != "v$version"' in check


def test_every_image_is_pushed_multi_arch_under_the_name_the_chart_pulls() -> None:
    images = workflow()["jobs"]["images"]
    built = {row["image"]: row["dockerfile"] for row in images["strategy"]["matrix"]["include"]}
    # Every Dockerfile in the repository, and none that is not there.
    dockerfiles = {
        str(p.relative_to(ROOT))
        for p in [*ROOT.glob("*Dockerfile"), *(ROOT / "examples").rglob("Dockerfile")]
    }
    assert set(built.values()) == dockerfiles
    values = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    pulled = [
        values["image"]["repository"],
        values["agentImage"]["repository"],
        values["learning"]["image"]["repository"],
    ]
    for repository in pulled:
        assert repository.startswith("ghcr.io/rebalancer-dev/"), repository
        assert repository.rsplit("/", 1)[1] in built, f"{repository} is not pushed"
    [push] = steps_using(images, "docker/build-push-action")
    assert set(push["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert push["with"]["push"] is True
    assert push["with"]["tags"].startswith("ghcr.io/${{ needs.version.outputs.owner }}/")
    assert push["with"]["tags"].endswith(":${{ needs.version.outputs.version }}")
    assert steps_using(images, "docker/setup-qemu-action")


def test_the_chart_is_pushed_as_an_oci_artifact_after_the_images() -> None:
    chart = workflow()["jobs"]["chart"]
    assert "images" in chart["needs"]
    pushed = " ".join(str(step.get("run", "")) for step in chart["steps"])
    assert re.search(r'helm push "dist/charts/rebalancer-\$VERSION\.tgz" "oci://ghcr\.io/', pushed)


def test_the_runbook_links_name_the_tag_this_workflow_releases() -> None:
    # The alerts link docs/runbooks.md at blob/v<appVersion>: the tag the workflow runs on.
    template = PROMETHEUS_RULE.read_text(encoding="utf-8")
    assert "/blob/v%s/docs/runbooks.md" in template and ".Chart.AppVersion" in template
    tags = workflow()[True]["push"]["tags"]
    assert any(re.fullmatch(t.replace("*", ".*"), f"v{__version__}") for t in tags)
