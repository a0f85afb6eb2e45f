"""One observer per ConsumerGroup: describe, merge reports, detect rebalances, write status."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import kopf

from rebalancer import metrics
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import (
    KafkaGatewayError,
    KafkaRequestFailed,
    KafkaUnavailable,
)
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.librdkafka_config import build_client_config
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.clients.resolving import SecretUnavailable, resolve_security
from rebalancer.clients.streams_groups import (
    StreamsGroupUnreadable,
    describe_streams_group,
    read_streams_group,
)
from rebalancer.planning.backoff import backoff_delay
from rebalancer.planning.consumer_settings_plans import settings_conditions
from rebalancer.planning.enforce_conditions import enforcement_conditions
from rebalancer.planning.history_pods import PodRecordContext
from rebalancer.planning.history_records import (
    JoinContext,
    JoinTracking,
    enrich_rebalances,
    history_settings,
    settle_rebalances,
    track_joins,
)
from rebalancer.planning.kafka_problems import (
    hidden_topics,
    kafka_problem,
    refused_topics_problem,
)
from rebalancer.planning.observe_cadence import Cadence, Look, next_delay, on_grid
from rebalancer.planning.observing import (
    combine_observation,
    coordinator_from_status,
    coordinator_move_message,
    coordinator_moved,
)
from rebalancer.planning.permissions import REASON as PERMISSION_DENIED
from rebalancer.planning.permissions import denial_conditions
from rebalancer.planning.protocol_checks import ProtocolVerdict, judge_protocol, reads_as_streams
from rebalancer.planning.rebalances import (
    REBALANCING_STATES,
    EventContext,
    GroupTracking,
    detect_rebalances,
)
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.planning.rollout_statuses import rollout_conditions
from rebalancer.planning.stable_spells import StableSpell, track_stable
from rebalancer.planning.status_writes import CHANGED, status_write_reason, visible_status
from rebalancer.planning.statuses import (
    failure_conditions,
    observation_conditions,
    render_group,
)
from rebalancer.planning.streams_observing import (
    StreamsMemberWatch,
    group_tasks,
    may_be_a_streams_group,
    render_streams_group,
    streams_joins,
    streams_snapshot,
    streams_static,
)
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.learning import PodWatch, learning_status
from rebalancer.reconcilers.ownership import ClaimIndex, refusal_of
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.sleeping import Stopping, sleep_or_wake
from rebalancer.structs.brokers import BrokerGroupView, cluster_key, resolve_profile
from rebalancer.structs.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    merge_conditions,
)
from rebalancer.structs.consumer_group import read_consumer_group, written_status
from rebalancer.structs.enforce_policy import enforcement_asked
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.kafka_properties import SettingsError
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.reports import MemberReport, ReportBook
from rebalancer.structs.snapshots import GroupSnapshot, moved_for_rollouts
from rebalancer.structs.specs import ConsumerGroupSpec, ProtocolChoice
from rebalancer.structs.streams_groups import StreamsGroupView
from rebalancer.structs.times import format_rfc3339, read_rfc3339

logger = logging.getLogger(__name__)
RENEW_AFTER_FAILURES = 3
# The topic metadata (partition counts) every observer of a cluster shares is read at most this
# often: one Metadata request for all its groups, a topic's new partitions seen this much later.
TOPIC_METADATA_MAX_AGE_SECONDS = 5.0


def tracking_from_status(status: Mapping[str, Any], since: float) -> GroupTracking:
    """Resume counting where the previous operator process stopped."""
    group = status.get("group") or {}
    last = group.get("lastRebalanceTime")
    last_at = read_rfc3339(last)
    generation = group.get("generation")
    return GroupTracking(
        since=since,
        generation=generation if isinstance(generation, int) else None,
        rebalances=int(group.get("rebalances") or 0),
        last_rebalance_at=last_at,
        last_cause=group.get("lastRebalanceCause"),
    )


@dataclass(frozen=True)
class _Look:
    """What one observation read: the group from Kafka merged with its members' reports."""

    gateway: AdminGateway
    book: ReportBook
    reports: list[MemberReport]
    snapshot: GroupSnapshot
    streams: StreamsGroupView | None
    # The partitions of the group's subscription.
    partitions: int
    # A refusal to describe some of the subscribed topics.
    refused: KafkaRequestFailed | None
    # The CoordinatorMoved message, when another node coordinates the group than last time.
    moved: str | None
    now: float
    # spec.policy.protocol against the broker: Degraded ProtocolMismatch when they disagree.
    protocol: ProtocolVerdict = field(default_factory=ProtocolVerdict)


