"""The base install: the wheel built from this tree, installed without extras in a fresh venv.

The operator, the join gate and the sidecar must run from it without Spark or the lab's
dependencies; `rebalancer lab` and `rebalancer learn` must say which extra to install. The
dependencies come from the package index (pip's cache makes a second run fast).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebalancer import __version__

ROOT = Path(__file__).resolve().parents[2]
# Modules that only the lab and learning extras may import; everything else is the base install.
EXTRA_ONLY = (
    "rebalancer.lab",
    "rebalancer.learning",
    "rebalancer.commands.lab",
    "rebalancer.commands.learn",
    "rebalancer.__main__",
)

IMPORT_BASE = """
import importlib, pkgutil, sys
import rebalancer
extra_only = tuple(sys.argv[1:])
imported = 0
for module in pkgutil.walk_packages(rebalancer.__path__, "rebalancer."):
    name = module.name
    if any(name == prefix or name.startswith(prefix + ".") for prefix in extra_only):
        continue
    importlib.import_module(name)
    imported += 1
print(imported)
"""


def _run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        # Outside the repository, so nothing is imported from the source tree by accident.
        cwd="/",
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy, so the shared tree gets no build/ or egg-info from this test.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "operator",
        source / "operator",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    dist = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob("rebalancer-*.whl")
    return found


@pytest.fixture(scope="module")
def lean_bin(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("lean-venv")
    venv.EnvBuilder(with_pip=True).create(home)
    bin_dir = home / "bin"
    installed = _run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield bin_dir


def test_the_wheel_carries_the_one_version(wheel: Path) -> None:
    assert wheel.name.startswith(f"rebalancer-{__version__}-")


@pytest.mark.parametrize("command", ["operator", "gate", "sidecar"])
def test_the_agents_run_from_the_base_install(lean_bin: Path, command: str) -> None:
    result = _run(lean_bin / "rebalancer", command, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: rebalancer {command}")


def test_the_base_install_has_no_spark_and_imports_every_base_module(lean_bin: Path) -> None:
    for absent in ("pyspark", "pandas", "matplotlib", "rich"):
        shown = _run(lean_bin / "python", "-m", "pip", "show", "--quiet", absent, timeout=60)
        assert shown.returncode != 0, f"{absent} is in the base install"
    imported = _run(lean_bin / "python", "-c", IMPORT_BASE, *EXTRA_ONLY, timeout=120)
    assert imported.returncode == 0, imported.stderr
    # The walk found the package's modules, not an empty namespace.
    assert int(imported.stdout) > 50


def test_lab_and_learn_name_the_extra_to_install(lean_bin: Path, tmp_path: Path) -> None:
    lab = _run(lean_bin / "rebalancer", "lab", "--state-dir", tmp_path, timeout=60)
    assert lab.returncode == 2
    assert "rich" in lab.stderr
    assert "pip install 'rebalancer[lab]'" in lab.stderr
    learn = _run(
        lean_bin / "rebalancer", "learn", "--history", tmp_path, "--output", tmp_path, timeout=60
    )
    assert learn.returncode == 2
    assert "pyspark" in learn.stderr
    assert "pip install 'rebalancer[learning]'" in learn.stderr
    # Nothing was started: no Traceback, only the one line.
    assert "Traceback" not in lab.stderr + learn.stderr
