"""What a workload's past start-ups say about its next one: how far apart its pods reach their
join gates, and how long a consumer takes from its start to its join. Pure.

Read from the history the operator records (docs/history.md), as the store's rows. A pod start
from Kubernetes (`pod-start`, source `kubernetes`) is the consumer container's start, the
moment after its gate let it go; the start of a pod's first run also carries in `started_at`
when the pod reached its gate. Pods whose gates started less than START_GAP_SECONDS after the
previous one belong to one start (a cold start, a scale-up); each pod's arrival counts from
the first gate of its start, and only starts of two or more pods say anything about a spread.
A consumer's join delay is its first `member-join` within PAIR_WAIT_SECONDS of its container's
start, less that start (every run: restarts too).

Limits, each shifting every plan's joins alike rather than favouring one: a join is timed when
the member is assigned (docs/history.md), so the delay includes what the coordinator held it
(an Empty group's initial delay, a rebalance's round) and errs long; arrivals count from the
first pod's gate, not from the change (which is not recorded).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.history_pods import (
    CLOCK_SLACK_SECONDS,
    KUBERNETES_SOURCE,
    PAIR_WAIT_SECONDS,
)
from rebalancer.structs.history import RecordType

# Gates a change opens for start within seconds of each other (scheduling, image pulls); a gate
# this long after the previous one is another change's.
START_GAP_SECONDS = 30.0
# Fewer measured pods than this (arrivals in starts of two or more, and joins) and the model
# keeps its documented assumption: the p90 of a handful of pods is its slowest one, and one
# slow image pull would then decide every later plan.
MIN_MEASURED_PODS = 8


@dataclass(frozen=True)
class StartupHistory:
    """A workload's measured start-ups (empty: nothing recorded)."""

    # Past starts of two or more pods, and their pods with a recorded gate arrival.
    starts: int = 0
    pods: int = 0
    # Each of those pods' arrival at its gate after the first of its start, sorted, in ms.
    arrival_offsets_ms: tuple[float, ...] = ()
    # Each consumer's first join after its container's start, sorted, in ms.
    join_delays_ms: tuple[float, ...] = ()

    @property
    def enough(self) -> bool:
        """Whether the model should be fed these rather than its assumption."""
        return self.pods >= MIN_MEASURED_PODS and len(self.join_delays_ms) >= MIN_MEASURED_PODS

    def arrivals_ms(self, joiners: int) -> tuple[float, ...]:
        """`joiners` pods arriving as past pods did: the measured arrivals' quantiles at evenly
        spaced shares, the first pod at 0 and the last at the slowest seen."""
        last = max(joiners - 1, 1)
        return tuple(
            round(quantile(self.arrival_offsets_ms, index / last), 1) for index in range(joiners)
        )

    @property
    def arrival_p90_ms(self) -> float:
        return quantile(self.arrival_offsets_ms, 0.9)

    @property
    def join_median_ms(self) -> float:
        return quantile(self.join_delays_ms, 0.5)

    @property
    def join_p90_ms(self) -> float:
        return quantile(self.join_delays_ms, 0.9)


def quantile(ordered: Sequence[float], share: float) -> float:
    """The `share` quantile of sorted `ordered`, interpolated between neighbours (0 if empty)."""
    if not ordered:
        return 0.0
    position = min(max(share, 0.0), 1.0) * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class _Start:
    member: str
    started_at: float  # the container's start
    gate_at: float | None  # the pod reached its gate (first runs of gated pods)


def _ours(rows: Iterable[Mapping[str, Any]], name: str, group_id: str) -> list[Mapping[str, Any]]:
    """This group's rows, each fact once (a record key written twice is one fact)."""
    seen: set[str] = set()
    kept: list[Mapping[str, Any]] = []
    for row in rows:
        if row.get("name") != name or row.get("group_id") != group_id:
            continue
        key = row.get("record_key")
        if isinstance(key, str):
            if key in seen:
                continue
            seen.add(key)
        kept.append(row)
    return kept


def startup_history(
    rows: Iterable[Mapping[str, Any]], *, name: str, group_id: str
) -> StartupHistory:
    """The start-ups of ConsumerGroup `name` (group `group_id`) in history rows."""
    starts: list[_Start] = []
    joins: dict[str, list[float]] = {}
    for row in _ours(rows, name, group_id):
        member, at = row.get("member"), _number(row.get("detected_at"))
        if not isinstance(member, str) or at is None:
            continue
        kind = row.get("record_type")
        if kind == RecordType.MEMBER_JOIN.value:
            joins.setdefault(member, []).append(at)
        elif kind == RecordType.POD_START.value and row.get("source") == KUBERNETES_SOURCE:
            starts.append(_Start(member, at, _number(row.get("started_at"))))
    delays = sorted(delay for start in starts if (delay := _join_delay(start, joins)) is not None)
    groups = _by_start(sorted(start.gate_at for start in starts if start.gate_at is not None))
    spread = [group for group in groups if len(group) >= 2]
    offsets = sorted((gate - group[0]) * 1000.0 for group in spread for gate in group)
    return StartupHistory(
        starts=len(spread),
        pods=len(offsets),
        arrival_offsets_ms=tuple(round(offset, 1) for offset in offsets),
        join_delays_ms=tuple(round(delay, 1) for delay in delays),
    )


def _join_delay(start: _Start, joins: Mapping[str, Sequence[float]]) -> float | None:
    after = [
        at
        for at in joins.get(start.member, ())
        if start.started_at - CLOCK_SLACK_SECONDS <= at <= start.started_at + PAIR_WAIT_SECONDS
    ]
    if not after:
        return None
    return max(min(after) - start.started_at, 0.0) * 1000.0


def _by_start(gates: Sequence[float]) -> list[list[float]]:
    """Sorted gate arrivals cut into starts wherever START_GAP_SECONDS pass without one."""
    groups: list[list[float]] = []
    for gate in gates:
        if groups and gate - groups[-1][-1] < START_GAP_SECONDS:
            groups[-1].append(gate)
        else:
            groups.append([gate])
    return groups