@dataclass
class Observer:
    deps: Dependencies
    namespace: str
    name: str
    tracking: GroupTracking
    gateway_key: str | None = None
    gateway: AdminGateway | None = None
    failures: int = 0
    last_failure_reason: str | None = None
    # The refusal to describe subscribed topics last warned about (warned once per change).
    refused_warned: str | None = None
    # The status as last written, without its freshness stamp (planning.status_writes).
    last_written: dict[str, Any] | None = None
    last_written_at: float | None = None
    # Whether the last look found something a user would see changed, and whether the group
    # was moving (rebalancing, rolling out): the next look's delay (planning.observe_cadence).
    changed: bool = True
    busy: bool = False
    cadence: Cadence = field(default_factory=Cadence)
    joins: JoinTracking = field(default_factory=JoinTracking)
    pods: PodWatch = field(default_factory=PodWatch)
    learning_applied_at: float | None = None
    # Rebalances detected but not written yet: their late members may still report.
    unwritten: list[RebalanceEvent] = field(default_factory=list)
    # Set after repeated unanswered requests: the next observation uses a new admin client.
    renew_gateway: bool = False
    # The node that coordinated the group at the last look (status.group.coordinator after a
    # restart): another one is told in a CoordinatorMoved Event.
    coordinator: int | None = None
    # Every ConsumerGroup's claims (handlers.ownership): a newer rival of an owner observes
    # and reports nothing of the group.
    claims: ClaimIndex | None = None
    # The not-owner message last told in an Event (told once per change).
    not_owner_told: str | None = None
    # spec.groupId as last parsed: the group_id label of this resource's series.
    group_id: str = ""
    # Since when the group has not been Stable with every partition assigned (its time to
    # Stable, rebalancer_rebalance_time_to_stable_seconds).
    stable: StableSpell = field(default_factory=StableSpell)
    # The admin client's configuration, for the streams-group reader (same cluster, security).
    kafka_config: dict[str, str] = field(default_factory=dict)
    # The streams-group reader's last failure, logged once per change.
    streams_unreadable: str | None = None
    # A streams group's member ids seen so far: a new one is a join (its history record).
    streams_members: StreamsMemberWatch = field(default_factory=StreamsMemberWatch)
    # The ProtocolMismatch message last told in an Event (told once per change).
    mismatch_warned: str | None = None

    def release(self) -> None:
        if self.gateway_key is not None:
            self.deps.pool.release(self.gateway_key)
        self.gateway_key = None
        self.gateway = None

    async def _gateway(self, spec: ConsumerGroupSpec) -> AdminGateway:
        security = await resolve_security(self.deps.kube, self.namespace, spec.kafka)
        config = build_client_config(list(spec.kafka.bootstrap_servers), security)
        config["socket.timeout.ms"] = str(spec.kafka.request_timeout_seconds * 1000)
        key = cluster_key(list(spec.kafka.bootstrap_servers), security)
        self.kafka_config = config
        if key != self.gateway_key:
            self.release()
            self.gateway = self.deps.pool.acquire(key, config)
            self.gateway_key = key
        elif self.gateway is not None and (self.gateway.closed or self.renew_gateway):
            self.gateway = self.deps.pool.renew(key, self.gateway, config)
        self.renew_gateway = False
        assert self.gateway is not None
        return self.gateway

    async def observe_once(self, body: kopf.Body, spec: ConsumerGroupSpec) -> None:
        look = await self._look(spec)
        snapshot = look.snapshot
        context = EventContext(
            self.namespace, self.name, spec.group_id, ",".join(spec.kafka.bootstrap_servers)
        )
        events = self._detect_rebalances(spec, look, context)
        before = self.deps.sightings.record(
            self.namespace, self.name, snapshot, self.tracking.rebalances
        )
        status = written_status(body)
        rollout = RolloutState.from_status(status.get("rollout"))
        # The planner steps on this snapshot now rather than at its next poll (a batch that has
        # joined or settled lets the next one go a poll sooner), once this pass has written:
        # woken before, its status write could land first and this pass's conditions, merged
        # from the rollout as it was, would then undo its Progressing.
        previous = before.snapshot if before is not None else None
        wake_rollout = rollout.phase.active and moved_for_rollouts(previous, snapshot)
        self.busy = rollout.phase.active or snapshot.state in REBALANCING_STATES
        ready, replicas = await self._record_history(spec, look, context, status, rollout, events)
        self._announce(body, spec, events, look.moved)
        # Remembered once told: an observation that fails before this tells it the next time.
        if snapshot.coordinator is not None:
            self.coordinator = snapshot.coordinator
        conditions = self._conditions(body, spec, look, replicas)
        fields: dict[str, Any] = {"group": self._publish(spec, look, rollout, ready)}
        if spec.policy.learning.mode.value != "off" or written_status(body).get("learning"):
            fields["learning"], self.learning_applied_at = await learning_status(
                self.deps, body, self.namespace, self.name, spec, self.learning_applied_at
            )
        self.deps.denials.clear(self.namespace, self.name, "observe")
        await self._write(body, conditions, fields, force=bool(events) or look.moved is not None)
        if wake_rollout:
            self.deps.rollout_wakeup(self.namespace, self.name).set()
        if self.failures:
            kopf.info(body, reason="Recovered", message="the group is observed again")
        self.failures = 0
        self.last_failure_reason = None

    async def _look(self, spec: ConsumerGroupSpec) -> _Look:
        """Read the group from Kafka and merge its members' fresh reports into one snapshot."""
        gateway = await self._gateway(spec)
        view, total, refused = await self._read_kafka(gateway, spec)
        now = time.time()
        book = self.deps.hub.book(spec.group_id)
        ttl = spec.policy.observe.report_ttl_seconds
        reports = [
            report
            for report in book.live_members(now, ttl)
            if report.namespace in (None, self.namespace)
            and report.consumer_group in (None, self.name)
        ]
        streams = await self._streams_group(spec, view)
        if streams is None:
            snapshot = combine_observation(view, reports, total, now)
        else:
            snapshot = streams_snapshot(streams, total, now)
        verdict = judge_protocol(spec.policy.protocol, spec.group_id, view, streams is not None)
        if verdict.shown is not None:
            snapshot = replace(snapshot, protocol=verdict.shown)
        moved = await self._coordinator_move(gateway, snapshot.coordinator)
        return _Look(gateway, book, reports, snapshot, streams, total, refused, moved, now, verdict)

    def _detect_rebalances(
        self, spec: ConsumerGroupSpec, look: _Look, context: EventContext
    ) -> list[RebalanceEvent]:
        """The rebalances since the last look (self.tracking moves on), those the enforcer asked
        for labelled so."""
        floor = -1 if self.tracking.generation is None else self.tracking.generation
        sightings = look.book.generations_after(floor - 1)
        events, self.tracking = detect_rebalances(self.tracking, look.snapshot, sightings, context)
        events = [self._label_enforced(spec.group_id, event) for event in events]
        if events:
            self.tracking = replace(self.tracking, last_cause=events[-1].cause.value)
        return events

    async def _record_history(
        self,
        spec: ConsumerGroupSpec,
        look: _Look,
        context: EventContext,
        status: Mapping[str, Any],
        rollout: RolloutState,
        events: list[RebalanceEvent],
    ) -> tuple[list[RebalanceEvent], int | None]:
        """Write the joins, pod records and settled rebalances to the history (when enabled);
        (the rebalances settled now, the workload's spec.replicas or None when it is gone).
        A rebalance waits unwritten while its late members may still report."""
        snapshot, book, total = look.snapshot, look.book, look.partitions
        in_force = history_settings(
            status,
            look.reports,
            snapshot.assignor,
            rollout,
            protocol=snapshot.protocol,
            static=None if look.streams is None else streams_static(look.streams),
        )
        join_context = JoinContext(self.namespace, self.name, spec.group_id, context.cluster)
        # A streams application reports nothing: its joins are the describe's new members.
        described, self.streams_members = streams_joins(
            self.streams_members, look.streams, look.now, self.joins.sequence
        )
        joins, self.joins = track_joins(
            self.joins,
            described if look.streams is not None else book.joins_after(self.joins.sequence),
            context=join_context,
            rollout=rollout,
            members=snapshot.members,
            state=snapshot.state,
            partitions=total,
            settings=in_force,
        )
        waiting = [*self.unwritten, *events]
        oldest = min((e.generation for e in waiting if e.generation is not None), default=0)
        settled = book.generations_after(oldest - 1)
        ready, self.unwritten = settle_rebalances(waiting, settled, self.joins, look.now)
        ready = enrich_rebalances(
            ready, settled, self.joins, in_force, total, book.stalls.tallies()
        )
        pod_context = PodRecordContext(
            join_context, snapshot.members, snapshot.state, total, in_force
        )
        pod_records, replicas = await self.pods.look(
            self.deps, self.namespace, spec, context=pod_context, joins=self.joins.recent
        )
        if spec.policy.history_enabled:
            await self.deps.recorder.record([*joins, *pod_records, *ready])
        return ready, replicas

    def _announce(
        self,
        body: kopf.Body,
        spec: ConsumerGroupSpec,
        events: list[RebalanceEvent],
        moved: str | None,
    ) -> None:
        """An Event and a count for each rebalance, an Event for a coordinator that moved."""
        for event in events:
            kopf.info(body, reason="Rebalance", message=event.describe())
            metrics.record_rebalance(self.namespace, self.name, spec.group_id, event.cause.value)
        if moved is not None:
            kopf.info(body, reason="CoordinatorMoved", message=moved)
            logger.info("%s/%s: %s", self.namespace, self.name, moved)

    def _publish(
        self,
        spec: ConsumerGroupSpec,
        look: _Look,
        rollout: RolloutState,
        ready: list[RebalanceEvent],
    ) -> dict[str, Any]:
        """Publish the look's metrics; its status.group."""
        snapshot = look.snapshot
        profile = resolve_profile(spec.kafka.profile.declared, look.gateway.profile)
        group = render_group(snapshot, self.tracking, None if profile is None else profile.value)
        if look.streams is not None:
            group = render_streams_group(group, look.streams)
        tasks = None if look.streams is None else group_tasks(look.streams).by_kind()
        metrics.publish_streams_tasks(self.namespace, self.name, spec.group_id, tasks)
        metrics.publish_snapshot(self.namespace, self.name, spec.group_id, snapshot, self.tracking)
        to_stable, self.stable = track_stable(self.stable, snapshot)
        metrics.record_time_to_stable(self.namespace, self.name, spec.group_id, to_stable)
        metrics.record_rebalance_records(self.namespace, self.name, spec.group_id, ready)
        # From status.rollout, as the rollout daemon last wrote it: every group has a phase
        # (Idle when its rollouts are not managed), so queries need no absent() guards.
        metrics.publish_rollout(self.namespace, self.name, spec.group_id, rollout)
        return group

    def _conditions(
        self, body: kopf.Body, spec: ConsumerGroupSpec, look: _Look, replicas: int | None
    ) -> list[Condition]:
        """The observation's conditions (planning.statuses.observation_conditions, by type);
        a refusal to describe topics and a protocol mismatch warned of once per change, as
        report_failure warns once per reason."""
        snapshot, refused = look.snapshot, look.refused
        mismatch = look.protocol.condition()
        if mismatch is not None and mismatch.message != self.mismatch_warned:
            kopf.warn(body, reason=mismatch.reason, message=mismatch.message)
        self.mismatch_warned = None if mismatch is None else mismatch.message
        # Scaled to zero (KEDA, a pause, kubectl scale): an Empty group is what was asked for.
        at_zero = f"{spec.workload.kind.value} {spec.workload.name}" if replicas == 0 else None
        missing = None
        if replicas is None:
            missing = f"{spec.workload.kind.value} {self.namespace}/{spec.workload.name}"
        refusal = None
        if refused is not None:
            message = refused_topics_problem(str(refused), spec.kafka, self.namespace)
            refusal = Condition(
                ConditionType.DEGRADED, ConditionStatus.TRUE, refused.reason, message
            )
        if missing is None and refusal is not None:
            if refusal.message != self.refused_warned:
                kopf.warn(body, reason=refusal.reason, message=refusal.message)
            self.refused_warned = refusal.message
        elif missing is None:
            self.refused_warned = None
        return observation_conditions(
            snapshot,
            scaled_to_zero=at_zero,
            workload_missing=missing,
            topics_refused=refusal,
            protocol_mismatch=mismatch,
        )

    async def _read_kafka(
        self, gateway: AdminGateway, spec: ConsumerGroupSpec
    ) -> tuple[BrokerGroupView, int, KafkaRequestFailed | None]:
        """(the group as its coordinator describes it, the partitions of its subscription, a
        refusal to describe some of its topics). The describe shares a call with the other
        groups of the cluster looked at the same moment, and the topic metadata is one read
        per TOPIC_METADATA_MAX_AGE_SECONDS for all of them."""
        view = await gateway.describe_group(spec.group_id)
        topics = await gateway.list_topics(max_age=TOPIC_METADATA_MAX_AGE_SECONDS)
        # Absent from the metadata: not created yet, or hidden for want of Describe (a refusal
        # to describe them tells; the group is observed all the same).
        refused = await gateway.refused_topics(hidden_topics(spec.subscription, topics))
        total = sum(count for topic, count in topics.items() if spec.subscription.matches(topic))
        return view, total, refused

    async def _streams_group(
        self, spec: ConsumerGroupSpec, view: BrokerGroupView
    ) -> StreamsGroupView | None:
        """The group's StreamsGroupDescribe when the broker lists it as a streams group
        (KIP-1071), which librdkafka describes as a Dead classic group with no members, or
        straight away when spec.policy.protocol declares one; None for every other group."""
        if spec.policy.protocol is ProtocolChoice.STREAMS:
            if not reads_as_streams(spec.policy.protocol, view):
                return None  # a live group of another protocol: ProtocolMismatch says so
            read = describe_streams_group
        elif may_be_a_streams_group(view):
            read = read_streams_group
        else:
            return None
        try:
            return await read(self.kafka_config, spec.group_id)
        except (StreamsGroupUnreadable, SettingsError, OSError) as error:
            # The reader is aiokafka's (no inline PEMs, no OAUTHBEARER): where it cannot read,
            # the group is observed as librdkafka saw it, as before streams groups were read.
            if str(error) != self.streams_unreadable:
                logger.warning(
                    "%s/%s: group %r is observed as librdkafka describes it: %s",
                    self.namespace,
                    self.name,
                    spec.group_id,
                    error,
                )
            self.streams_unreadable = str(error)
            return None

    async def yields(self, body: kopf.Body) -> bool:
        """Whether this resource takes no action: an older ConsumerGroup owns its group or
        workload, or the workload's consumers use another group id. If so the group is not
        observed: its status.group is removed, Ready and Degraded say why (naming the owner,
        or both group ids), an Event tells it once, and nothing is recorded or learned."""
        refusal = refusal_of(body, self.namespace, self.claims, self.deps.hub)
        if refusal is None:
            if self.not_owner_told is not None:
                kopf.info(
                    body,
                    reason="OwnershipRestored",
                    message="this resource manages its group and workload again; observing "
                    "the group",
                )
                self.not_owner_told = None
            return False
        reason, message = refusal
        if message != self.not_owner_told:
            kopf.warn(body, reason=reason, message=message)
            logger.warning("%s/%s: %s", self.namespace, self.name, message)
        self.not_owner_told = message
        # What an earlier look wrote described a group this resource does not manage.
        self.deps.sightings.forget(self.namespace, self.name)
        metrics.forget_group(self.namespace, self.name)
        self.release()
        status = written_status(body)
        conditions = [
            Condition(ConditionType.READY, ConditionStatus.FALSE, reason, message),
            Condition(ConditionType.PROGRESSING, ConditionStatus.FALSE, reason, message),
            Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, reason, message),
        ]
        merged = merge_conditions(
            status.get("conditions") or [],
            conditions,
            now=format_rfc3339(time.time()),
            generation=body.metadata.get("generation"),
        )
        fields: dict[str, Any] = {
            "observedGeneration": body.metadata.get("generation"),
            "conditions": merged,
        }
        if status.get("group") is not None:
            # Null is pruned by the API server: the field goes.
            fields["group"] = None
        visible = visible_status(fields)
        self.changed = visible != self.last_written
        if self.changed or status.get("group") is not None:
            await patch_status(self.deps.kube, self.namespace, self.name, status, fields)
            metrics.record_status_write(CHANGED)
            self.last_written = visible
            self.last_written_at = time.time()
        return True

    async def _coordinator_move(self, gateway: AdminGateway, now_at: int | None) -> str | None:
        """The CoordinatorMoved message when another node coordinates the group than at the
        last look, None otherwise. The cluster is described only then, to say how many brokers
        it has left."""
        before = self.coordinator
        if not coordinator_moved(before, now_at):
            return None
        assert before is not None and now_at is not None
        try:
            brokers: int | None = (await gateway.describe_cluster()).broker_count
        except KafkaGatewayError:
            brokers = None
        return coordinator_move_message(before, now_at, brokers)

    def _label_enforced(self, group_id: str, event: RebalanceEvent) -> RebalanceEvent:
        if event.generation is None:
            return event
        if self.deps.hub.take_expected(group_id, event.detected_at) is None:
            return event
        return replace(event, cause=RebalanceCause.ENFORCED)

    async def report_failure(self, body: kopf.Body, reason: str, message: str) -> float:
        metrics.record_observation_failure(self.namespace, self.name, self.group_id, reason)
        self.failures += 1
        if reason != self.last_failure_reason:
            kopf.warn(body, reason=reason, message=message)
            logger.warning("%s/%s: %s", self.namespace, self.name, message)
        self.last_failure_reason = reason
        delay = backoff_delay(self.failures)
        try:
            await self._write(
                body, failure_conditions(reason, f"{message} (retrying in {delay:.0f}s)"), {}, True
            )
        except PermissionDenied as error:
            # The status is refused as well: the log and the Event are all there is.
            report_denied(self.deps, body, self.namespace, self.name, "status", error)
        return delay

    async def _write(
        self,
        body: kopf.Body,
        conditions: list[Condition],
        fields: dict[str, Any],
        force: bool,
    ) -> None:
        status = written_status(body)
        # Rollout conditions go last, so a routine "observed" never hides a failed rollout.
        conditions = [
            *conditions,
            *rollout_conditions(RolloutState.from_status(status.get("rollout"))),
            *settings_conditions(status.get("settings")),
            # An enforce block removed takes its refusal with it (its timer no longer runs).
            *enforcement_conditions(
                status.get("enforcement") if enforcement_asked(body.get("spec") or {}) else None
            ),
            # Last: while a grant is missing, what needs it is not done, whatever else holds.
            *denial_conditions(self.deps.denials.of(self.namespace, self.name)),
        ]
        metrics.publish_conditions(self.namespace, self.name, self.group_id, conditions)
        now = time.time()
        merged = merge_conditions(
            status.get("conditions") or [],
            conditions,
            now=format_rfc3339(now),
            generation=body.metadata.get("generation"),
        )
        new_fields: dict[str, Any] = {
            "observedGeneration": body.metadata.get("generation"),
            "conditions": merged,
            **fields,
        }
        visible = visible_status(new_fields)
        self.changed = visible != self.last_written
        reason = status_write_reason(
            visible,
            self.last_written,
            forced=force,
            last_written_at=self.last_written_at,
            now=now,
            refresh_seconds=self.deps.settings.status_refresh_seconds,
        )
        if reason is None:
            return
        await patch_status(self.deps.kube, self.namespace, self.name, status, new_fields)
        metrics.record_status_write(reason)
        self.last_written = visible
        self.last_written_at = now

    def next_delay(self, interval: float) -> float:
        """Seconds until the next look after a successful one (planning.observe_cadence)."""
        look = Look(
            changed=self.changed,
            busy=self.busy,
            pending=bool(self.tracking.pending or self.unwritten),
        )
        delay, self.cadence = next_delay(
            interval, look, self.cadence, quiet_factor=self.deps.settings.quiet_observe_factor
        )
        if look.busy or look.pending:
            return delay
        return on_grid(delay, time.time(), interval)


