"""`kubectl rebalancer get`: one row per ConsumerGroup, read from what the operator wrote.

Every figure comes from the object's status: `status.group` (the group as last observed),
`status.rollout` (read back as the rollout planner's own state, planning.rollout_states) and
the `Ready` condition. A group the operator has not observed yet shows `-` rather than a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.conditions import ConditionType
from rebalancer.structs.times import read_rfc3339

MISSING = "-"


@dataclass(frozen=True)
class GroupRow:
    namespace: str
    name: str
    group_id: str
    state: str
    members: int | None
    generation: int | None
    rollout: str
    batch: str
    rebalances: int | None
    ready: str
    created_at: float | None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def ready_status(status: Mapping[str, Any]) -> str:
    """The `Ready` condition's status (True, False, Unknown), `-` before the first."""
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == ConditionType.READY:
            return str(condition.get("status") or MISSING)
    return MISSING


def batch_text(rollout: RolloutState) -> str:
    """`2/4` for the rollout's current batch of its batches; `-` when it has none."""
    if not rollout.batches or rollout.phase is RolloutPhase.IDLE:
        return MISSING
    return f"{max(rollout.batch, 1)}/{rollout.batches}"


def group_row(body: Mapping[str, Any]) -> GroupRow:
    metadata = _mapping(body.get("metadata"))
    spec = _mapping(body.get("spec"))
    status = _mapping(body.get("status"))
    group = _mapping(status.get("group"))
    raw_rollout = status.get("rollout")
    rollout = RolloutState.from_status(raw_rollout)
    return GroupRow(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        group_id=_text(spec.get("groupId")) or MISSING,
        state=_text(group.get("state")) or MISSING,
        members=_int(group.get("members")),
        generation=_int(group.get("generation")),
        rollout=rollout.phase.value if _mapping(raw_rollout) else MISSING,
        batch=batch_text(rollout),
        rebalances=_int(group.get("rebalances")),
        ready=ready_status(status),
        created_at=read_rfc3339(metadata.get("creationTimestamp")),
    )


def age(seconds: float) -> str:
    """A duration as kubectl's AGE column says it: 42s, 7m, 5h, 3d."""
    whole = max(int(seconds), 0)
    if whole < 120:
        return f"{whole}s"
    if whole < 3 * 3600:
        return f"{whole // 60}m"
    if whole < 48 * 3600:
        return f"{whole // 3600}h"
    return f"{whole // 86400}d"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl prints them; no trailing spaces."""
    widths = [len(header) for header in headers]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = []
    for row in (headers, *rows):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


# In the order of the CRD's printer columns (`kubectl get consumergroups -o wide`), with the
# batch of batches in one column.
GROUP_HEADERS = (
    "NAME",
    "GROUP",
    "STATE",
    "MEMBERS",
    "GENERATION",
    "REBALANCES",
    "ROLLOUT",
    "BATCH",
    "READY",
    "AGE",
)


def _number(value: int | None) -> str:
    return MISSING if value is None else str(value)


def group_cells(row: GroupRow, now: float, *, all_namespaces: bool) -> list[str]:
    cells = [
        row.name,
        row.group_id,
        row.state,
        _number(row.members),
        _number(row.generation),
        _number(row.rebalances),
        row.rollout,
        row.batch,
        row.ready,
        MISSING if row.created_at is None else age(now - row.created_at),
    ]
    return [row.namespace, *cells] if all_namespaces else cells


def render_groups(
    bodies: Sequence[Mapping[str, Any]],
    now: float,
    *,
    namespace: str | None,
) -> str:
    """The `get` table of `bodies`, sorted by namespace and name; `namespace` None: every
    namespace (a NAMESPACE column first). kubectl's sentence when there is nothing to list."""
    rows = sorted((group_row(body) for body in bodies), key=lambda r: (r.namespace, r.name))
    if not rows:
        where = f" in {namespace} namespace" if namespace is not None else ""
        return f"No ConsumerGroups found{where}."
    every = namespace is None
    headers = ("NAMESPACE", *GROUP_HEADERS) if every else GROUP_HEADERS
    return render_table(headers, [group_cells(row, now, all_namespaces=every) for row in rows])
