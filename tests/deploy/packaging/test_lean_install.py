"""The base install: the wheel built from this tree, installed without extras in a fresh venv.

The operator, the join gate and the sidecar must run from it without Spark or the lab; `rebalancer
learn` must say which extra to install and `rebalancer lab` which distribution (the lab is its own,
lab/pyproject.toml, and the operator's wheel carries none of it). The dependencies come from the
package index (pip's cache makes a second run fast).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebalancer import __version__

ROOT = Path(__file__).resolve().parents[3]
# Modules that only the learning extra may import; everything else is the base install.
EXTRA_ONLY = (
    "rebalancer.learning",
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
    # As the operator's Dockerfile leaves it: without the Kubernetes client's asyncio twin.
    (aio,) = home.glob("lib/python3*/site-packages/kubernetes/aio")
    shutil.rmtree(aio)
    yield bin_dir


# What agent.Dockerfile installs beside the package: read from the package's metadata there too.
AGENT_REQUIREMENTS = """
import re
from importlib.metadata import requires
print("\\n".join(r for r in requires("rebalancer") if "extra" not in r
                 and re.match(r"(aiohttp|aiokafka|confluent-kafka|prometheus-client)\\b", r)))
"""
IMPORT_AGENTS = """
import importlib, pkgutil
import rebalancer.gate, rebalancer.sidecar
names = ["rebalancer.commands.gate", "rebalancer.commands.sidecar"]
for package in (rebalancer.gate, rebalancer.sidecar):
    names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


