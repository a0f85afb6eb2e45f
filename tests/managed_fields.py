"""The fields a field manager owns on an object, read from metadata.managedFields, and the tables
of docs/gitops.md that list the operator's: the GitOps tests compare the two."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "gitops.md"


def paths(fields: dict[str, Any], prefix: str = "") -> set[str]:
    """managedFields' fieldsV1 as leaf paths: "spec.updateStrategy.rollingUpdate.partition",
    list items by key as `[name=gate]`."""
    found: set[str] = set()
    for key, value in fields.items():
        if key == ".":
            continue
        if key.startswith("f:"):
            step = f"{prefix}.{key[2:]}" if prefix else key[2:]
        elif key.startswith("k:"):
            keys = json.loads(key[2:])
            step = f"{prefix}[{','.join(f'{k}={v}' for k, v in sorted(keys.items()))}]"
        else:
            step = f"{prefix}[{key}]"
        if isinstance(value, dict) and any(k != "." for k in value):
            found |= paths(value, step)
        else:
            found.add(step)
    return found


ITEM = re.compile(r"\[([^=\]]+)=[^\]]*\]")


def owned_by(body: dict[str, Any], manager: str) -> set[str]:
    """The fields `manager` owns on the object (not its status), a list item it added (it owns
    the item's key, `env[name=X].name`) as one: `env[name=X]`."""
    leaves = {
        path
        for entry in body["metadata"].get("managedFields") or []
        if entry.get("manager") == manager and entry.get("subresource") != "status"
        for path in paths(entry.get("fieldsV1") or {})
    }
    folded: set[str] = set()
    for path in leaves:
        for item in ITEM.finditer(path):
            prefix = path[: item.end()]
            if f"{prefix}.{item[1]}" in leaves:
                folded.add(prefix)
                break
        else:
            folded.add(path)
    return folded


def documented(kind: str = "statefulset") -> set[str]:
    """The fields docs/gitops.md says the operator writes on a `kind` (its table)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"<!-- {kind}-fields -->")[1].split("\n## ")[0].split("\n\n")[1]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))
