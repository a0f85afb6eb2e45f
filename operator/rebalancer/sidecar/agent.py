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
from dataclasses import dataclass
from typing import Any

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
from rebalancer.sidecar.actor import Actor, Changes, GroupStates
from rebalancer.sidecar.control_log import (
    ControlReader,
    ControlWriteFailed,
    ControlWriter,
    connection_config,
)
from rebalancer.sidecar.ledger import RequestEntry
from rebalancer.sidecar.membership import GroupMember, MemberView
from rebalancer.sidecar.settings import SidecarSettings
from rebalancer.sleeping import sleep_or_wake
from rebalancer.structs.brokers import GroupProtocol, TopicPartition
from rebalancer.structs.enforcement import (
    EnforceRequest,
    EnforceStatus,
    actors_group,
    control_topic,
    flip_topic,
)
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.kafka_properties import SettingsError, drop_classic_only

logger = logging.getLogger(__name__)

# How often a sidecar waiting for its group to form looks again.
_WAIT_FOR_GROUP_S = 2.0
# Statuses a caller waits for: the actor's first real answer or a final one.
_ANSWERED = frozenset(
    {
        EnforceStatus.ENFORCED,
        EnforceStatus.IN_PROGRESS,
        EnforceStatus.FAILED,
        EnforceStatus.EXPIRED,
    }
)


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


@dataclass(frozen=True)
class AgentParts:
    """The agent's connections to Kafka, each one open from the agent's start to its stop."""

    gateway: AdminGateway
    # None: no REBALANCER_REPORT_URL, the member reports nowhere.
    reporter: MemberReporter | None
    reader: ControlReader
    writer: ControlWriter
    changes: Changes


# The lever until the group has formed (GET /v1/group shows it).
_WAITING = LeverChoice(Lever.WAIT, reason="waiting for the group to form")


