"""The chart's README documents every value, and `make chart-package` makes a chart repository."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from tests.deploy.chart.support import CHART, ROOT, Helm

from rebalancer import __version__


def load_script(name: str) -> ModuleType:
    # The scripts import each other as siblings, as they do when run from deploy/.
    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "deploy" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # Registered before it runs: dataclasses look their module up by name.
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "deploy"))


readme = load_script("chart_readme")


def test_every_value_is_documented_in_the_readme() -> None:
    values_text = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert readme.undocumented(values_text) == []
    text = (CHART / "README.md").read_text(encoding="utf-8")
    rows, _ = readme.parse(values_text)
    assert len(rows) > 80
    for row in rows:
        assert row.description, f"{row.path} has an empty '# --' comment"
        assert f"| `{row.path}` |" in text, f"{row.path} is not in charts/rebalancer/README.md"


def test_the_readme_table_is_fresh() -> None:
    current = (CHART / "README.md").read_text(encoding="utf-8")
    values_text = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert readme.render(current, values_text) == current, (
        "charts/rebalancer/README.md is out of date: run .venv/bin/python deploy/chart_readme.py"
    )


def test_the_check_finds_a_value_without_a_comment() -> None:
    values_text = """\
# A section title documents no value.
plain: 1
# -- A documented mapping covers what it holds.
covered:
  inner: 2
section:
  # -- Documented.
  shown: 3
  hidden: [4]
"""
    assert readme.undocumented(values_text) == ["plain", "section.hidden"]
    rows, _ = readme.parse(values_text)
    assert [(row.path, row.default) for row in rows] == [
        ("covered", {"inner": 2}),
        ("section.shown", 3),
    ]


def test_make_chart_package_writes_the_package_and_the_index(helm: Helm, tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    dist = tmp_path / "charts"
    done = subprocess.run(
        [
            make,
            # The venv is there already: make must not reinstall it for this target.
            "-o",
            ".venv/.installed",
            f"BIN={Path(sys.executable).parent}",
            f"CHART_DIST={dist}",
            "CHART_REPO_URL=https://charts.example.org/rebalancer",
            "chart-package",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == __version__
    package = dist / f"rebalancer-{chart['version']}.tgz"
    assert package.is_file(), sorted(dist.iterdir())

    index = yaml.safe_load((dist / "index.yaml").read_text(encoding="utf-8"))
    [entry] = index["entries"]["rebalancer"]
    assert entry["version"] == chart["version"]
    assert entry["appVersion"] == __version__
    assert entry["digest"] == hashlib.sha256(package.read_bytes()).hexdigest()
    assert entry["urls"] == [f"https://charts.example.org/rebalancer/{package.name}"]

    with tarfile.open(package) as archive:
        names = set(archive.getnames())
    for wanted in ("README.md", "values.yaml", "values.schema.json", "Chart.yaml"):
        assert f"rebalancer/{wanted}" in names
    assert "rebalancer/crds/consumergroups.rebalancer.dev.yaml" in names
    assert not [name for name in names if name.endswith(".py")], "a script was packaged"

    shown = helm.run("show", "readme", str(package))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == (CHART / "README.md").read_text(encoding="utf-8").strip()
    rendered = helm.run("template", "rebalancer", str(package), "--namespace", "rebalancer")
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: Deployment" in rendered.stdout