async def observe_forever(observer: Observer, body: kopf.Body, stopped: Stopping) -> None:
    hub = observer.deps.hub
    spacing = observer.deps.settings.min_observe_spacing_seconds
    try:
        while not stopped:
            try:
                spec = read_consumer_group(body, namespace=observer.namespace).spec
            except SpecInvalid:
                # The change handler has already reported it; wait for the user's fix.
                await stopped.wait(5)
                continue
            observer.group_id = spec.group_id
            wakeup = hub.wakeup(spec.group_id)
            wakeup.clear()
            delay: float = spec.policy.observe.interval_seconds
            started = time.monotonic()
            succeeded = False
            try:
                if await observer.yields(body):
                    await sleep_or_wake(delay, wakeup.wait, stopped, settle=spacing)
                    continue
                await observer.observe_once(body, spec)
                succeeded = True
                delay = observer.next_delay(delay)
            except ResourceGone:
                return
            except PermissionDenied as error:
                observer.deps.denials.record(
                    observer.namespace, observer.name, "observe", error.denial
                )
                delay = await observer.report_failure(body, PERMISSION_DENIED, str(error))
            except SecretUnavailable as error:
                delay = await observer.report_failure(body, "SecretNotFound", str(error))
            except KafkaUnavailable as error:
                # The reason says which: unreachable, credentials refused, TLS, a mismatch.
                message = kafka_problem(error.reason, str(error), spec.kafka, observer.namespace)
                delay = await observer.report_failure(body, error.reason, message)
                # A client that lost its broker can stay unanswered after the broker is back
                # (measured after a broker restart: minutes of timeouts while a new client got
                # answers in ms).
                observer.renew_gateway = observer.failures >= RENEW_AFTER_FAILURES
            except KafkaRequestFailed as error:
                message = kafka_problem(error.reason, str(error), spec.kafka, observer.namespace)
                delay = await observer.report_failure(body, error.reason, message)
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception as error:  # the observer must outlive any single failure
                logger.exception("%s/%s: observation failed", observer.namespace, observer.name)
                message = f"observing failed: {type(error).__name__}: {str(error)[:300]}"
                with contextlib.suppress(Exception):
                    delay = await observer.report_failure(body, "ObserveFailed", message)
            metrics.record_observation_duration(time.monotonic() - started, succeeded=succeeded)
            await sleep_or_wake(delay, wakeup.wait, stopped, settle=spacing)
    finally:
        observer.release()
        observer.deps.denials.forget(observer.namespace, observer.name)
        observer.deps.sightings.forget(observer.namespace, observer.name)
        metrics.forget_group(observer.namespace, observer.name)


async def observe(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    stopped: Stopping,
    claims: ClaimIndex | None = None,
) -> None:
    """Observe the group until the resource goes (the daemon's whole life)."""
    status = written_status(body)
    tracking = tracking_from_status(status, since=time.time() - 1.0)
    observer = Observer(
        deps=deps,
        namespace=namespace,
        name=name,
        tracking=tracking,
        coordinator=coordinator_from_status(status),
        claims=claims,
    )
    await observe_forever(observer, body, stopped)
