"""Decide which rebalances happened between two observations of a group.

Member reports give each generation exactly once, however short the rebalance; without
reports, the broker's state transitions and member-set changes are the only evidence and a
rebalance shorter than the polling interval can be missed (status says which source counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.reports import GenerationSighting
from rebalancer.structs.snapshots import GroupSnapshot, Source

REBALANCING_STATES = frozenset(
    {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}
)


@dataclass(frozen=True)
class EventContext:
    namespace: str
    name: str
    group_id: str
    cluster: str


@dataclass(frozen=True)
class GroupTracking:
    """What the operator remembers between observations; persisted in status."""

    since: float
    generation: int | None = None
    state: str | None = None
    members: frozenset[str] = field(default_factory=frozenset)
    rebalances: int = 0
    last_rebalance_at: float | None = None
    last_cause: str | None = None
    observed: bool = False


def _cause(joined: Sequence[str], left: Sequence[str]) -> RebalanceCause:
    if joined and left:
        return RebalanceCause.MEMBERS_CHANGED
    if joined:
        return RebalanceCause.MEMBER_JOINED
    if left:
        return RebalanceCause.MEMBER_LEFT
    return RebalanceCause.REJOIN


def detect_rebalances(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    sightings: Sequence[GenerationSighting],
    context: EventContext,
) -> tuple[list[RebalanceEvent], GroupTracking]:
    """Rebalance events since `tracking`, and the tracking to keep for next time.

    `sightings` are the generations members reported above tracking.generation.
    """
    events: list[RebalanceEvent] = []
    current = snapshot.member_keys
    joined = tuple(sorted(current - tracking.members))
    left = tuple(sorted(tracking.members - current))
    generation = tracking.generation

    def event(
        cause: RebalanceCause, gen: int | None, seen: float | None, members: int, source: Source
    ) -> RebalanceEvent:
        return RebalanceEvent(
            namespace=context.namespace,
            name=context.name,
            group_id=context.group_id,
            cluster=context.cluster,
            generation=gen,
            previous_generation=generation,
            cause=cause,
            detected_at=snapshot.observed_at if seen is None else seen,
            started_at=None,
            members=members,
            joined=joined,
            left=left,
            source=source.value,
            state=snapshot.state,
        )

    floor = generation_or(tracking.generation)
    fresh = [s for s in sightings if s.generation > floor]
    for sighting in fresh:
        if sighting.first_seen >= tracking.since:
            is_last = sighting is fresh[-1]
            cause = _cause(joined, left) if is_last else RebalanceCause.REJOIN
            members = len(sighting.members)
            seen = sighting.first_seen
            events.append(event(cause, sighting.generation, seen, members, Source.MEMBER_REPORTS))
        generation = sighting.generation

    reports_in_use = snapshot.sources.get("generation") is Source.MEMBER_REPORTS
    if not reports_in_use and tracking.observed:
        entered = snapshot.state in REBALANCING_STATES and tracking.state not in REBALANCING_STATES
        members_moved = (
            snapshot.sources.get("members") is Source.BROKER
            and (joined or left)
            and snapshot.state not in REBALANCING_STATES
        )
        if entered or members_moved:
            cause = _cause(joined, left) if members_moved else RebalanceCause.STATE_CHANGE
            events.append(event(cause, None, None, snapshot.members, Source.BROKER))

    last = events[-1] if events else None
    updated = replace(
        tracking,
        generation=generation,
        state=snapshot.state,
        members=current,
        rebalances=tracking.rebalances + len(events),
        last_rebalance_at=last.detected_at if last else tracking.last_rebalance_at,
        last_cause=last.cause.value if last else tracking.last_cause,
        observed=True,
    )
    return events, updated


def generation_or(value: int | None, default: int = -1) -> int:
    return default if value is None else value
