"""Server-side apply (`application/apply-patch+yaml`) without managed-fields bookkeeping.

Each field manager's last applied configuration is remembered per object: fields it applied
before and omits now are removed, fields it applies are set, and everything else is left as
is. Ownership conflicts between managers are not detected (every apply acts as `--force`),
and `metadata.managedFields` is not maintained.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from . import errors, patching
from .resources import ResourceType

if TYPE_CHECKING:
    from .cluster import Cluster, Outcome, WriteOptions

Body = dict[str, Any]


def merge(live: Any, applied: Any, previous: Any, field: str = "") -> Any:
    if isinstance(applied, dict) and isinstance(live, dict):
        result = copy.deepcopy(live)
        before = previous if isinstance(previous, dict) else {}
        for key in before:
            if key not in applied:
                result.pop(key, None)
        for key, value in applied.items():
            result[key] = merge(live.get(key), value, before.get(key), key)
        return result
    if isinstance(applied, list) and isinstance(live, list):
        key = patching._merge_key(field, live + applied)
        if key and all(isinstance(i, dict) for i in live + applied):
            return _merge_keyed(
                live, applied, previous if isinstance(previous, list) else [], key, field
            )
    return copy.deepcopy(applied)


def _merge_keyed(
    live: list[Body], applied: list[Body], previous: list[Any], key: str, field: str
) -> list[Body]:
    mine = {i.get(key) for i in applied}
    dropped = {i.get(key) for i in previous if isinstance(i, dict)} - mine
    result = [copy.deepcopy(i) for i in live if i.get(key) not in dropped]
    before = {i.get(key): i for i in previous if isinstance(i, dict)}
    for item in applied:
        position = next((n for n, o in enumerate(result) if o.get(key) == item.get(key)), None)
        if position is None:
            result.append(copy.deepcopy(item))
        else:
            result[position] = merge(result[position], item, before.get(item.get(key)), field)
    return result


def apply(
    cluster: Cluster,
    rtype: ResourceType,
    namespace: str | None,
    name: str,
    body: Any,
    opts: WriteOptions,
    subresource: str | None,
) -> Outcome:
    if not opts.field_manager:
        raise errors.invalid_object(
            rtype.group,
            rtype.kind,
            name,
            [errors.required("metadata.managedFields.fieldManager", "is required for apply patch")],
        )
    if not isinstance(body, dict):
        raise errors.bad_request("an apply patch must be a YAML or JSON object")
    config = copy.deepcopy(body)
    meta = config.setdefault("metadata", {})
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    meta["name"] = name
    key = (rtype.storage, cluster._ns(rtype, namespace), name)
    existing = cluster.store.get(*key)
    if existing is None:
        if subresource:
            raise errors.not_found(rtype.group, rtype.plural, name)
        outcome = cluster.create(rtype, namespace, config, opts)
    else:
        previous = cluster._applied.get(key, {}).get(opts.field_manager)
        merged = merge(cluster.served(rtype, existing), config, previous)
        outcome = cluster._commit(
            rtype, existing, rtype.decode(merged), opts, subresource, "patch", body
        )
    if not opts.dry_run and cluster.store.get(*key) is not None:
        cluster._applied.setdefault(key, {})[opts.field_manager] = config
    return outcome
