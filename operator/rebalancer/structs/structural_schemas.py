"""A spec model's OpenAPI v3 schema as a CRD needs it: structural, inlined, in a stable order.

pydantic renders JSON Schema; Kubernetes wants a structural schema
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
no `$ref` (nested models are inlined), no `anyOf` for an optional field (an unset field is
absent, never null), a `type` on every node, no `default: null`, no titles. The
x-kubernetes-* extensions a model declares (its CEL rules) are kept. Descriptions are folded to
one line, so docstrings and Field descriptions can wrap like prose.

Keys come in the order the CRD writes them, so that the rendered YAML reads as the hand-written
one did and its diffs stay small (deploy/crd_gen.py writes it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rebalancer.structs.errors import RebalancerError

KEY_ORDER = (
    "type",
    "enum",
    "description",
    "nullable",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "pattern",
    "format",
    "default",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields",
    "items",
    "properties",
    "additionalProperties",
    "x-kubernetes-validations",
)
# A CEL rule's keys, in the order the Kubernetes docs write them.
RULE_ORDER = ("rule", "message", "messageExpression", "fieldPath", "reason", "optionalOldSelf")
DROPPED = {"title", "$defs"}


class NotStructural(RebalancerError, ValueError):
    """The model asks for a schema a CRD cannot carry (a union of types, a node without type)."""


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema of `model` as a CRD's openAPIV3Schema node."""
    rendered = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = rendered.get("$defs", {})
    return _structural(rendered, defs, model.__name__)


def _structural(node: dict[str, Any], defs: dict[str, Any], where: str) -> dict[str, Any]:
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        # The field's own keys (its description, its default) win over the referenced type's.
        target = defs[ref.rsplit("/", 1)[-1]]
        node = {**target, **node}
    branches = node.pop("anyOf", None)
    if branches is not None:
        kept = [branch for branch in branches if branch != {"type": "null"}]
        if len(kept) != 1:
            raise NotStructural(f"{where}: a union of {len(kept)} types has no structural schema")
        node = {**_structural(kept[0], defs, where), **node}
    if "default" in node and node["default"] is None:
        del node["default"]
    if "description" in node:
        node["description"] = " ".join(str(node["description"]).split())
    if "properties" in node:
        node["properties"] = {
            name: _structural(child, defs, f"{where}.{name}")
            for name, child in node["properties"].items()
        }
    if "items" in node:
        node["items"] = _structural(node["items"], defs, f"{where}[]")
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _structural(
            node["additionalProperties"], defs, f"{where}{{}}"
        )
    if "x-kubernetes-validations" in node:
        node["x-kubernetes-validations"] = [
            {key: rule[key] for key in RULE_ORDER if key in rule}
            for rule in node["x-kubernetes-validations"]
        ]
    if "type" not in node:
        raise NotStructural(f"{where} has no type")
    return _ordered({key: value for key, value in node.items() if key not in DROPPED})


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    known = [key for key in KEY_ORDER if key in node]
    rest = sorted(key for key in node if key not in KEY_ORDER)
    return {key: node[key] for key in [*known, *rest]}