class SidecarAgent:
    """Takes the group's requests and answers them from the control log; its actor acts on them.

    Built by `start`, connected whole: the server never meets an agent with a part missing.
    """

    def __init__(self, settings: SidecarSettings, parts: AgentParts) -> None:
        self.settings = settings
        self.group_id = settings.group_id
        self.control_topic = control_topic(settings.group_id)
        self.flip_topic = flip_topic(settings.group_id)
        self.ledger = parts.changes.ledger
        self._parts = parts
        self._states = GroupStates(parts.gateway, settings.group_id)
        self._lever = _WAITING
        # The member and its actor: none while the group forms, or when it cannot be joined.
        self._actor: Actor | None = None
        # Made on first use: only a visit, or a group librdkafka cannot describe, needs one.
        self._visitor: GroupVisitor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.started_at = time.time()

    # Start and stop.

    @classmethod
    async def start(cls, settings: SidecarSettings) -> SidecarAgent:
        """Connect, prepare the control topics and take the lever (or wait for the group).

        Raises KafkaGatewayError when the control topics cannot be had; a failed start leaves
        nothing open.
        """
        kafka = settings.kafka
        logger.info(
            "sidecar %s for group %r: %s", settings.client_id, settings.group_id, redacted(kafka)
        )
        gateway = AdminGateway({**connection_config(kafka), "client.id": "rebalancer-sidecar"})
        try:
            await ensure_control_topics(gateway, settings.group_id)
        except BaseException:
            gateway.close()
            raise
        changes = Changes(asyncio.get_running_loop())
        topic = control_topic(settings.group_id)
        parts = AgentParts(
            gateway,
            reporter=MemberReporter.from_env(
                group_id=settings.group_id,
                client_id=settings.client_id,
                host=settings.client_id,
                protocol=settings.protocol,
                assignment_strategy=kafka.get("partition.assignment.strategy"),
            ),
            reader=ControlReader(kafka, topic, changes.record_read),
            writer=ControlWriter(kafka, topic),
            changes=changes,
        )
        agent = cls(settings, parts)
        try:
            await agent._begin()
        except BaseException:
            await agent.stop()
            raise
        return agent

    async def _begin(self) -> None:
        self._parts.reader.start()
        choice = await self._choose_lever()
        if choice.lever is Lever.WAIT:
            logger.info("%s", choice.reason)
            self._tasks.append(asyncio.create_task(self._join_when_formed(), name="sidecar-wait"))
        else:
            self._take_lever(choice)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._actor is not None:
            await self._actor.stop()
        await asyncio.to_thread(self._parts.reader.stop)
        self._parts.writer.close()
        if self._parts.reporter is not None:
            await asyncio.to_thread(self._parts.reporter.close, 3.0)
        if self._visitor is not None:
            await self._visitor.close()
        self._parts.gateway.close()

    # The lever.

    async def _group_facts(self) -> GroupFacts | None:
        """The group's kind and protocol, as far as they can be read; None when not at all."""
        try:
            view = await self._parts.gateway.describe_group(self.group_id)
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
                return None
            return GroupFacts(
                "classic",
                classic.state not in ("Empty", "Dead", ""),
                classic.protocol_type,
                classic.protocol_name,
            )
        if not view.state.has_members:
            return GroupFacts()
        kind = view.protocol.value
        if view.assignor in LIBRDKAFKA_PROTOCOLS or not view.assignor:
            # A librdkafka name is a consumer group's; no name yet is a forming group. The
            # visitor's DescribeGroups (for the protocol type) is needed for the rest only.
            return GroupFacts(kind, True, "consumer", view.assignor)
        if view.protocol is GroupProtocol.CONSUMER:
            return GroupFacts(kind=kind, has_members=True)
        try:
            classic = await self._visiting().describe()
        except (VisitFailed, SettingsError) as error:
            logger.warning("%s: taking the protocol from the admin client", error)
            return GroupFacts(kind, True, "consumer", view.assignor)
        return GroupFacts(kind, True, classic.protocol_type, classic.protocol_name)

    async def _choose_lever(self) -> LeverChoice:
        """Read the group's kind and protocol and pick the lever (planning/group_levers.py)."""
        facts = await self._group_facts()
        if facts is None:
            return LeverChoice(Lever.REJOIN, reason="the group could not be described")
        kafka = self.settings.kafka
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
            self._parts.changes.notify()
            return
        member = GroupMember(
            member_config(self.settings, choice),
            self.control_topic,
            self.flip_topic,
            reporter=self._parts.reporter if choice.lever is not Lever.VISIT else None,
            report_interval=self.settings.report_interval_seconds,
            on_change=self._member_changed,
        )
        self._actor = Actor(
            self.settings,
            member,
            choice,
            writer=self._parts.writer,
            changes=self._parts.changes,
            states=self._states,
            visiting=self._visiting,
        )
        member.start()
        self._tasks.append(asyncio.create_task(self._actor.act_forever(), name="sidecar-actor"))

    # Callbacks from the Kafka threads.

    def _member_changed(self, view: MemberView) -> None:
        metrics.GENERATION.set(view.generation)
        self._parts.changes.notify()

    # What the server asks.

    @property
    def member(self) -> MemberView:
        return self._actor.view() if self._actor is not None else MemberView()

    @property
    def is_actor(self) -> bool:
        return TopicPartition(self.control_topic, 0) in self.member.owned

    def lookup(self, request_id: str) -> EnforceAnswer | None:
        entry = self.ledger.get(request_id)
        return None if entry is None else EnforceAnswer.of(entry, duplicate=False)

    def health(self) -> tuple[bool, dict[str, object]]:
        member = self.member
        # Waiting for the group to form, or unable to join it: serving, with no member yet.
        alive = self._parts.reader.alive and (self._actor is None or self._actor.member.alive)
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
            "state": self._states.state,
            "stateError": self._states.error,
            "actor": self.is_actor,
            "subscription": [self.control_topic]
            if member.flipped
            else [self.control_topic, self.flip_topic],
            "controlTopic": self.control_topic,
            "requestsKnown": len(self.ledger),
            "lastError": member.error,
            "lever": self._lever.lever.value,
            "protocol": self._lever.protocol_name or self._lever.strategy,
            "leverReason": self._lever.reason,
        }

    async def _group_exists(self, group_id: str) -> bool:
        gateway = self._parts.gateway
        try:
            view = await gateway.describe_group(group_id)
            if view.state.has_members:
                return True
            offsets = await gateway.committed_offsets(group_id)
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
        if self._lever.lever is Lever.UNSUPPORTED:
            raise UnsupportedGroup(
                f"this sidecar cannot enforce rebalances of group {group_id!r}: "
                f"{self._lever.reason}"
            )
        if self.member.generation < 0:
            raise NotAMember(
                f"this sidecar has not joined group {group_id!r} yet; try again in a few seconds"
            )
        duplicate = self.ledger.get(request_id) is not None
        if not duplicate:
            request = EnforceRequest(
                request_id, reason, retry_when_stable, self.settings.client_id, time.time()
            )
            try:
                await self._parts.writer.write(request_id, request)
            except ControlWriteFailed as error:
                raise EngineUnavailable(f"the request was not recorded: {error}") from None
        entry = await self._wait(request_id, wait_seconds)
        if entry is None:
            # Written, but not read back yet: it is in the log and will be acted on.
            return EnforceAnswer(request_id, EnforceStatus.ACCEPTED, duplicate)
        # A duplicate too when another sidecar wrote the same id first.
        duplicate = duplicate or entry.request.received_by != self.settings.client_id
        return EnforceAnswer.of(entry, duplicate=duplicate)

    async def _wait(self, request_id: str, seconds: float) -> RequestEntry | None:
        changed = self._parts.changes.condition
        deadline = time.monotonic() + seconds

        def answered() -> bool:
            entry = self.ledger.get(request_id)
            return entry is not None and entry.status in _ANSWERED

        async with changed:
            while not answered():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await sleep_or_wake(min(remaining, 1.0), changed.wait)
        return self.ledger.get(request_id)


