"""Reading Kubernetes objects as the API returns them: nested mappings any level of which may be
missing or of another type than the schema says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def field_at(raw: object, *path: str) -> Any:
    """The value at `path` inside `raw`, or None where any step is missing or not a mapping."""
    value: Any = raw
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
