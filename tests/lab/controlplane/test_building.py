"""The build step's cache key, source lookup and error messages (no Kubernetes build needed)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rebalancer_lab.controlplane import building
from rebalancer_lab.controlplane.building import ControlPlaneBuildError


def copy_sources(target: Path) -> Path:
    source = building.source_dir()
    target.mkdir()
    for name in ["go.mod", "go.sum", *(p.name for p in source.glob("*.go"))]:
        shutil.copy(source / name, target / name)
    return target


def test_sources_are_found_in_the_checkout() -> None:
    assert (building.source_dir() / "main.go").is_file()


def test_key_follows_sources(tmp_path: Path) -> None:
    if shutil.which("go") is None and not building.FALLBACK_GO.is_file():
        pytest.skip("go is not installed")
    source = copy_sources(tmp_path / "src")
    go = building.go_binary()
    before = building.build_key(source, go)
    assert building.build_key(source, go) == before
    (source / "main.go").write_text((source / "main.go").read_text() + "\n// changed\n")
    assert building.build_key(source, go) != before
    (source / "README.md").write_text("docs do not change the binary")
    changed = building.build_key(source, go)
    (source / "README.md").write_text("still not")
    assert building.build_key(source, go) == changed


def test_missing_go_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)
    monkeypatch.setattr(building, "FALLBACK_GO", Path("/nonexistent/go"))
    with pytest.raises(ControlPlaneBuildError, match="go is not installed"):
        building.go_binary()


def test_source_override_must_hold_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(building.SOURCE_ENV, str(tmp_path))
    with pytest.raises(ControlPlaneBuildError, match=r"has no go\.mod"):
        building.source_dir()


def test_download_failure_quotes_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("go") is None and not building.FALLBACK_GO.is_file():
        pytest.skip("go is not installed")
    # An empty module cache and no proxy: the download step fails at once, as offline would.
    monkeypatch.setenv(building.SOURCE_ENV, str(copy_sources(tmp_path / "src")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    monkeypatch.setenv("GOPROXY", "off")
    lines: list[str] = []
    with pytest.raises(ControlPlaneBuildError) as raised:
        building.ensure_control_plane(progress=lines.append)
    message = str(raised.value)
    assert "downloading the Go modules failed" in message
    assert "GOPROXY=off" in message  # go's own words are quoted
    assert lines and "building the Kubernetes control plane" in lines[0]
    assert not list((tmp_path / "cache").rglob("kube-lab"))


FAKE_GO = """#!/bin/sh
# Stands in for go: `version`, `mod download`, and a slow `build -o PATH` that counts its runs.
case "$1" in
  version) echo "go version go1.26.0-fake linux/amd64" ;;
  mod) exit 0 ;;
  build)
    echo build >> "$FAKE_GO_RUNS"
    while [ "$1" != "-o" ]; do shift; done
    for pkg in a b c; do echo "example.com/$pkg"; sleep 0.2; done
    echo binary > "$2" ;;
esac
"""


def test_parallel_callers_build_once_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "go").write_text(FAKE_GO)
    (tools / "go").chmod(0o755)
    runs = tmp_path / "runs"
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GO_RUNS", str(runs))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(building.SOURCE_ENV, str(copy_sources(tmp_path / "src")))
    monkeypatch.setattr(building, "_PROGRESS_EVERY_S", 0.1)
    lines: list[str] = []
    with ThreadPoolExecutor(3) as pool:
        paths = list(pool.map(lambda _: building.ensure_control_plane(lines.append), range(3)))

    assert runs.read_text().splitlines() == ["build"]
    assert len(set(paths)) == 1
    assert paths[0].read_text() == "binary\n"
    assert paths[0].is_relative_to(tmp_path / "cache" / "rebalancer" / "controlplane")
    assert not list(paths[0].parent.glob("*.partial"))
    assert any("... compiling" in line and "packages" in line for line in lines)
    assert any("waiting for another process" in line for line in lines)


def test_older_builds_are_pruned_to_the_newest_two(tmp_path: Path) -> None:
    folders = []
    for age, key in enumerate(["newest", "second", "third", "oldest"]):
        folder = tmp_path / key
        folder.mkdir()
        binary = folder / building.BINARY_NAME
        binary.write_bytes(b"x")
        stamp = 1_700_000_000 - age * 3600
        os.utime(binary, (stamp, stamp))
        folders.append(folder)
    (tmp_path / "newest.lock").write_text("")
    said: list[str] = []
    building._prune(tmp_path / "third", said.append)
    # The build just made is kept whatever its age, with the newest other one.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["newest", "newest.lock", "third"]
    assert len(said) == 2
