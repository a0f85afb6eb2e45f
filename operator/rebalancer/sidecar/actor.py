"""The actor: while its member owns the control partition, a sidecar acts on the group's requests.

One is built per sidecar once the lever is chosen (agent.py), around the membership that lever
needs. It claims the control partition in the log, asks the ledger what each open request needs,
rejoins or visits the group to enforce it and writes the outcome back for every sidecar to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from rebalancer.clients.group_visiting import GroupVisitor, VisitFailed
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import KafkaGatewayError
from rebalancer.planning.group_levers import Lever, LeverChoice
from rebalancer.sidecar import metrics
from rebalancer.sidecar.control_log import ControlWriter
from rebalancer.sidecar.ledger import Action, ActorView, Ledger, RequestEntry, next_action
from rebalancer.sidecar.membership import GroupMember, MemberView
from rebalancer.sidecar.settings import SidecarSettings
from rebalancer.sleeping import sleep_or_wake
from rebalancer.structs.brokers import GroupState, TopicPartition
from rebalancer.structs.enforcement import (
    ActorClaim,
    ControlRecord,
    EnforceOutcome,
    EnforceRequest,
    EnforceStatus,
    control_topic,
    flip_topic,
)

logger = logging.getLogger(__name__)

_TICK_S = 0.25
_STATE_TTL_S = 0.5


class InFlight(NamedTuple):
    """The request this sidecar's rejoin or visit is under way for."""

    request_id: str
    # The generation the rejoin started from.
    generation: int
    # time.monotonic() when it started: the enforce latency is measured from it.
    started: float


class Changes:
    """The ledger of the control log, and the condition its readers sleep on until it or the
    membership changes: both change on the Kafka threads, and reach the event loop here."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ledger = Ledger()
        self.condition = asyncio.Condition()
        self._loop = loop

    def notify(self) -> None:
        changed = self.condition

        async def wake() -> None:
            async with changed:
                changed.notify_all()

        with contextlib.suppress(RuntimeError):  # the loop is closing
            asyncio.run_coroutine_threadsafe(wake(), self._loop)

    def record_read(self, record: ControlRecord, offset: int) -> None:
        self._loop.call_soon_threadsafe(self._apply, record, offset)

    def _apply(self, record: ControlRecord, offset: int) -> None:
        self.ledger.apply(record, offset)
        self.notify()

    async def pause(self, seconds: float) -> None:
        """Sleep `seconds`, or until something changes."""
        async with self.condition:
            await sleep_or_wake(seconds, self.condition.wait)


class GroupStates:
    """The application group's state, asked of the admin API at most every _STATE_TTL_S."""

    def __init__(self, gateway: AdminGateway, group_id: str) -> None:
        self._gateway = gateway
        self._group_id = group_id
        # None: not asked yet, or neither the broker nor the member could tell.
        self.state: str | None = None
        self.error: str | None = None
        self._at = 0.0

    async def current(self, revoking: Callable[[], bool]) -> str | None:
        now = time.monotonic()
        if now - self._at < _STATE_TTL_S:
            return self.state
        self._at = now
        try:
            view = await self._gateway.describe_group(self._group_id)
            self.state, self.error = view.state.value, None
            if view.state is GroupState.UNKNOWN:
                # The sidecar is a member, so the group is alive: a broker that cannot say
                # more (Unknown) is answering in the middle of a rebalance.
                self.state = GroupState.PREPARING_REBALANCE.value
        except KafkaGatewayError as error:
            # librdkafka's mock cluster has no DescribeGroups; fall back to what the member saw.
            self.error = str(error)
            self.state = "PreparingRebalance" if revoking() else None
        metrics.publish_state(self.state)
        return self.state


