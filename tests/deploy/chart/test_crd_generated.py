"""The CRD's generated subtrees are what `make crd` (deploy/crd_gen.py) renders from the model."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import yaml
from tests.deploy.chart.support import ROOT

from rebalancer.structs.structural_schemas import structural_schema


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_crd_gen", ROOT / "deploy" / "crd_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


def test_make_crd_would_change_no_committed_file() -> None:
    crd = GEN.CRD.read_text(encoding="utf-8")
    manifests = GEN.MANIFESTS.read_text(encoding="utf-8")
    for path, text in GEN.outputs(crd, manifests).items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} differs from the model's rendering: run make crd"
        )


def test_the_rendered_yaml_reads_back_as_the_models_schema() -> None:
    crd: dict[str, Any] = yaml.safe_load(GEN.generate(GEN.CRD.read_text(encoding="utf-8")))
    (version,) = crd["spec"]["versions"]
    for path, model in GEN.GENERATED:
        node = version["schema"]["openAPIV3Schema"]
        for name in path:
            node = node["properties"][name]
        assert node == structural_schema(model), ".".join(path)


def test_only_the_generated_subtrees_change() -> None:
    # The hand-written rest of the CRD goes through untouched, comments and all.
    text = GEN.CRD.read_text(encoding="utf-8")
    lines = text.splitlines()
    start, end, _ = GEN.subtree_span(lines, ("spec", "policy", "rollout"))
    before, after = lines[:start], lines[end:]
    regenerated = GEN.generate(text).splitlines()
    assert regenerated[:start] == before
    assert regenerated[len(regenerated) - len(after) :] == after


def test_descriptions_fold_at_the_width_and_read_back() -> None:
    text = "word " * 60
    lines = GEN.render_node("description", text.strip(), 4)
    assert lines[0] == "    description: >-"
    assert all(len(line) <= GEN.WIDTH for line in lines)
    assert yaml.safe_load("\n".join(line[4:] for line in lines)) == {"description": text.strip()}
    # A colon followed by a space would read as a mapping: folded instead of plain.
    colon = GEN.render_node("description", "a: b", 0)
    assert colon == ["description: >-", "  a: b"]
    assert yaml.safe_load("\n".join(colon)) == {"description": "a: b"}
