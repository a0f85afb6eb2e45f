"""The condition status.enforcement imposes: a group the sidecars cannot enforce rebalances of."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType

UNSUPPORTED = "unsupported"
REASON = "EnforceUnsupported"


def enforcement_conditions(enforcement: Mapping[str, Any] | None) -> list[Condition]:
    """Degraded while the last request was refused because the sidecar cannot join the group's
    protocol (the sidecar's 422; docs/enforcing.md, "Client libraries"). For the observer, who
    writes conditions last; [] otherwise."""
    if not enforcement or enforcement.get("lastStatus") != UNSUPPORTED:
        return []
    message = str(enforcement.get("message") or "the sidecar cannot join this group's protocol")
    return [Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, REASON, message)]
