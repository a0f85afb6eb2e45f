"""meta.k8s.io/v1 Table responses, which `kubectl get` asks for and prints as they come."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from . import jsonpath
from .resources import Column, ResourceType

Body = dict[str, Any]

NAME = Column(
    "Name",
    "string",
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    format="name",
    json_path=".metadata.name",
)
AGE = Column(
    "Age",
    "date",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
    json_path=".metadata.creationTimestamp",
)


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, which kubectl's AGE column shows."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y{rest}d" if rest else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: Any, now: datetime | None = None) -> str | None:
    if not isinstance(timestamp, str):
        return None
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    return human_duration(((now or datetime.now(UTC)) - then).total_seconds())


def columns(rtype: ResourceType) -> tuple[Column, ...]:
    defined = rtype.columns
    # Custom resources always get an Age column here (kube's v1 CRDs show it only when
    # declared); built-in types list theirs explicitly, as kube's printers do.
    if (rtype.custom or not defined) and not any(c.name.lower() == "age" for c in defined):
        defined = (*defined, AGE)
    if any(c.format == "name" for c in defined):
        return defined
    return (NAME, *defined)


def _text(value: Any) -> str:
    # kubectl's JSONPath printer: JSON for maps and lists, Go's %v for scalars.
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _cell(column: Column, obj: Body) -> Any:
    if column.getter is not None:
        return column.getter(obj)
    found = jsonpath.find(obj, column.json_path or "")
    if not found or found[0] is None:
        return None
    value = found[0]
    kind = column.type
    if kind == "string":
        return _text(value)
    if kind == "date":
        return age(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    return None


def row(rtype: ResourceType, obj: Body, include: str) -> Body:
    result: Body = {"cells": [_cell(c, obj) for c in columns(rtype)]}
    if include == "Object":
        result["object"] = obj
    elif include != "None":
        result["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {}),
        }
    return result


def table(rtype: ResourceType, objs: list[Body], meta: Body, include: str) -> Body:
    definitions = [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in columns(rtype)
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": [row(rtype, obj, include) for obj in objs],
    }
