"""The krew manifest of `kubectl rebalancer`: it names the archive this tree builds (version,
address, sha256), the archive is reproducible, and its launcher runs the plugin."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import yaml

from rebalancer import __version__
from rebalancer.kubectl.arguments import Verb

ROOT = Path(__file__).resolve().parents[3]
KREW = ROOT / "deploy" / "krew"


def load_packager() -> ModuleType:
    spec = importlib.util.spec_from_file_location("package_plugin", KREW / "package_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


packager = load_packager()


def manifest() -> dict[str, object]:
    loaded = yaml.safe_load((KREW / "rebalancer.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_the_manifest_names_the_archive_this_tree_builds() -> None:
    assert packager.version() == __version__
    assert packager.mismatches(manifest()) == []


def test_the_manifest_is_a_krew_plugin_listing_every_verb() -> None:
    plugin = manifest()
    assert plugin["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert plugin["kind"] == "Plugin"
    spec = plugin["spec"]
    assert isinstance(spec, dict)
    listed = [line.split()[0] for line in spec["description"].splitlines()[1:]]
    assert listed == [verb.value for verb in Verb]
    (platform,) = spec["platforms"]
    assert platform["bin"] == "kubectl-rebalancer"
    assert platform["files"] == [{"from": "kubectl-rebalancer", "to": "."}]


def test_the_archive_is_reproducible_and_holds_an_executable_launcher() -> None:
    built = packager.archive_bytes()
    assert packager.archive_bytes() == built
    with zipfile.ZipFile(io.BytesIO(built)) as archive:
        (info,) = archive.infolist()
        assert info.filename == "kubectl-rebalancer"
        assert (info.external_attr >> 16) & 0o111 == 0o111


def test_the_launcher_runs_the_plugin_from_the_python_it_is_given(tmp_path: Path) -> None:
    env = {**os.environ, "REBALANCER_PYTHON": sys.executable}
    done = subprocess.run(
        [KREW / "kubectl-rebalancer", "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: kubectl rebalancer")


def test_the_launcher_says_what_to_install_where_the_package_is_missing(tmp_path: Path) -> None:
    bare = tmp_path / "python"
    bare.write_text("#!/bin/sh\nexit 1\n")
    bare.chmod(0o755)
    done = subprocess.run(
        [KREW / "kubectl-rebalancer", "get"],
        env={**os.environ, "REBALANCER_PYTHON": str(bare)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert "has no rebalancer package" in done.stderr
    assert "pip install ." in done.stderr