class Actor:
    """Acts for the group while `member` owns the control partition, with `lever`."""

    def __init__(
        self,
        settings: SidecarSettings,
        member: GroupMember,
        lever: LeverChoice,
        *,
        writer: ControlWriter,
        changes: Changes,
        states: GroupStates,
        visiting: Callable[[], GroupVisitor],
    ) -> None:
        self.settings = settings
        self.member = member
        self.lever = lever
        self.control_topic = control_topic(settings.group_id)
        self.flip_topic = flip_topic(settings.group_id)
        self._writer = writer
        self._changes = changes
        self._states = states
        self._visiting = visiting
        # This actor's claim on the control partition; None while another sidecar owns it.
        self._claim: str | None = None
        self._claimed = False
        self._in_flight: InFlight | None = None
        self._written: dict[str, EnforceOutcome] = {}
        # The visit under way, if the lever is VISIT and one is.
        self._visit: asyncio.Task[None] | None = None

    def view(self) -> MemberView:
        return self.member.view()

    @property
    def is_actor(self) -> bool:
        return TopicPartition(self.control_topic, 0) in self.view().owned

    async def stop(self) -> None:
        """Cut a visit under way short and leave the group."""
        if self._visit is not None:
            # A visit under way ends with its leave; cut short, its JoinGroup would only wait.
            self._visit.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._visit
        await asyncio.to_thread(self.member.stop)

    async def act_forever(self) -> None:
        while True:
            try:
                await self._act_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the actor must outlive any one failure
                logger.exception("acting on enforcement requests failed")
            await self._changes.pause(_TICK_S)

    def _effective(self, entry: RequestEntry) -> RequestEntry:
        """The entry with this actor's own latest outcome, which the reader may not have read
        back yet: deciding on the log alone would rejoin twice for one request."""
        written = self._written.get(entry.request.request_id)
        if written is None or (entry.outcome is not None and entry.outcome.at > written.at):
            return entry
        return replace(entry, outcome=written)

    async def _write_outcome(self, outcome: EnforceOutcome) -> None:
        await self._writer.write(outcome.request_id, outcome)
        self._written[outcome.request_id] = outcome
        if len(self._written) > 256:
            self._written.pop(next(iter(self._written)))
        metrics.count_outcome(outcome.status.value)
        logger.info("request %s: %s %s", outcome.request_id, outcome.status.value, outcome.message)

    async def _holds_claim(self) -> bool:
        """Whether this sidecar acts now: it owns the control partition, and its claim on it is
        read back (every outcome written before the claim is read by then)."""
        actor = self.is_actor
        metrics.ACTOR.set(1.0 if actor else 0.0)
        if not actor:
            if self._claim is not None:
                logger.info("this sidecar no longer owns the control partition")
            self._claim, self._claimed, self._in_flight = None, False, None
            self._written.clear()
            return False
        if self._claim is None:
            self._claim = uuid.uuid4().hex
            logger.info("this sidecar owns the control partition: it acts for the group")
            await self._writer.write(
                "claim", ActorClaim(self.settings.client_id, self._claim, time.time())
            )
        if not self._claimed:
            self._claimed = self._changes.ledger.claim_seen(self._claim)
        return self._claimed

    async def _act_once(self) -> None:
        if not await self._holds_claim():
            return
        pending = self._changes.ledger.unfinished()
        if not pending and self._in_flight is None:
            return
        state = await self._states.current(lambda: self.view().revoking)
        generation = self.view().generation
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
        visiting = self.lever.lever is Lever.VISIT
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
        self._in_flight = InFlight(request.request_id, generation, time.monotonic())
        if visiting:
            # Under way while the actor keeps answering: requests arriving meanwhile are
            # "in-progress", as during a rejoin.
            self._visit = asyncio.create_task(self._visit_group(entry, self.lever))
        else:
            await asyncio.to_thread(self.member.flip)

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
            outcome = self._outcome(request, EnforceStatus.FAILED, time.time(), str(error))
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
            outcome = self._outcome(
                request,
                EnforceStatus.ENFORCED,
                time.time(),
                f"one rebalance of protocol {lever.protocol_name!r} ({rejoined}) "
                f"after {result.seconds:.1f} s; {held}",
            )
        try:
            await self._write_outcome(outcome)
        finally:
            self._in_flight = None
            self._visit = None
            self._changes.notify()
