"""The sidecar's engine: takes requests, and acts on them while it is the group's actor.

Any sidecar of the group accepts a request and writes it to the control log; the sidecar that
owns the control partition (one per group, chosen by the group coordinator itself) acts on it;
every sidecar reads the outcome back from the log to answer its caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from rebalancer.clients.group_visiting import GroupVisitor, VisitFailed
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import KafkaGatewayError, KafkaRequestFailed
from rebalancer.clients.librdkafka_config import redacted
from rebalancer.clients.reporting import MemberReporter
from rebalancer.planning.group_levers import (
    LIBRDKAFKA_PROTOCOLS,
    GroupFacts,
    Lever,
    LeverChoice,
    choose_lever,
)
from rebalancer.sidecar import metrics
from rebalancer.sidecar.control_log import (
    ControlReader,
    ControlWriteFailed,
    ControlWriter,
    connection_config,
)
from rebalancer.sidecar.ledger import Action, ActorView, Ledger, RequestEntry, next_action
from rebalancer.sidecar.membership import GroupMember, MemberView
from rebalancer.sidecar.settings import SidecarSettings
from rebalancer.sleeping import sleep_or_wake
from rebalancer.structs.brokers import GroupProtocol, GroupState, TopicPartition
from rebalancer.structs.enforcement import (
    ActorClaim,
    ControlRecord,
    EnforceOutcome,
    EnforceRequest,
    EnforceStatus,
    actors_group,
    control_topic,
    flip_topic,
)
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.kafka_properties import SettingsError, drop_classic_only

logger = logging.getLogger(__name__)

_TICK_S = 0.25
# How often a sidecar waiting for its group to form looks again.
_WAIT_FOR_GROUP_S = 2.0
_STATE_TTL_S = 0.5
# Statuses a caller waits for: the actor's first real answer or a final one.
_ANSWERED = frozenset(
    {
        EnforceStatus.ENFORCED,
        EnforceStatus.IN_PROGRESS,
        EnforceStatus.FAILED,
        EnforceStatus.EXPIRED,
    }
)


class InFlight(NamedTuple):
    """The request this sidecar's rejoin or visit is under way for."""

    request_id: str
    # The generation the rejoin started from.
    generation: int
    # time.monotonic() when it started: the enforce latency is measured from it.
    started: float


class EnforceRefused(RebalancerError):
    """A request the sidecar will not take; `answer` names the metric and the HTTP status."""

    status = 400
    answer = "invalid"


class UnknownGroup(EnforceRefused):
    status = 404
    answer = "unknown_group"


class NotAMember(EnforceRefused):
    status = 409
    answer = "not_member"


class UnsupportedGroup(EnforceRefused):
    """The group's protocol is one the sidecar cannot join (planning/group_levers.py)."""

    status = 422
    answer = "unsupported"


class EngineUnavailable(EnforceRefused):
    status = 503
    answer = "unavailable"


@dataclass(frozen=True)
class EnforceAnswer:
    request_id: str
    status: EnforceStatus
    duplicate: bool = False
    actor: str | None = None
    message: str = ""
    from_generation: int | None = None
    generation: int | None = None
    will_retry: bool = False

    @classmethod
    def of(cls, entry: RequestEntry, duplicate: bool) -> EnforceAnswer:
        outcome = entry.outcome
        if outcome is None:
            return cls(entry.request.request_id, EnforceStatus.ACCEPTED, duplicate)
        return cls(
            entry.request.request_id,
            outcome.status,
            duplicate,
            outcome.actor,
            outcome.message,
            outcome.from_generation,
            outcome.generation,
            outcome.will_retry,
        )

    @property
    def final(self) -> bool:
        if self.status is EnforceStatus.IN_PROGRESS:
            return not self.will_retry
        return self.status.final

    def to_json(self) -> dict[str, object]:
        return {
            "requestId": self.request_id,
            "status": self.status.value,
            "duplicate": self.duplicate,
            "actor": self.actor,
            "message": self.message,
            "fromGeneration": self.from_generation,
            "generation": self.generation,
            "willRetry": self.will_retry,
        }


