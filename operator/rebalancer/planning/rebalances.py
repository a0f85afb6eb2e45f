"""Decide which rebalances happened between two observations of a group.

Member reports give each generation exactly once, however short the rebalance; without
reports, the broker's state transitions and member-set changes are the only evidence and a
rebalance shorter than the polling interval can be missed (status says which source counted).

A rebalance seen on the broker first (Apache Kafka describes a forming group as
PreparingRebalance before any member has been assigned, so before any member could report) is
held back until the group is out of it and its members had time to report: if they report a
generation from then on, that generation is the rebalance, counted once; if nobody reports, the
broker's sighting is counted.

Streams groups (KIP-1071) and KIP-848 groups whose describe carries the group epoch are the
exception: the broker reports the epoch exactly, so a rebalance is the epoch rising between two
looks, and a pass through Assigning or Reconciling at the same epoch is none (a static member
back under a new member id reconciles to the assignment it had without the group moving). A
classic group without reports whose members' subscriptions name their generation
(planning/observing.broker_generation) is counted the same way between two looks that both know
it, one rebalance per generation, however short; a look that does not know it falls back to the
broker's state transitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rebalancer.planning.group_levers import STREAMS_PROTOCOL_NAME
from rebalancer.planning.streams_observing import STREAMS_PROTOCOL
from rebalancer.structs.brokers import GroupProtocol, GroupState
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.reports import GenerationSighting
from rebalancer.structs.snapshots import GroupSnapshot, Source

REBALANCING_STATES = frozenset(state for state in GroupState if state.rebalancing)
_EPOCH_PROTOCOLS = frozenset({STREAMS_PROTOCOL, GroupProtocol.CONSUMER.value})


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
    pending: bool = False
    # A rebalance seen on the broker and not counted yet: member reports may still name it.
    suspected: RebalanceEvent | None = None
    # When the newest generation counted from member reports was first reported.
    reported_at: float | None = None


def _cause(joined: Sequence[str], left: Sequence[str]) -> RebalanceCause:
    if joined and left:
        return RebalanceCause.MEMBERS_CHANGED
    if joined:
        return RebalanceCause.MEMBER_JOINED
    if left:
        return RebalanceCause.MEMBER_LEFT
    return RebalanceCause.REJOIN


# Causes that say only that the group rebalanced with the same members.
_SAME_MEMBERS = frozenset({RebalanceCause.REJOIN, RebalanceCause.STATE_CHANGE})


def explained_cause(
    cause: RebalanceCause, assignor: str | None, joined: Sequence[str], left: Sequence[str]
) -> RebalanceCause:
    """A classic Kafka Streams group rebalancing with no member joined or left did so on its own
    (a KIP-441 probing rebalance, a cooperative follow-up): named so, not left unexplained. A
    join or leave in the same generation is the cause instead, whatever the assignor."""
    if assignor == STREAMS_PROTOCOL_NAME and cause in _SAME_MEMBERS and not joined and not left:
        return RebalanceCause.STREAMS_FOLLOW_UP
    return cause


def detect_rebalances(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    sightings: Sequence[GenerationSighting],
    context: EventContext,
    settle_seconds: float = 3.0,
) -> tuple[list[RebalanceEvent], GroupTracking]:
    """Rebalance events since `tracking`, and the tracking to keep for next time.

    `sightings` are the generations members reported from tracking.generation on; the one equal
    to tracking.generation (if given) is the baseline its successor's joins and leaves are
    counted against, because members keep reporting a generation after it was first seen.
    """
    reported = _count_reported(tracking, snapshot, sightings, context, settle_seconds)
    events = list(reported.events)
    pending = reported.pending
    generation = reported.generation
    if snapshot.sources.get("generation") is Source.MEMBER_REPORTS:
        members = reported.baseline
        suspected = tracking.suspected
    elif _epoch_counted(snapshot) and snapshot.generation is not None:
        members = snapshot.member_keys
        events += _epoch_rise(tracking, snapshot, context, generation)
        generation = snapshot.generation
        suspected = None
    elif _generation_counted(snapshot) and generation is not None:
        members = snapshot.member_keys
        events += _generation_rise(tracking, snapshot, context, generation)
        generation = snapshot.generation
        # The rise counts every rebalance since the last look; one suspected before the
        # generation was first known is not in it.
        kept = tracking.suspected
        suspected = kept if kept is not None and kept.previous_generation is None else None
    else:
        members = snapshot.member_keys
        suspected = _suspect_from_broker(tracking, snapshot, context, reported.generation)
        if _generation_counted(snapshot):
            generation = snapshot.generation  # the first look that knows it: the baseline
    counted, suspected = _settle_suspicion(suspected, reported, snapshot, settle_seconds)
    events += counted
    pending = pending or suspected is not None

    last = events[-1] if events else None
    updated = replace(
        tracking,
        generation=generation,
        state=snapshot.state,
        members=members,
        rebalances=tracking.rebalances + len(events),
        last_rebalance_at=last.detected_at if last else tracking.last_rebalance_at,
        last_cause=last.cause.value if last else tracking.last_cause,
        observed=True,
        pending=pending,
        suspected=suspected,
        reported_at=reported.reported_at,
    )
    return events, updated


def _epoch_counted(snapshot: GroupSnapshot) -> bool:
    """Whether the group's generation is a streams or KIP-848 group's epoch as its broker
    reported it."""
    return (
        snapshot.protocol in _EPOCH_PROTOCOLS
        and snapshot.sources.get("generation") is Source.BROKER
    )


def _settle_suspicion(
    suspected: RebalanceEvent | None,
    reported: _Reported,
    snapshot: GroupSnapshot,
    settle_seconds: float,
) -> tuple[list[RebalanceEvent], RebalanceEvent | None]:
    """(the suspected rebalance, counted once it is over; what is still suspected): a
    suspicion the members reported is theirs to count, and one still going stays held."""
    if suspected is None:
        return [], None
    if (
        reported.reported_at is not None
        and reported.reported_at >= suspected.detected_at - settle_seconds
    ):
        return [], None  # the members reported it: counted from their reports
    if (
        snapshot.state not in REBALANCING_STATES
        and snapshot.observed_at - suspected.detected_at >= 2 * settle_seconds
    ):
        return [suspected], None
    return [], suspected


def _generation_counted(snapshot: GroupSnapshot) -> bool:
    """Whether the group's generation is a classic group's as its broker's describe shows it
    (planning/observing.broker_generation)."""
    return (
        snapshot.protocol == GroupProtocol.CLASSIC.value
        and snapshot.sources.get("generation") is Source.BROKER
        and snapshot.generation is not None
    )


def _generation_rise(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    context: EventContext,
    generation: int,
) -> list[RebalanceEvent]:
    """One rebalance a classic generation the group went through since the last look, however
    short; the members that joined and left since are named on the first."""
    assert snapshot.generation is not None
    current = snapshot.member_keys
    joined = tuple(sorted(current - tracking.members))
    left = tuple(sorted(tracking.members - current))
    events = []
    for step in range(generation, snapshot.generation):
        change = _Change(joined, left, snapshot.members) if step == generation else _UNNAMED
        cause = _cause(change.joined, change.left) if change.joined or change.left else None
        epochs = (step, step + 1)
        events.append(
            _event(
                context,
                snapshot,
                cause or RebalanceCause.STATE_CHANGE,
                epochs,
                None,
                change,
                Source.BROKER,
            )
        )
    return events


def _epoch_rise(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    context: EventContext,
    generation: int | None,
) -> list[RebalanceEvent]:
    """One rebalance when a streams group's epoch rose since the last look (several rises
    between two looks are one event naming both epochs)."""
    current = snapshot.member_keys
    rose = (
        generation is not None
        and snapshot.generation is not None
        and snapshot.generation > generation
    )
    if not (tracking.observed and rose):
        return []
    joined = tuple(sorted(current - tracking.members))
    left = tuple(sorted(tracking.members - current))
    cause = _cause(joined, left) if joined or left else RebalanceCause.STATE_CHANGE
    change = _Change(joined, left, snapshot.members)
    epochs = (generation, snapshot.generation)
    return [_event(context, snapshot, cause, epochs, None, change, Source.BROKER)]


@dataclass(frozen=True)
class _Reported:
    """The rebalances counted from member reports, and where the counting stopped."""

    events: list[RebalanceEvent]
    # The newest generation counted, and its members: the next one's baseline.
    generation: int | None
    baseline: frozenset[str]
    reported_at: float | None
    # A generation not every member has reported yet.
    pending: bool


def _count_reported(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    sightings: Sequence[GenerationSighting],
    context: EventContext,
    settle_seconds: float,
) -> _Reported:
    events: list[RebalanceEvent] = []
    generation = tracking.generation
    floor = generation_or(tracking.generation)
    # Members as the broker lists them are known by their client's address; members as they
    # report are known by pod name. Until a reported generation has been counted, what tracking
    # holds is the broker's view, and comparing it with reports would name every address as
    # having left: the first reported generation is counted against nobody instead.
    baseline = tracking.members if tracking.generation is not None else frozenset()
    ordered = sorted(sightings, key=lambda sighting: sighting.generation)
    newest = ordered[-1].generation if ordered else floor
    pending = False
    reported_at = tracking.reported_at
    for sighting in ordered:
        if sighting.generation == floor:
            baseline = sighting.members
    for sighting in (s for s in ordered if s.generation > floor):
        if not _complete(sighting, newest, snapshot, settle_seconds):
            # Members report a new generation one by one; naming its joins and leaves before
            # they all have would blame members that are merely late to report.
            pending = True
            break
        joined = tuple(sorted(sighting.members - baseline))
        left = tuple(sorted(baseline - sighting.members))
        if sighting.first_seen >= tracking.since:
            change = _Change(joined, left, len(sighting.members))
            events.append(
                _event(
                    context,
                    snapshot,
                    _cause(joined, left),
                    (generation, sighting.generation),
                    sighting.first_seen,
                    change,
                    Source.MEMBER_REPORTS,
                )
            )
        generation = sighting.generation
        baseline = sighting.members
        reported_at = max(reported_at or sighting.first_seen, sighting.first_seen)
    return _Reported(events, generation, baseline, reported_at, pending)


def _suspect_from_broker(
    tracking: GroupTracking,
    snapshot: GroupSnapshot,
    context: EventContext,
    generation: int | None,
) -> RebalanceEvent | None:
    """Without member reports: the rebalance the broker shows (the group entered a rebalancing
    state, or its listed members changed), held as suspected until it is counted; the one
    already suspected, if any, is kept."""
    suspected = tracking.suspected
    if not tracking.observed or suspected is not None:
        return suspected
    current = snapshot.member_keys
    joined = tuple(sorted(current - tracking.members))
    left = tuple(sorted(tracking.members - current))
    entered = snapshot.state in REBALANCING_STATES and tracking.state not in REBALANCING_STATES
    members_moved = (
        snapshot.sources.get("members") is Source.BROKER
        and bool(joined or left)
        and snapshot.state not in REBALANCING_STATES
    )
    if not (entered or members_moved):
        return None
    cause = _cause(joined, left) if members_moved else RebalanceCause.STATE_CHANGE
    change = _Change(joined, left, snapshot.members)
    return _event(context, snapshot, cause, (generation, None), None, change, Source.BROKER)


@dataclass(frozen=True)
class _Change:
    joined: tuple[str, ...]
    left: tuple[str, ...]
    members: int


_UNNAMED = _Change((), (), 0)


def _event(
    context: EventContext,
    snapshot: GroupSnapshot,
    cause: RebalanceCause,
    generations: tuple[int | None, int | None],
    seen: float | None,
    change: _Change,
    source: Source,
) -> RebalanceEvent:
    """A rebalance from generation `generations[0]` to `generations[1]`, seen at `seen` (None:
    at the snapshot)."""
    previous, generation = generations
    return RebalanceEvent(
        namespace=context.namespace,
        name=context.name,
        group_id=context.group_id,
        cluster=context.cluster,
        generation=generation,
        previous_generation=previous,
        cause=explained_cause(cause, snapshot.assignor, change.joined, change.left),
        detected_at=snapshot.observed_at if seen is None else seen,
        started_at=None,
        members=change.members,
        joined=change.joined,
        left=change.left,
        source=source.value,
        state=snapshot.state,
    )


def _complete(
    sighting: GenerationSighting, newest: int, snapshot: GroupSnapshot, settle_seconds: float
) -> bool:
    """Whether every member that will report this generation has done so, as far as we can tell."""
    if sighting.generation < newest:
        return True
    if snapshot.member_keys <= sighting.members:
        return True
    return snapshot.observed_at - sighting.first_seen >= settle_seconds


def generation_or(value: int | None, default: int = -1) -> int:
    return default if value is None else value
