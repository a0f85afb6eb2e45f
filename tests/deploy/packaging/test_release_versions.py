"""One version for a release: `rebalancer.__version__` is where it is written, and everything a
user installs or reads about a release says the same.

The chart's version and appVersion, the image tags the chart's values and the plain manifests
pull, the labels of `deploy/rebalancer.yaml`, the image names and archives the docs tell a user
to push, and the newest entry of CHANGELOG.md all follow it. Bumping `__version__` without the
rest (or the rest without it) fails here, in a second, before anything is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer import __version__

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "rebalancer"
MANIFESTS = ROOT / "deploy" / "rebalancer.yaml"

# An image of the project's own with a tag: ghcr.io/rebalancer-dev/rebalancer-agent:0.1.0 and the
# like, wherever it is written (a manifest's image:, --gate-image=, a doc's push command); also
# REGISTRY/rebalancer-example-consumer:0.1.0, the registry an example leaves to the user.
OWN_IMAGE = re.compile(
    r"(?:ghcr\.io/rebalancer-dev|REGISTRY)/(?P<name>rebalancer[a-z-]*):(?P<tag>[\w.+-]+)"
)
# What `make images` writes (deploy/build_images.sh): rebalancer-<role>-<version>.oci.tar.
ARCHIVE = re.compile(
    r"rebalancer-(?:operator|agent|learning|example-consumer)-(?P<tag>\d[\w.+-]*?)\.oci\.tar"
)
# Keep a Changelog's release headings: "## [0.1.0] - 2026-01-01" or "## [0.1.0] - Unreleased".
RELEASE_HEADING = re.compile(r"^## \[(?P<version>\d[^\]]*)\]", re.MULTILINE)


def chart() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    return loaded


def text_files() -> Iterator[Path]:
    """Everything a user installs from or reads: manifests, values, docs, examples."""
    yield from sorted((ROOT / "deploy").rglob("*.yaml"))
    yield from sorted(CHART.rglob("*.yaml"))
    yield from sorted(CHART.glob("*.md"))
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted((ROOT / "examples").rglob("*.yaml"))
    yield from sorted((ROOT / "examples").rglob("*.md"))
    yield from sorted(ROOT.glob("*.md"))


def test_version_is_a_release_version() -> None:
    # Semantic versioning, as Helm requires of a chart's version.
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?", __version__), __version__


def test_chart_version_and_app_version_are_the_package_version() -> None:
    # The chart and the operator are released together, under one number.
    assert chart()["version"] == __version__
    assert chart()["appVersion"] == __version__


def test_chart_values_pull_no_other_tag() -> None:
    """An empty tag is the chart's appVersion; a tag written in values.yaml must be that one."""
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    tags = {
        "image.tag": values["image"]["tag"],
        "agentImage.tag": values["agentImage"]["tag"],
        "learning.image.tag": values["learning"]["image"]["tag"],
    }
    for key, tag in tags.items():
        assert tag in ("", __version__), f"values.yaml {key} is {tag!r}, not {__version__!r}"


def test_plain_manifests_are_labelled_with_the_version() -> None:
    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text(encoding="utf-8")) if d]
    labelled = [d for d in docs if "helm.sh/chart" in d["metadata"].get("labels", {})]
    assert labelled, "deploy/rebalancer.yaml has no resource rendered from the chart"
    for doc in labelled:
        labels = doc["metadata"]["labels"]
        where = f"{doc['kind']} {doc['metadata']['name']}"
        assert labels["helm.sh/chart"] == f"rebalancer-{__version__}", where
        assert labels["app.kubernetes.io/version"] == __version__, where


@pytest.mark.parametrize("path", list(text_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_image_and_archive_named_has_the_version(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    wrong = [m.group(0) for m in OWN_IMAGE.finditer(text) if m.group("tag") != __version__]
    wrong += [m.group(0) for m in ARCHIVE.finditer(text) if m.group("tag") != __version__]
    assert not wrong, f"{path.relative_to(ROOT)} names another version than {__version__}: {wrong}"


def test_the_plain_manifests_pull_the_versioned_images() -> None:
    # The one place the tag is resolved for users without Helm: both images, at the version.
    text = MANIFESTS.read_text(encoding="utf-8")
    named = {(m.group("name"), m.group("tag")) for m in OWN_IMAGE.finditer(text)}
    assert ("rebalancer", __version__) in named
    assert ("rebalancer-agent", __version__) in named


def test_the_changelog_describes_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = RELEASE_HEADING.findall(changelog)
    assert versions, "CHANGELOG.md has no '## [<version>]' entry"
    assert versions[0] == __version__, f"CHANGELOG.md's newest entry is {versions[0]}"