class SidecarAgent:
    def __init__(self, settings: SidecarSettings) -> None:
        self.settings = settings
        self.group_id = settings.group_id
        self.control_topic = control_topic(settings.group_id)
        self.flip_topic = flip_topic(settings.group_id)
        self.ledger = Ledger()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Condition | None = None
        self._gateway: AdminGateway | None = None
        self._member: GroupMember | None = None
        self._lever: LeverChoice | None = None
        self._visitor: GroupVisitor | None = None
        self._visit: asyncio.Task[None] | None = None
        self._reader: ControlReader | None = None
        self._writer: ControlWriter | None = None
        self._reporter: MemberReporter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._claim: str | None = None
        self._claimed = False
        self._in_flight: InFlight | None = None
        self._written: dict[str, EnforceOutcome] = {}
        self._state: str | None = None
        self._state_at = 0.0
        self._state_error: str | None = None
        self.started_at = time.time()

    # Start and stop.

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Condition()
        kafka = self.settings.kafka
        logger.info(
            "sidecar %s for group %r: %s",
            self.settings.client_id,
            self.group_id,
            redacted(kafka),
        )
        self._gateway = AdminGateway(
            {**connection_config(kafka), "client.id": "rebalancer-sidecar"}
        )
        await self._ensure_control_topics()
        self._reporter = MemberReporter.from_env(
            group_id=self.group_id,
            client_id=self.settings.client_id,
            host=self.settings.client_id,
            protocol=self.settings.protocol,
            assignment_strategy=kafka.get("partition.assignment.strategy"),
        )
        self._reader = ControlReader(kafka, self.control_topic, self._record_read)
        self._writer = ControlWriter(kafka, self.control_topic)
        self._reader.start()
        choice = await self._choose_lever()
        if choice.lever is Lever.WAIT:
            logger.info("%s", choice.reason)
            self._tasks.append(asyncio.create_task(self._join_when_formed(), name="sidecar-wait"))
        else:
            self._take_lever(choice)

    async def _choose_lever(self) -> LeverChoice:
        """Read the group's kind and protocol and pick the lever (planning/group_levers.py)."""
        assert self._gateway is not None
        kafka = self.settings.kafka
        facts = GroupFacts()
        try:
            view = await self._gateway.describe_group(self.group_id)
        except KafkaGatewayError as error:
            # librdkafka cannot read a group of another protocol type (Kafka Connect's: "the
            # request was invalid"); the plain DescribeGroups can.
            try:
                classic = await self._visiting().describe()
            except (VisitFailed, SettingsError) as second:
                # No Describe right, or a broker without DescribeGroups (librdkafka's mock):
                # the application's own settings, as before the sidecar read the protocol.
                logger.warning(
                    "cannot describe group %r (%s; %s): joining as configured",
                    self.group_id,
                    error,
                    second,
                )
                return LeverChoice(Lever.REJOIN, reason="the group could not be described")
            facts = GroupFacts(
                "classic",
                classic.state not in ("Empty", "Dead", ""),
                classic.protocol_type,
                classic.protocol_name,
            )
            view = None
        if view is not None and view.state.has_members:
            facts = GroupFacts(kind=view.protocol.value, has_members=True)
            if view.assignor in LIBRDKAFKA_PROTOCOLS or not view.assignor:
                # A librdkafka name is a consumer group's; no name yet is a forming group. The
                # visitor's DescribeGroups (for the protocol type) is needed for the rest only.
                facts = GroupFacts(facts.kind, True, "consumer", view.assignor)
            elif view.protocol is not GroupProtocol.CONSUMER:
                try:
                    classic = await self._visiting().describe()
                except (VisitFailed, SettingsError) as error:
                    logger.warning("%s: taking the protocol from the admin client", error)
                    facts = GroupFacts(facts.kind, True, "consumer", view.assignor)
                else:
                    facts = GroupFacts(
                        facts.kind, True, classic.protocol_type, classic.protocol_name
                    )
        choice = choose_lever(
            facts,
            configured_strategy=kafka.get("partition.assignment.strategy"),
            configured_protocol=kafka.get("group.protocol"),
        )
        if choice.lever is Lever.VISIT:
            try:
                self._visiting()
            except SettingsError as error:
                return LeverChoice(Lever.UNSUPPORTED, reason=f"{choice.reason}, but {error}")
        return choice

    def _visiting(self) -> GroupVisitor:
        if self._visitor is None:
            self._visitor = GroupVisitor(
                self.settings.kafka, self.group_id, self.settings.client_id
            )
        return self._visitor

    async def _join_when_formed(self) -> None:
        while True:
            await asyncio.sleep(_WAIT_FOR_GROUP_S)
            try:
                choice = await self._choose_lever()
            except Exception:  # the wait must outlive any one failure
                logger.exception("looking at group %r failed", self.group_id)
                continue
            if choice.lever is not Lever.WAIT:
                self._take_lever(choice)
                return

    def _take_lever(self, choice: LeverChoice) -> None:
        """Start the membership the lever needs, and the actor."""
        self._lever = choice
        logger.info("group %r: lever %s (%s)", self.group_id, choice.lever.value, choice.reason)
        if choice.lever is Lever.UNSUPPORTED:
            logger.error(
                "this sidecar cannot enforce rebalances of group %r: %s",
                self.group_id,
                choice.reason,
            )
            self._notify()
            return
        kafka = self.settings.kafka
        if choice.lever is Lever.VISIT:
            # The sidecars hold the actor's lease in a group of their own; the application's
            # group only sees them during a visit.
            member_config = dict(connection_config(kafka))
            member_config["group.id"] = actors_group(self.group_id)
            member_config["partition.assignment.strategy"] = "cooperative-sticky"
            member_config["session.timeout.ms"] = kafka.get("session.timeout.ms", "10000")
            member_config["heartbeat.interval.ms"] = kafka.get("heartbeat.interval.ms", "1000")
        else:
            member_config = dict(kafka)
            if choice.lever is Lever.SUBSCRIPTION:
                member_config["group.protocol"] = "consumer"
                drop_classic_only(member_config)
            elif choice.strategy is not None:
                # The group's protocol, where the application's settings name another (or none).
                member_config["partition.assignment.strategy"] = choice.strategy
        member_config["client.id"] = self.settings.client_id
        if self.settings.instance_id:
            member_config["group.instance.id"] = self.settings.instance_id
        self._member = GroupMember(
            member_config,
            self.control_topic,
            self.flip_topic,
            reporter=self._reporter if choice.lever is not Lever.VISIT else None,
            report_interval=self.settings.report_interval_seconds,
            on_change=self._member_changed,
        )
        self._member.start()
        self._tasks.append(asyncio.create_task(self._act_forever(), name="sidecar-actor"))

    async def _ensure_control_topics(self) -> None:
        assert self._gateway is not None
        existing = await self._gateway.list_topics()
        for topic in (self.control_topic, self.flip_topic):
            if topic in existing:
                continue
            try:
                await self._gateway.create_topic(topic, 1)
            except KafkaRequestFailed as error:
                # No CreateTopics right (or a broker without the API, like librdkafka's mock):
                # pre-created topics are fine, missing ones are not.
                raise KafkaRequestFailed(
                    f"the control topic {topic} is missing and could not be created ({error}); "
                    "create it with one partition, or let the sidecar's Kafka user create it"
                ) from None
            logger.info("created the control topic %s", topic)

    async def stop(self) -> None:
        if self._visit is not None:
            # A visit under way ends with its leave; cut short, its JoinGroup would only wait.
            self._tasks.append(self._visit)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._member is not None:
            await asyncio.to_thread(self._member.stop)
        if self._reader is not None:
            await asyncio.to_thread(self._reader.stop)
        if self._writer is not None:
            self._writer.close()
        if self._reporter is not None:
            await asyncio.to_thread(self._reporter.close, 3.0)
        if self._visitor is not None:
            await self._visitor.close()
        if self._gateway is not None:
            self._gateway.close()

    # Callbacks from the Kafka threads.

    def _notify(self) -> None:
        if self._loop is None or self._changed is None:
            return
        changed = self._changed

        async def wake() -> None:
            async with changed:
                changed.notify_all()

        with contextlib.suppress(RuntimeError):  # the loop is closing
            asyncio.run_coroutine_threadsafe(wake(), self._loop)

    def _record_read(self, record: ControlRecord, offset: int) -> None:
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._apply, record, offset)

    def _apply(self, record: ControlRecord, offset: int) -> None:
        self.ledger.apply(record, offset)
        self._notify()

    def _member_changed(self, view: MemberView) -> None:
        metrics.GENERATION.set(view.generation)
        self._notify()

    # What the server asks.

    @property
    def member(self) -> MemberView:
        return self._member.view() if self._member is not None else MemberView()

    @property
    def is_actor(self) -> bool:
        return TopicPartition(self.control_topic, 0) in self.member.owned

    def lookup(self, request_id: str) -> EnforceAnswer | None:
        entry = self.ledger.get(request_id)
        return None if entry is None else EnforceAnswer.of(entry, duplicate=False)

    def health(self) -> tuple[bool, dict[str, object]]:
        member = self.member
        # Waiting for the group to form, or unable to join it: serving, with no member yet.
        parts = (self._member, self._reader) if self._member is not None else (self._reader,)
        alive = all(part is not None and part.alive for part in parts)
        return alive, {
            "groupId": self.group_id,
            "member": self.settings.client_id,
            "joined": member.generation >= 0,
            "threads": "running" if alive else "stopped",
        }

    def describe(self) -> dict[str, object]:
        member = self.member
        return {
            "groupId": self.group_id,
            "member": self.settings.client_id,
            "memberId": member.member_id,
            "generation": member.generation,
            "state": self._state,
            "stateError": self._state_error,
            "actor": self.is_actor,
            "subscription": [self.control_topic]
            if member.flipped
            else [self.control_topic, self.flip_topic],
            "controlTopic": self.control_topic,
            "requestsKnown": len(self.ledger),
            "lastError": member.error,
            "lever": self._lever.lever.value if self._lever else Lever.WAIT.value,
            "protocol": self._lever.protocol_name or self._lever.strategy if self._lever else None,
            "leverReason": self._lever.reason if self._lever else "waiting for the group to form",
        }

    async def _group_exists(self, group_id: str) -> bool:
        assert self._gateway is not None
        try:
            view = await self._gateway.describe_group(group_id)
            if view.state.has_members:
                return True
            offsets = await self._gateway.committed_offsets(group_id)
        except KafkaGatewayError as error:
            raise EngineUnavailable(f"cannot look group {group_id!r} up: {error}") from None
        # A group whose members all left is Empty like one that never formed; its committed
        # offsets tell them apart.
        return bool(offsets.offsets)

    async def submit(
        self,
        group_id: str,
        request_id: str,
        reason: str,
        retry_when_stable: bool,
        wait_seconds: float,
    ) -> EnforceAnswer:
        if group_id != self.group_id:
            if not await self._group_exists(group_id):
                raise UnknownGroup(
                    f"group {group_id!r} does not exist on the cluster; this sidecar serves "
                    f"group {self.group_id!r}"
                )
            raise NotAMember(
                f"this sidecar is a member of group {self.group_id!r}, not of {group_id!r}: "
                f"send the request to a sidecar of {group_id!r}"
            )
        if self._lever is not None and self._lever.lever is Lever.UNSUPPORTED:
            raise UnsupportedGroup(
                f"this sidecar cannot enforce rebalances of group {group_id!r}: "
                f"{self._lever.reason}"
            )
        if self.member.generation < 0:
            raise NotAMember(
                f"this sidecar has not joined group {group_id!r} yet; try again in a few seconds"
            )
        existing = self.ledger.get(request_id)
        if existing is None:
            request = EnforceRequest(
                request_id, reason, retry_when_stable, self.settings.client_id, time.time()
            )
            try:
                assert self._writer is not None
                await self._writer.write(request_id, request)
            except ControlWriteFailed as error:
                raise EngineUnavailable(f"the request was not recorded: {error}") from None
        entry = await self._wait(request_id, wait_seconds)
        if entry is None:
            # Written, but not read back yet: it is in the log and will be acted on.
            return EnforceAnswer(request_id, EnforceStatus.ACCEPTED, existing is not None)
        if existing is None and entry.request.received_by != self.settings.client_id:
            existing = entry  # another sidecar wrote the same id first
        return EnforceAnswer.of(entry, duplicate=existing is not None)

    async def _wait(self, request_id: str, seconds: float) -> RequestEntry | None:
        assert self._changed is not None
        deadline = time.monotonic() + seconds

        def answered() -> bool:
            entry = self.ledger.get(request_id)
            return entry is not None and entry.status in _ANSWERED

        async with self._changed:
            while not answered():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await sleep_or_wake(min(remaining, 1.0), self._changed.wait)
        return self.ledger.get(request_id)

    # The actor.

    async def _act_forever(self) -> None:
        while True:
            try:
                await self._act_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the actor must outlive any one failure
                logger.exception("acting on enforcement requests failed")
            assert self._changed is not None
            async with self._changed:
                await sleep_or_wake(_TICK_S, self._changed.wait)

    async def _group_state(self) -> str | None:
        now = time.monotonic()
        if now - self._state_at < _STATE_TTL_S:
            return self._state
        self._state_at = now
        assert self._gateway is not None
        try:
            view = await self._gateway.describe_group(self.group_id)
            self._state, self._state_error = view.state.value, None
            if view.state is GroupState.UNKNOWN:
                # The sidecar is a member, so the group is alive: a broker that cannot say
                # more (Unknown) is answering in the middle of a rebalance.
                self._state = GroupState.PREPARING_REBALANCE.value
        except KafkaGatewayError as error:
            # librdkafka's mock cluster has no DescribeGroups; fall back to what the member saw.
            self._state_error = str(error)
            self._state = "PreparingRebalance" if self.member.revoking else None
        metrics.publish_state(self._state)
        return self._state

    def _effective(self, entry: RequestEntry) -> RequestEntry:
        """The entry with this actor's own latest outcome, which the reader may not have read
        back yet: deciding on the log alone would rejoin twice for one request."""
        written = self._written.get(entry.request.request_id)
        if written is None or (entry.outcome is not None and entry.outcome.at > written.at):
            return entry
        return replace(entry, outcome=written)

    async def _write_outcome(self, outcome: EnforceOutcome) -> None:
        assert self._writer is not None
        await self._writer.write(outcome.request_id, outcome)
        self._written[outcome.request_id] = outcome
        if len(self._written) > 256:
            self._written.pop(next(iter(self._written)))
        metrics.count_outcome(outcome.status.value)
        logger.info("request %s: %s %s", outcome.request_id, outcome.status.value, outcome.message)

    async def _act_once(self) -> None:
        actor = self.is_actor
        metrics.ACTOR.set(1.0 if actor else 0.0)
        if not actor:
            if self._claim is not None:
                logger.info("this sidecar no longer owns the control partition")
            self._claim, self._claimed, self._in_flight = None, False, None
            self._written.clear()
            return
        assert self._writer is not None
        if self._claim is None:
            self._claim = uuid.uuid4().hex
            logger.info("this sidecar owns the control partition: it acts for the group")
            await self._writer.write(
                "claim", ActorClaim(self.settings.client_id, self._claim, time.time())
            )
        if not self._claimed:
            # Act only on what is known up to the own claim: earlier outcomes are all read.
            self._claimed = self.ledger.claim_seen(self._claim)
            if not self._claimed:
                return
        pending = self.ledger.unfinished()
        if not pending and self._in_flight is None:
            return
        state = await self._group_state()
        generation = self.member.generation
        for entry in map(self._effective, pending):
            if entry.final:
                continue
            view = ActorView(
                now=time.time(),
                group_state=state,
                generation=generation,
                in_flight=self._in_flight.request_id if self._in_flight else None,
                request_ttl=self.settings.request_ttl_seconds,
                enforce_timeout=self.settings.enforce_timeout_seconds,
            )
            await self._perform(entry, next_action(entry, view), generation)

    async def _perform(self, entry: RequestEntry, action: Action, generation: int) -> None:
        now = time.time()
        if action is Action.REPORT_IN_PROGRESS:
            await self._report_in_progress(entry.request, generation, now)
        elif action is Action.ENFORCE:
            await self._enforce(entry, generation, now)
        elif action is Action.CONFIRM:
            await self._confirm(entry, generation, now)
        elif action is Action.EXPIRE:
            await self._expire(entry.request, now)
        elif action is Action.FAIL:
            await self._fail(entry, now)

    def _outcome(
        self,
        request: EnforceRequest,
        status: EnforceStatus,
        at: float,
        message: str,
        *,
        from_generation: int | None = None,
        generation: int | None = None,
        will_retry: bool = False,
    ) -> EnforceOutcome:
        """This sidecar's answer to `request`."""
        return EnforceOutcome(
            request.request_id,
            status,
            self.settings.client_id,
            at,
            message,
            from_generation=from_generation,
            generation=generation,
            will_retry=will_retry,
        )

    def _finish_in_flight(self, request: EnforceRequest) -> float | None:
        """Seconds the request's own enforcement took, when it was the one in flight."""
        if self._in_flight is None or self._in_flight.request_id != request.request_id:
            return None
        seconds = time.monotonic() - self._in_flight.started
        self._in_flight = None
        return seconds

    async def _report_in_progress(
        self, request: EnforceRequest, generation: int, now: float
    ) -> None:
        retry = request.retry_when_stable
        message = "a rebalance is already in progress" + (
            "; retrying once the group is Stable" if retry else "; it does the same job"
        )
        await self._write_outcome(
            self._outcome(
                request,
                EnforceStatus.IN_PROGRESS,
                now,
                message,
                from_generation=generation,
                will_retry=retry,
            )
        )

    async def _enforce(self, entry: RequestEntry, generation: int, now: float) -> None:
        request = entry.request
        visiting = self._lever is not None and self._lever.lever is Lever.VISIT
        await self._write_outcome(
            self._outcome(
                request,
                EnforceStatus.ENFORCING,
                now,
                "joining with the group's protocol and leaving before the join completes"
                if visiting
                else "rejoining with changed subscription metadata",
                # A visit is confirmed by its own end: the generation here is the sidecars'
                # lease group's, which says nothing of the application's group.
                from_generation=None if visiting else generation,
            )
        )
        assert self._member is not None
        self._in_flight = InFlight(request.request_id, generation, time.monotonic())
        if visiting and self._lever is not None:
            # Under way while the actor keeps answering: requests arriving meanwhile are
            # "in-progress", as during a rejoin.
            self._visit = asyncio.create_task(self._visit_group(entry, self._lever))
        else:
            await asyncio.to_thread(self._member.flip)

    async def _confirm(self, entry: RequestEntry, generation: int, now: float) -> None:
        took = ""
        seconds = self._finish_in_flight(entry.request)
        if seconds is not None:
            metrics.ENFORCE_LATENCY.observe(seconds)
            took = f" after {seconds:.1f} s"
        before = entry.outcome.from_generation if entry.outcome else None
        await self._write_outcome(
            self._outcome(
                entry.request,
                EnforceStatus.ENFORCED,
                now,
                f"new generation {generation}{took}",
                from_generation=before,
                generation=generation,
            )
        )

    async def _expire(self, request: EnforceRequest, now: float) -> None:
        ttl = self.settings.request_ttl_seconds
        await self._write_outcome(
            self._outcome(
                request, EnforceStatus.EXPIRED, now, f"no sidecar could act within {ttl:g} s"
            )
        )

    async def _fail(self, entry: RequestEntry, now: float) -> None:
        self._finish_in_flight(entry.request)
        await self._write_outcome(
            self._outcome(
                entry.request,
                EnforceStatus.FAILED,
                now,
                "no new generation within "
                f"{self.settings.enforce_timeout_seconds:g} s of the rejoin",
                from_generation=entry.outcome.from_generation if entry.outcome else None,
            )
        )

    async def _visit_group(self, entry: RequestEntry, lever: LeverChoice) -> None:
        request = entry.request
        me = self.settings.client_id
        kafka = self.settings.kafka
        started = time.monotonic()
        try:
            result = await self._visiting().visit(
                lever.protocol_name or "",
                [self.control_topic, self.flip_topic],
                session_timeout_ms=int(kafka.get("session.timeout.ms", "10000")),
                rebalance_timeout_ms=int(kafka.get("max.poll.interval.ms", "300000")),
                settle_timeout=self.settings.enforce_timeout_seconds,
            )
        except (VisitFailed, OSError) as error:
            outcome = EnforceOutcome(
                request.request_id, EnforceStatus.FAILED, me, time.time(), str(error)
            )
        else:
            metrics.ENFORCE_LATENCY.observe(time.monotonic() - started)
            rejoined = (
                f"every member rejoined ({len(result.before)} of {len(result.before)})"
                if result.every_member_rejoined
                else f"{len(set(result.before) - set(result.after))} of "
                f"{len(result.before)} members left during it"
            )
            held = (
                "the sidecar held no partition"
                if not result.joined
                else f"the join completed before the sidecar's leave: it was a member for "
                f"{result.held_seconds:.2f} s, and its leave cost another generation"
            )
            if result.joined:
                logger.warning("request %s: %s", request.request_id, held)
            outcome = EnforceOutcome(
                request.request_id,
                EnforceStatus.ENFORCED,
                me,
                time.time(),
                f"one rebalance of protocol {lever.protocol_name!r} ({rejoined}) "
                f"after {result.seconds:.1f} s; {held}",
            )
        try:
            await self._write_outcome(outcome)
        finally:
            self._in_flight = None
            self._visit = None
            self._notify()


def describe_settings(settings: SidecarSettings) -> dict[str, Any]:
    """The settings as fit for a log line (secrets hidden)."""
    return {
        "group": settings.group_id,
        "member": settings.client_id,
        "listen": f"{settings.listen_host}:{settings.listen_port}",
        "rate": f"{settings.rate_per_minute:g}/min burst {settings.burst}",
        "kafka": redacted(settings.kafka),
    }
