"""The typed spec model renders the CRD's schema: structural, and the same as the CRD says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from rebalancer.structs.consumer_group_resource import (
    PRINTER_COLUMNS,
    ConsumerGroupResource,
    crd_document,
)
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


def test_the_committed_crd_is_the_models_whole_crd() -> None:
    assert yaml.safe_load(CRD.read_text(encoding="utf-8")) == crd_document()


def nodes(schema: dict[str, Any], where: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(where or "root", schema)]
    for name, child in schema.get("properties", {}).items():
        found += nodes(child, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        found += nodes(schema["items"], f"{where}[]")
    return found


RESOURCE_NODES = nodes(structural_schema(ConsumerGroupResource))
# The API server's ObjectMeta, and items that are plain strings or numbers described by their list.
UNDESCRIBED = {".metadata"}


@pytest.mark.parametrize(("where", "node"), RESOURCE_NODES)
def test_every_node_is_structural_and_documented(where: str, node: dict[str, Any]) -> None:
    assert "type" in node, where
    if where not in UNDESCRIBED and not (where.endswith("[]") and node["type"] != "object"):
        assert node.get("description"), f"{where} has no description"
    assert not {"$ref", "anyOf", "allOf", "oneOf", "title", "$defs"} & node.keys(), where
    assert node.get("default", "unset") is not None, where


def test_the_whole_resource_is_modelled() -> None:
    paths = {where for where, _ in RESOURCE_NODES}
    assert {".spec.kafka.tls.caSecretRef.key", ".status.group.memberDetails[].host"} <= paths
    assert len(paths) > 250


@pytest.mark.parametrize("column", PRINTER_COLUMNS, ids=lambda column: column.name)
def test_every_printer_column_shows_a_field_of_the_model(column: Any) -> None:
    if column.json_path.startswith(".metadata."):
        return
    # A filter such as [?(@.type=="Ready")] picks list items: step into the items' schema.
    path = re.sub(r"\[\?\(.*?\)\]", "", column.json_path)
    node = structural_schema(ConsumerGroupResource)
    for name in path.strip(".").split("."):
        node = node.get("items", node)["properties"][name]
    assert node["type"] == ("string" if column.type == "date" else column.type), column.name


def test_a_union_of_two_types_is_refused() -> None:
    class Either(BaseModel):
        value: int | str = 0

    with pytest.raises(NotStructural, match=r"Either\.value"):
        structural_schema(Either)
