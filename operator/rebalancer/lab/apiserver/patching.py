"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge needs the Go types' patch metadata, which we do not have; lists are merged
by the keys kube's built-in types declare (containers by name, conditions by type, ...) and
replaced otherwise, which is what the built-in types do for every list without a merge key.
"""

from __future__ import annotations

import copy
from typing import Any

from . import errors

Body = dict[str, Any]


# Merge patch ------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# JSON patch -------------------------------------------------------------------------------


class PatchFailed(Exception):
    """A well-formed JSON patch that does not apply; kube answers 422, not 500."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise errors.bad_request(f"invalid JSON pointer: {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, adding: bool = False) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchFailed(f"invalid array index {token!r} in {path}")
    index = int(token)
    if index > len(container) or (index == len(container) and not adding):
        raise PatchFailed(f"index out of bounds: {path}")
    return index


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path)]
        else:
            raise PatchFailed(f"doc is missing path: {path!r}: missing value")
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path)]
    raise PatchFailed(f"doc is missing key: {path}: missing value")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], path, adding=True), value)
    else:
        raise PatchFailed(
            f"add operation does not apply: doc is missing path: {path!r}: missing value"
        )
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchFailed("unable to remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchFailed(f"Unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path))
    raise PatchFailed(
        f"remove operation does not apply: doc is missing path: {path!r}: missing value"
    )


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise errors.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op:
            raise errors.bad_request(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op.get("path")
        if not isinstance(path, str):
            raise errors.bad_request(f"missing path in JSON patch operation: {op!r}")
        if kind in ("add", "replace", "test") and "value" not in op:
            raise errors.bad_request(f"missing value for {kind} operation at {path}")
        value = copy.deepcopy(op.get("value"))
        if kind == "add":
            doc = _add(doc, path, value)
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            try:
                _get(doc, path)
            except PatchFailed as exc:
                raise PatchFailed(
                    f"replace operation does not apply: doc is missing key: {path}: missing value"
                ) from exc
            doc, _ = _remove(doc, path) if _pointer(path) else (doc, None)
            doc = _add(doc, path, value)
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise errors.bad_request(f"missing from in JSON patch operation: {op!r}")
            moved = copy.deepcopy(_get(doc, source))
            if kind == "move":
                doc, moved = _remove(doc, source)
            doc = _add(doc, path, moved)
        elif kind == "test":
            try:
                actual = _get(doc, path)
            except PatchFailed:
                actual = None
            if actual != value or (type(actual) is not type(value) and not _numbers(actual, value)):
                raise PatchFailed(f"testing value {path} failed: test failed")
        else:
            raise errors.bad_request(f"Unexpected kind: {kind}")
    return doc


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))


# Strategic merge patch --------------------------------------------------------------------

#: patchMergeKey of built-in list fields, by field name.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
#: Lists of scalars with patchStrategy=merge.
MERGED_SCALARS = frozenset({"finalizers"})


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge by containerPort, service ports by port.
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return MERGE_KEYS.get(field)


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def strategic_merge(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise errors.bad_request("strategic merge patch must be a JSON object")
    merged = _merge_map(original if isinstance(original, dict) else {}, patch)
    return merged if merged is not None else {}


def _merge_map(original: Body, patch: Body) -> Body | None:
    directive = patch.get("$patch")
    if directive == "replace":
        replaced: Body = strip_directives({k: v for k, v in patch.items() if k != "$patch"})
        return replaced
    if directive == "delete":
        return None
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    removals: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            removals[key.split("/", 1)[1]] = value
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            merged = _merge_map(base if isinstance(base, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            base = result.get(key)
            result[key] = _merge_list(key, base if isinstance(base, list) else [], value)
        else:
            result[key] = value
    for key, doomed in removals.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in doomed]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(key, result[key], order)
    return result


def _merge_list(field: str, original: list[Any], patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [strip_directives(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = _merge_key(field, original + patch)
    if key is None or not all(isinstance(i, dict) for i in original + patch):
        if field in MERGED_SCALARS:
            return original + [v for v in patch if v not in original]
        return strip_directives(patch)  # type: ignore[no-any-return]
    result = copy.deepcopy(original)
    for item in patch:
        position = next((n for n, o in enumerate(result) if o.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if position is not None:
                result.pop(position)
        elif position is None:
            result.append(strip_directives(item))
        else:
            merged = _merge_map(result[position], item)
            if merged is None:
                result.pop(position)
            else:
                result[position] = merged
    return result


def _reorder(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    key = _merge_key(field, items)

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [ident(o) if isinstance(o, dict) else o for o in order]
    ranked = [i for i in items if ident(i) in wanted]
    ranked.sort(key=lambda i: wanted.index(ident(i)))
    return ranked + [i for i in items if ident(i) not in wanted]
