"""The history records of one observation beyond the rebalances: member joins, the start-up
each join belongs to, and the settings in force. Pure.

A join is a member's first `assigned` report under a new member id (structs.reports.MemberJoin):
the end of its first JoinGroup and SyncGroup, by its own clock. A pod the stagger released also
gets a pod-start record at its batch's release, the moment its start-up latency counts from
(every container's own starts and stops come from Kubernetes: planning.history_pods).
Joins are grouped so the learning job can measure how far apart the pods of one start-up
joined: inside a rollout by the stagger batch that released the pod; outside rollouts by
start-up burst, a run of joins each less than BURST_GAP_SECONDS after the previous one (a cold
start, a scale-up, a crashed pod coming back).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.streams_observing import STREAMS_PROTOCOL
from rebalancer.structs.group_configs_spec import STREAMS_DELAY_CONFIG
from rebalancer.structs.history import (
    RebalanceCause,
    RebalanceEvent,
    RecordType,
    SettingsInForce,
    member_event,
)
from rebalancer.structs.history_stalls import StallTally
from rebalancer.structs.reports import GenerationSighting, MemberJoin, MemberReport

# Pods released together join within seconds of each other (their start-up latencies); a join
# this long after the previous one is a different start-up (a restart, a later scale-up).
BURST_GAP_SECONDS = 30.0
# Joins remembered for the rebalances they caused; a rebalance is recorded seconds after its
# joins, so a few hundred cover every group size the stagger handles.
REMEMBERED_JOINS = 512
REPORTS_SOURCE = "member-reports"
# Members report a new generation one by one, and a rebalance is detected on the first reports:
# its record waits this long for the rest before it is written (the members of a cold start
# report within a second of each other).
SETTLE_SECONDS = 3.0


@dataclass(frozen=True)
class JoinContext:
    namespace: str
    name: str
    group_id: str
    cluster: str


@dataclass(frozen=True)
class RecordedJoin:
    identity: str
    generation: int
    at: float
    # When its start-up began: the release of its stagger batch, or else the first join of
    # its burst.
    first_at: float
    # Its record's batch (stagger batch or start-up burst) and rollout.
    batch_id: str | None = None
    rollout_id: str | None = None


@dataclass(frozen=True)
class JoinTracking:
    """What the observer remembers between observations about joins it has recorded."""

    sequence: int = 0  # the book's joins up to this sequence number are recorded
    burst_id: str | None = None
    burst_first_at: float | None = None
    burst_last_at: float | None = None
    # True while the open burst is a rollout's stagger batch (joins outside it start a new one).
    burst_is_batch: bool = False
    recent: tuple[RecordedJoin, ...] = ()


_INACTIVE = (RolloutPhase.IDLE, RolloutPhase.COMPLETED, RolloutPhase.FAILED)


def rollout_batch(rollout: RolloutState, member: str) -> tuple[str | None, str | None, int | None]:
    """(batch id, rollout id, batch size) when `member` is a pod the running rollout released."""
    if rollout.phase in _INACTIVE or rollout.rollout_id is None or rollout.batch < 1:
        return None, None, None
    if member not in rollout.opened:
        return None, rollout.rollout_id, None
    size = rollout.sizes[rollout.batch - 1] if rollout.batch <= len(rollout.sizes) else None
    return f"{rollout.rollout_id}-b{rollout.batch}", rollout.rollout_id, size or len(rollout.opened)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def history_settings(
    status: Mapping[str, Any],
    reports: Sequence[MemberReport],
    assignor: str | None,
    rollout: RolloutState,
    protocol: str | None = None,
    static: bool | None = None,
) -> SettingsInForce:
    """The settings in force as the operator knows them; None wherever it does not.

    The consumers' timings are known only once the operator's managed settings are in the pod
    template (status.settings.applied). The delay of a classic group is the broker-delay
    decision's; a streams group's is its own streams.initial.rebalance.delay.ms, as the broker
    read it back (status.settings.perGroupConfigs), and unknown when the operator sets none.
    `static`: whether the members have instance ids, where no reports say (a streams group's
    describe).
    """
    delivered = status.get("settings") or {}
    applied = bool(delivered.get("applied"))
    if protocol == STREAMS_PROTOCOL:
        delay = group_config_value(status, STREAMS_DELAY_CONFIG)
    else:
        delay = _zero_ok((delivered.get("brokerDelay") or {}).get("clusterMs"))
    if reports:
        static = any(report.instance_id for report in reports)
    batch_size = None
    if rollout.phase not in _INACTIVE and 1 <= rollout.batch <= len(rollout.sizes):
        batch_size = rollout.sizes[rollout.batch - 1]
    return SettingsInForce(
        initial_rebalance_delay_ms=delay,
        session_timeout_ms=_number(delivered.get("sessionTimeoutMs")) if applied else None,
        heartbeat_interval_ms=_number(delivered.get("heartbeatIntervalMs")) if applied else None,
        max_poll_interval_ms=_number(delivered.get("maxPollIntervalMs")) if applied else None,
        assignor=assignor,
        static_membership=static,
        batch_size=batch_size,
        group_protocol=protocol,
    )


def group_config_value(status: Mapping[str, Any], key: str) -> float | None:
    """A GROUP config as the broker read it back (status.settings.perGroupConfigs.configs),
    None when the operator does not set it or it is not a number. (status.settings.groupConfigs
    holds only the consumer.* configs spec.policy.settings sets for a KIP-848 group.)"""
    delivered = status.get("settings") or {}
    configs = (delivered.get("perGroupConfigs") or {}).get("configs") or {}
    entry = configs.get(key)
    if not isinstance(entry, Mapping):
        return None
    try:
        return _zero_ok(float(str(entry.get("value"))))
    except ValueError:
        return None


def _zero_ok(value: object) -> float | None:
    # A delay of 0 is a real setting, unlike a session timeout of 0.
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return None


def track_joins(
    tracking: JoinTracking,
    joins: Sequence[MemberJoin],
    *,
    context: JoinContext,
    rollout: RolloutState,
    members: int,
    state: str,
    partitions: int | None,
    settings: SettingsInForce,
) -> tuple[list[RebalanceEvent], JoinTracking]:
    """A member-join record per join not recorded yet, and the tracking to keep."""
    events: list[RebalanceEvent] = []
    recent = list(tracking.recent)
    fresh = [join for join in joins if join.sequence > tracking.sequence]
    # In the order the members stamped them, not the order their reports arrived in (which
    # can differ by milliseconds): each offset then counts from the earliest join of a pass.
    for join in sorted(fresh, key=lambda item: (item.at, item.sequence)):
        batch_id, rollout_id, batch_size = rollout_batch(rollout, join.identity)
        tracking = _burst_of(tracking, join, batch_id)
        assert tracking.burst_first_at is not None and tracking.burst_last_at is not None
        # Members' clocks differ by milliseconds: a join stamped before the first is at 0.
        first_at = min(tracking.burst_first_at, join.at)
        released = _released_at(rollout, join, batch_id)
        common: dict[str, Any] = {
            "namespace": context.namespace,
            "name": context.name,
            "group_id": context.group_id,
            "cluster": context.cluster,
            "member": join.identity,
            "members": members,
            "state": state,
            "batch_id": tracking.burst_id,
            "rollout_id": rollout_id,
            "partitions": partitions,
            "settings": replace(settings, batch_size=batch_size or settings.batch_size),
        }
        if released is not None:
            # The stagger released the pod's batch then: the start its latency counts from.
            events.append(
                member_event(RecordType.POD_START, at=released, source="operator", **common)
            )
        tracking = replace(
            tracking,
            sequence=max(tracking.sequence, join.sequence),
            burst_first_at=first_at,
            burst_last_at=max(tracking.burst_last_at, join.at),
        )
        events.append(_join_event(join, first_at, common))
        start = first_at if released is None else min(released, first_at)
        recent.append(
            RecordedJoin(
                join.identity, join.generation, join.at, start, tracking.burst_id, rollout_id
            )
        )
    return events, replace(tracking, recent=tuple(recent[-REMEMBERED_JOINS:]))


def _burst_of(tracking: JoinTracking, join: MemberJoin, batch_id: str | None) -> JoinTracking:
    """The tracking with the burst `join` belongs to open: its stagger batch when a rollout
    released it, else the open start-up burst, or a new one when that is a batch or too old."""
    if batch_id is not None:
        if tracking.burst_id == batch_id:
            return tracking
        return replace(
            tracking,
            burst_id=batch_id,
            burst_first_at=join.at,
            burst_last_at=join.at,
            burst_is_batch=True,
        )
    if (
        tracking.burst_id is None
        or tracking.burst_is_batch
        or tracking.burst_last_at is None
        or join.at - tracking.burst_last_at > BURST_GAP_SECONDS
    ):
        return replace(
            tracking,
            burst_id=f"start-{int(join.at * 1000)}",
            burst_first_at=join.at,
            burst_last_at=join.at,
            burst_is_batch=False,
        )
    return tracking


def _released_at(rollout: RolloutState, join: MemberJoin, batch_id: str | None) -> float | None:
    """When the stagger released the joining pod's batch; None outside a batch, or when the
    release is stamped after the join (it cannot be the start the join counts from)."""
    released = rollout.opened_at if batch_id is not None else None
    if released is not None and released > join.at:
        return None
    return released


def _join_event(join: MemberJoin, first_at: float, common: dict[str, Any]) -> RebalanceEvent:
    event = member_event(RecordType.MEMBER_JOIN, at=join.at, source=REPORTS_SOURCE, **common)
    return replace(
        event,
        generation=join.generation,
        join_offsets_ms=(round((join.at - first_at) * 1000.0, 3),),
    )


def enrich_rebalances(
    events: Sequence[RebalanceEvent],
    sightings: Sequence[GenerationSighting],
    tracking: JoinTracking,
    settings: SettingsInForce,
    partitions: int | None,
    stalls: Mapping[int, StallTally] | None = None,
) -> list[RebalanceEvent]:
    """Rebalance records with their joins, start, time to Stable and settings in force.

    A rebalance that members joined started with their start-up (the release of their stagger
    batch, or else the first join of their burst), and was over when the last member of its
    generation reported it: that span is its time to Stable. Without joins (leaves, rejoins,
    broker-only sightings) start and time to Stable stay unknown.

    Stop-the-world: a start-up from an empty group kept every partition waiting its whole time
    to Stable. For a group that was consuming, the partition-seconds between each partition's
    release (a member's revoked, lost or stopped report) and its assignment in this generation
    (`stalls`, structs.history_stalls); unknown when a partition's release was never reported
    (its owner crashed, or the operator started after it) or no member reported the generation.
    """
    by_generation = {sighting.generation: sighting for sighting in sightings}
    tallies = stalls or {}
    enriched: list[RebalanceEvent] = []
    for event in events:
        updated = replace(event, settings=settings, partitions=event.partitions or partitions)
        sighting = by_generation.get(event.generation) if event.generation is not None else None
        tally = tallies.get(event.generation) if event.generation is not None else None
        if sighting is not None and tally is not None:
            estimate = tally.estimate(updated.partitions)
            updated = replace(updated, stop_the_world_partition_s=estimate)
        joiners = [
            join
            for join in tracking.recent
            if join.identity in event.joined and join.generation == event.generation
        ]
        if sighting is not None and joiners:
            updated = _timed_from_joins(updated, event, sighting, joiners)
        enriched.append(updated)
    return enriched


def _timed_from_joins(
    updated: RebalanceEvent,
    event: RebalanceEvent,
    sighting: GenerationSighting,
    joiners: Sequence[RecordedJoin],
) -> RebalanceEvent:
    """The record with its start (the joiners' start-up), join offsets and time to Stable (until
    the last member reported the generation)."""
    first = min(join.at for join in joiners)
    started = min(join.first_at for join in joiners)
    offsets = tuple(sorted(round((join.at - first) * 1000.0, 3) for join in joiners))
    stable_ms = (sighting.last_at - started) * 1000.0
    known = stable_ms >= 0
    # A group that was empty consumed nothing from its start-up until every member was
    # assigned: every partition waited the whole time to Stable.
    from_empty = not event.left and set(event.joined) >= sighting.members
    stalled = updated.partitions if from_empty and known else None
    updated = replace(
        updated,
        started_at=started,
        join_offsets_ms=offsets,
        time_to_stable_ms=round(stable_ms, 3) if known else None,
    )
    if from_empty:
        updated = replace(
            updated,
            stop_the_world_partition_s=(
                None if stalled is None else round(stalled * stable_ms / 1000.0, 3)
            ),
        )
    return updated


def _cause(cause: RebalanceCause, joined: bool, left: bool) -> RebalanceCause:
    if cause is RebalanceCause.ENFORCED:
        return cause
    if joined and left:
        return RebalanceCause.MEMBERS_CHANGED
    if joined:
        return RebalanceCause.MEMBER_JOINED
    return cause


def settle_rebalances(
    pending: Sequence[RebalanceEvent],
    sightings: Sequence[GenerationSighting],
    tracking: JoinTracking,
    now: float,
) -> tuple[list[RebalanceEvent], list[RebalanceEvent]]:
    """(records ready to write, records still waiting) among rebalances detected earlier.

    A record is ready once its generation was first reported SETTLE_SECONDS ago or a newer one
    exists; it then names every member whose first join was into its generation, also those
    that reported after the rebalance was detected.
    """
    by_generation = {sighting.generation: sighting for sighting in sightings}
    newest = max(by_generation, default=None)
    ready: list[RebalanceEvent] = []
    waiting: list[RebalanceEvent] = []
    for event in pending:
        sighting = None if event.generation is None else by_generation.get(event.generation)
        if sighting is None:
            ready.append(event)
            continue
        newer = newest is not None and newest > sighting.generation
        if not newer and now - sighting.first_seen < SETTLE_SECONDS:
            waiting.append(event)
            continue
        late = {
            join.identity for join in tracking.recent if join.generation == event.generation
        } - set(event.joined)
        joined = tuple(sorted(set(event.joined) | late))
        ready.append(
            replace(
                event,
                joined=joined,
                members=max(event.members, len(sighting.members)),
                cause=_cause(event.cause, bool(joined), bool(event.left)) if late else event.cause,
            )
        )
    return ready, waiting
