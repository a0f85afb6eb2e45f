"""When the observer writes a ConsumerGroup's status (pure).

A status PATCH is a request to kube-apiserver and a watch event for every client that follows
ConsumerGroups (kopf itself, kubectl get -w, dashboards). It is sent when something a user
would see changed: the state, the members and their partitions, the generation, the rebalance
count, a condition, or the lag by more than its bucket (below); otherwise only when the last
write is older than the freshness interval (`--status-refresh-seconds`), so that
status.group.observedAt says the operator is alive without being rewritten at every look.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Lag is written when it moves to another half-decade (1, 3, 10, 31, 100, ...): a group that
# consumes steadily has a lag that moves at every look, and a PATCH per look would be the
# whole cost this rule saves. A move from 1,000 to 3,162 is a change a user notices.
LAG_BUCKETS_PER_DECADE = 2


def lag_bucket(lag: object) -> int | None:
    """0 for no lag, then 1, 2, ... per half-decade; None when the lag is not known."""
    if not isinstance(lag, int) or isinstance(lag, bool) or lag < 0:
        return None
    if lag == 0:
        return 0
    return 1 + math.floor(math.log10(lag) * LAG_BUCKETS_PER_DECADE)


def visible_status(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The status fields as far as a write decision goes: without the freshness stamp
    (group.observedAt) and with the lag as its bucket."""
    visible = dict(fields)
    group = visible.get("group")
    if isinstance(group, Mapping):
        trimmed = {key: value for key, value in group.items() if key not in ("observedAt", "lag")}
        if "lag" in group:
            trimmed["lagBucket"] = lag_bucket(group["lag"])
        visible["group"] = trimmed
    return visible


# Why a status is written (rebalancer_status_writes_total's reason label).
FORCED = "forced"
CHANGED = "changed"
REFRESH = "refresh"
WRITE_REASONS = (FORCED, CHANGED, REFRESH)


def status_write_reason(
    visible: Mapping[str, Any],
    last_visible: Mapping[str, Any] | None,
    *,
    forced: bool,
    last_written_at: float | None,
    now: float,
    refresh_seconds: float,
) -> str | None:
    """Why to PATCH status now, None for not now: forced (a rebalance or a failure to tell),
    changed (something visible, or nothing written yet by this process), or refresh (the
    freshness stamp is `refresh_seconds` old)."""
    if forced:
        return FORCED
    if last_visible is None or last_written_at is None or dict(visible) != dict(last_visible):
        return CHANGED
    if now - last_written_at >= refresh_seconds:
        return REFRESH
    return None