@pytest.fixture(scope="module")
def agent_bin(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv as agent.Dockerfile builds it: the package without its dependencies, and four."""
    home = tmp_path_factory.mktemp("agent-venv")
    venv.EnvBuilder(with_pip=True).create(home)
    bin_dir = home / "bin"
    installed = _run(bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-deps", wheel)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = _run(bin_dir / "python", "-c", AGENT_REQUIREMENTS, timeout=60)
    assert listed.returncode == 0, listed.stderr
    requirements = listed.stdout.split()
    assert len(requirements) == 4, requirements
    installed = _run(bin_dir / "python", "-m", "pip", "install", "--quiet", *requirements)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield bin_dir


def test_the_wheel_carries_the_one_version(wheel: Path) -> None:
    assert wheel.name.startswith(f"rebalancer-{__version__}-")


@pytest.mark.parametrize("command", ["operator", "gate", "sidecar"])
def test_the_agents_run_from_the_base_install(lean_bin: Path, command: str) -> None:
    result = _run(lean_bin / "rebalancer", command, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: rebalancer {command}")


def test_the_kubectl_plugin_runs_from_the_base_install(lean_bin: Path) -> None:
    # kubectl finds `kubectl-rebalancer` on PATH: the base install puts it beside `rebalancer`.
    result = _run(lean_bin / "kubectl-rebalancer", "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kubectl rebalancer")


def test_the_base_install_has_no_spark_and_imports_every_base_module(lean_bin: Path) -> None:
    for absent in ("pyspark", "pyarrow", "pandas", "matplotlib", "rich"):
        shown = _run(lean_bin / "python", "-m", "pip", "show", "--quiet", absent, timeout=60)
        assert shown.returncode != 0, f"{absent} is in the base install"
    imported = _run(lean_bin / "python", "-c", IMPORT_BASE, *EXTRA_ONLY, timeout=120)
    assert imported.returncode == 0, imported.stderr
    # The walk found the package's modules, not an empty namespace.
    assert int(imported.stdout) > 50


RECORD_HISTORY = """
import asyncio, sys
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.structs.history import RecordType, member_event
common = {"namespace": "shop", "name": "orders", "group_id": "g", "cluster": "k:9092"}
event = member_event(RecordType.POD_START, **common, member="p-0", at=1_700_000_000.0,
                     members=1, record_key="pod-start/u1/0")
recorder = HistoryRecorder(sys.argv[1])
asyncio.run(recorder.record([event]))
print(sorted(asyncio.run(recorder.recorded_keys("shop", ["2023-11-14"]))))
"""


def test_the_base_install_records_history_that_learning_reads(
    lean_bin: Path, tmp_path: Path
) -> None:
    # The operator's image has no Parquet library: it writes JSON lines, which the learning
    # extra (this test's own environment) reads back whole.
    from rebalancer.learning.history_table import read_history

    written = _run(lean_bin / "python", "-c", RECORD_HISTORY, tmp_path / "history", timeout=60)
    assert written.returncode == 0, written.stderr
    assert written.stdout.strip() == "['pod-start/u1/0']"
    (record,) = read_history(tmp_path / "history")
    assert record["member"] == "p-0"
    assert record["record_key"] == "pod-start/u1/0"
    assert record["namespace"] == "shop"
    assert record["date"] == "2023-11-14"


def test_the_wheel_carries_none_of_the_lab(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert any(name.startswith("rebalancer/handlers/") for name in names)
    lab_files = [
        name
        for name in names
        if name.startswith(("rebalancer_lab/", "rebalancer/lab/")) or name.endswith("pom.xml")
    ]
    assert lab_files == []


@pytest.fixture(scope="module")
def lab_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The lab reads its version from the operator's package beside it, as in the repository.
    source = tmp_path_factory.mktemp("lab-source")
    shutil.copytree(
        ROOT / "lab",
        source / "lab",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "controlplane"),
    )
    (source / "operator" / "rebalancer").mkdir(parents=True)
    shutil.copy2(ROOT / "operator/rebalancer/__init__.py", source / "operator/rebalancer")
    dist = tmp_path_factory.mktemp("lab-dist")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source / "lab")
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob("rebalancer_lab-*.whl")
    return found


def test_the_lab_wheel_is_the_lab_at_the_operators_version(lab_wheel: Path) -> None:
    assert lab_wheel.name.startswith(f"rebalancer_lab-{__version__}-")
    with zipfile.ZipFile(lab_wheel) as archive:
        names = archive.namelist()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
        (entry_points,) = [name for name in names if name.endswith("entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert "rebalancer_lab/command.py" in names
    assert "rebalancer_lab/kubelet/pods.py" in names
    assert "rebalancer_lab/data/kafka/pom.xml" in names
    assert not any(name.startswith("rebalancer/") for name in names)
    assert f"rebalancer=={__version__}" in requires
    assert "[rebalancer.commands]" in declared
    assert "lab = rebalancer_lab.command" in declared


def test_lab_and_learn_say_what_to_install(lean_bin: Path, tmp_path: Path) -> None:
    lab = _run(lean_bin / "rebalancer", "lab", "--state-dir", tmp_path, timeout=60)
    assert lab.returncode == 2
    assert "rebalancer-lab" in lab.stderr
    assert "pip install ./lab" in lab.stderr
    # Its flags and --help get the same answer, not an argument error.
    helped = _run(lean_bin / "rebalancer", "lab", "--help", timeout=60)
    assert helped.returncode == 2
    assert helped.stderr == lab.stderr
    learn = _run(
        lean_bin / "rebalancer", "learn", "--history", tmp_path, "--output", tmp_path, timeout=60
    )
    assert learn.returncode == 2
    assert "pyspark" in learn.stderr
    assert "pip install 'rebalancer[learning]'" in learn.stderr
    # Nothing was started: no Traceback, only the one line.
    assert "Traceback" not in lab.stderr + learn.stderr


@pytest.mark.parametrize("command", ["gate", "sidecar"])
def test_the_gate_and_the_sidecar_run_from_the_agent_install(agent_bin: Path, command: str) -> None:
    result = _run(agent_bin / "rebalancer", command, "--help", timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: rebalancer {command}")


def test_the_agent_install_has_no_kubernetes_client_and_imports_the_agents(
    agent_bin: Path,
) -> None:
    for absent in ("kubernetes", "kopf", "pyarrow"):
        shown = _run(agent_bin / "python", "-m", "pip", "show", "--quiet", absent, timeout=60)
        assert shown.returncode != 0, f"{absent} is in the agent install"
    imported = _run(agent_bin / "python", "-c", IMPORT_AGENTS, timeout=120)
    assert imported.returncode == 0, imported.stderr
    assert int(imported.stdout) > 10


def test_the_gate_says_what_a_kubeconfig_needs_in_the_agent_install(
    agent_bin: Path, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n", encoding="utf-8")
    result = _run(
        agent_bin / "rebalancer",
        "gate",
        "--pod=orders-0",
        "--namespace=apps",
        f"--kubeconfig={kubeconfig}",
        timeout=60,
    )
    assert result.returncode != 0
    assert "reading a kubeconfig needs the Kubernetes client" in result.stderr
    assert "Traceback" not in result.stderr
