"""Status conditions as Kubernetes API conventions define them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Condition:
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str


def merge_conditions(
    existing: Sequence[Mapping[str, object]],
    updates: Sequence[Condition],
    *,
    now: str,
    generation: int | None,
) -> list[dict[str, object]]:
    """The condition list after `updates`, keeping lastTransitionTime when status is unchanged.

    Conditions of other types (written by someone else) are kept as they are.
    """
    by_type: dict[str, dict[str, object]] = {}
    order: list[str] = []
    for item in existing:
        kind = str(item.get("type", ""))
        if kind and kind not in by_type:
            by_type[kind] = dict(item)
            order.append(kind)
    for update in updates:
        previous = by_type.get(update.type.value)
        transition = now
        if previous is not None and previous.get("status") == update.status.value:
            transition = str(previous.get("lastTransitionTime") or now)
        entry: dict[str, object] = {
            "type": update.type.value,
            "status": update.status.value,
            "reason": update.reason,
            "message": update.message,
            "lastTransitionTime": transition,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        if previous is None:
            order.append(update.type.value)
        by_type[update.type.value] = entry
    return [by_type[kind] for kind in order]


def conditions_changed(
    before: Sequence[Mapping[str, object]], after: Sequence[Mapping[str, object]]
) -> bool:
    return [dict(item) for item in before] != [dict(item) for item in after]
