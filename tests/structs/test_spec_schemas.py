"""The typed spec model renders the CRD's schema: structural, and the same as the CRD says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from rebalancer.structs.rollout_spec import RolloutSpec
from rebalancer.structs.structural_schemas import NotStructural, structural_schema

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergroups.rebalancer.dev.yaml"


def crd_subtree(*path: str) -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    node: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    for name in path:
        node = node["properties"][name]
    return node


def test_the_rollout_model_renders_the_crds_rollout_schema() -> None:
    # Parsed, not compared as text: every description, default, bound, enum and CEL rule.
    assert structural_schema(RolloutSpec) == crd_subtree("spec", "policy", "rollout")


def nodes(schema: dict[str, Any], where: str = "rollout") -> list[tuple[str, dict[str, Any]]]:
    found = [(where, schema)]
    for name, child in schema.get("properties", {}).items():
        found += nodes(child, f"{where}.{name}")
    return found


@pytest.mark.parametrize(("where", "node"), nodes(structural_schema(RolloutSpec)))
def test_every_node_is_structural_and_documented(where: str, node: dict[str, Any]) -> None:
    assert "type" in node, where
    assert node.get("description"), f"{where} has no description"
    assert not {"$ref", "anyOf", "allOf", "oneOf", "title", "$defs"} & node.keys(), where
    assert node.get("default", "unset") is not None, where


def test_a_union_of_two_types_is_refused() -> None:
    class Either(BaseModel):
        value: int | str = 0

    with pytest.raises(NotStructural, match=r"Either\.value"):
        structural_schema(Either)