async def ensure_control_topics(gateway: AdminGateway, group_id: str) -> None:
    """Create the group's control and flip topics where they are missing."""
    existing = await gateway.list_topics()
    for topic in (control_topic(group_id), flip_topic(group_id)):
        if topic in existing:
            continue
        try:
            await gateway.create_topic(topic, 1)
        except KafkaRequestFailed as error:
            # No CreateTopics right (or a broker without the API, like librdkafka's mock):
            # pre-created topics are fine, missing ones are not.
            raise KafkaRequestFailed(
                f"the control topic {topic} is missing and could not be created ({error}); "
                "create it with one partition, or let the sidecar's Kafka user create it"
            ) from None
        logger.info("created the control topic %s", topic)


def member_config(settings: SidecarSettings, choice: LeverChoice) -> dict[str, str]:
    """The librdkafka settings of the sidecar's own member for the lever `choice`."""
    kafka = settings.kafka
    if choice.lever is Lever.VISIT:
        # The sidecars hold the actor's lease in a group of their own; the application's
        # group only sees them during a visit.
        config = dict(connection_config(kafka))
        config["group.id"] = actors_group(settings.group_id)
        config["partition.assignment.strategy"] = "cooperative-sticky"
        config["session.timeout.ms"] = kafka.get("session.timeout.ms", "10000")
        config["heartbeat.interval.ms"] = kafka.get("heartbeat.interval.ms", "1000")
    else:
        config = dict(kafka)
        if choice.lever is Lever.SUBSCRIPTION:
            config["group.protocol"] = "consumer"
            drop_classic_only(config)
        elif choice.strategy is not None:
            # The group's protocol, where the application's settings name another (or none).
            config["partition.assignment.strategy"] = choice.strategy
    config["client.id"] = settings.client_id
    if settings.instance_id:
        config["group.instance.id"] = settings.instance_id
    return config


def describe_settings(settings: SidecarSettings) -> dict[str, Any]:
    """The settings as fit for a log line (secrets hidden)."""
    return {
        "group": settings.group_id,
        "member": settings.client_id,
        "listen": f"{settings.listen_host}:{settings.listen_port}",
        "rate": f"{settings.rate_per_minute:g}/min burst {settings.burst}",
        "kafka": redacted(settings.kafka),
    }
