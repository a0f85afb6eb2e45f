"""A visit to a classic group whose protocol librdkafka cannot offer: the VISIT lever.

The sidecar joins the application's group offering the group's own protocol name with consumer-
protocol subscription metadata (the control topics), which makes the coordinator start a
rebalance; as soon as DescribeGroups lists it in the rebalancing group it leaves, and the group
completes the rebalance without it (Apache Kafka removes a member that leaves a group in
PreparingRebalance and completes the join once the others have rejoined). One generation; the
visitor never receives an assignment, so no assignor, however it treats subscriptions, can give it
the application's partitions (planning/group_levers.py).

The protocol calls and their encodings are aiokafka's (JoinGroup, LeaveGroup, DescribeGroups,
the consumer protocol's member metadata); aiokafka negotiates the versions with the broker. The
JoinGroup waits in the coordinator until the join completes, and a broker answers one request per
connection at a time, so it goes on the client's second connection to the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.admin import DescribeGroupsRequest
from aiokafka.protocol.group import JoinGroupRequest, LeaveGroupRequest

from rebalancer.planning.group_levers import CONSUMER_PROTOCOL_TYPE
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.kafka_properties import SettingsError

_MEMBER_ID_REQUIRED = 79
_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})


class VisitFailed(RebalancerError):
    """The broker refused a call of the visit, or did not answer; the message says which."""


@dataclass(frozen=True)
class ClassicGroup:
    state: str
    protocol_type: str
    protocol_name: str
    member_ids: tuple[str, ...]


@dataclass(frozen=True)
class VisitResult:
    before: tuple[str, ...]
    after: tuple[str, ...]
    # Seconds from the JoinGroup to the group Stable again without the visitor.
    seconds: float
    # True when the join completed before the leave: the visitor was a member of one generation
    # (and whatever the leader gave it was held for `held_seconds`, until its leave).
    joined: bool = False
    held_seconds: float = 0.0

    @property
    def every_member_rejoined(self) -> bool:
        return set(self.before) <= set(self.after)


def client_options(kafka: Mapping[str, str]) -> dict[str, Any]:
    """aiokafka's connection options from the application's librdkafka-style properties."""
    options: dict[str, Any] = {"bootstrap_servers": kafka["bootstrap.servers"].split(",")}
    security = kafka.get("security.protocol", "PLAINTEXT").upper()
    options["security_protocol"] = security
    if security in ("SSL", "SASL_SSL"):
        options["ssl_context"] = create_ssl_context(
            cafile=kafka.get("ssl.ca.location") or None,
            # The operator's own clients carry the CA inline (clients/librdkafka_config.py).
            cadata=kafka.get("ssl.ca.pem") or None,
            certfile=kafka.get("ssl.certificate.location") or None,
            keyfile=kafka.get("ssl.key.location") or None,
            password=kafka.get("ssl.key.password") or None,
        )
    if security.startswith("SASL"):
        mechanism = (
            kafka.get("sasl.mechanism") or kafka.get("sasl.mechanisms") or "GSSAPI"
        ).upper()
        if mechanism not in _SASL_MECHANISMS:
            raise SettingsError(
                f"sasl.mechanism {mechanism} is not supported for groups whose protocol "
                f"librdkafka cannot offer; use one of {', '.join(sorted(_SASL_MECHANISMS))}"
            )
        options["sasl_mechanism"] = mechanism
        options["sasl_plain_username"] = kafka.get("sasl.username")
        options["sasl_plain_password"] = kafka.get("sasl.password")
    return options


class GroupVisitor:
    def __init__(self, kafka: Mapping[str, str], group_id: str, client_id: str) -> None:
        self.group_id = group_id
        self._client = AIOKafkaClient(client_id=client_id, **client_options(kafka))
        self._started = False

    async def _coordinator(self) -> int:
        if not self._started:
            await self._client.bootstrap()
            self._started = True
        node: int = await self._client.coordinator_lookup(CoordinationType.GROUP, self.group_id)
        return node

    async def describe(self) -> ClassicGroup:
        try:
            node = await self._coordinator()
            response = await self._client.send(node, DescribeGroupsRequest([self.group_id]))
        except KafkaError as error:
            raise VisitFailed(f"DescribeGroups on {self.group_id!r} failed: {error}") from None
        group = response.groups[0]
        if group[0]:
            raise VisitFailed(f"DescribeGroups on {self.group_id!r}: error code {group[0]}")
        return ClassicGroup(
            state=str(group[2]),
            protocol_type=str(group[3] or ""),
            protocol_name=str(group[4] or ""),
            member_ids=tuple(sorted(str(member[0]) for member in group[5])),
        )

    async def visit(
        self,
        protocol_name: str,
        topics: list[str],
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        settle_timeout: float,
    ) -> VisitResult:
        """Start one rebalance of the group and leave it before it completes (module docs)."""
        before = await self.describe()
        metadata = ConsumerProtocolMemberMetadata(0, topics, b"").encode()

        def join(member_id: str) -> JoinGroupRequest:
            return JoinGroupRequest(
                self.group_id,
                session_timeout_ms,
                rebalance_timeout_ms,
                member_id,
                None,  # null: not a static member
                CONSUMER_PROTOCOL_TYPE,
                [(protocol_name, metadata)],
            )

        started = time.monotonic()
        node, member_id = await self._member_id(join(""), protocol_name)
        pending = asyncio.ensure_future(
            self._client.send(node, join(member_id), group=ConnectionGroup.COORDINATION)
        )
        joined_at: float | None = None
        try:
            if await self._rebalancing_with(member_id, pending):
                joined_at = time.monotonic()
        finally:
            # Whatever happened above, the sidecar's stop cancelling the visit included: leave,
            # or the join would complete with a member that never heartbeats.
            joined_at, left_at, refused = await self._leave(node, member_id, pending, joined_at)
        if refused is not None:
            raise VisitFailed(refused)
        after = await self._stable_without(before, member_id, settle_timeout)
        return VisitResult(
            before=before.member_ids,
            after=after.member_ids,
            seconds=time.monotonic() - started,
            joined=joined_at is not None,
            held_seconds=max(0.0, left_at - joined_at) if joined_at is not None else 0.0,
        )

    async def _member_id(self, first_join: JoinGroupRequest, protocol_name: str) -> tuple[int, str]:
        """(the coordinator's node, the member id it gives the visitor's first JoinGroup)."""
        try:
            node = await self._coordinator()
            first = await self._client.send(node, first_join, group=ConnectionGroup.COORDINATION)
        except KafkaError as error:
            raise VisitFailed(f"JoinGroup on {self.group_id!r} failed: {error}") from None
        if first.error_code not in (0, _MEMBER_ID_REQUIRED) or not first.member_id:
            raise VisitFailed(
                f"JoinGroup on {self.group_id!r} with protocol {protocol_name!r} was refused "
                f"(error code {first.error_code})"
            )
        return node, str(first.member_id)

    async def _rebalancing_with(self, member_id: str, pending: asyncio.Future[Any]) -> bool:
        """Wait (up to 5 s) until the coordinator has the visitor in the rebalancing group; whether
        the visitor's join has completed by then."""
        # Leave as soon as the coordinator has the visitor in the rebalancing group: the
        # others are still rejoining (they notice at their next heartbeat).
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not pending.done():
            try:
                group = await self.describe()
            except VisitFailed:
                break  # rather leave now than stay for the join to complete
            if member_id in group.member_ids and group.state != "Stable":
                break
            await asyncio.sleep(0.01)
        return (
            pending.done()
            and not pending.cancelled()
            and pending.exception() is None
            and pending.result().error_code == 0
        )

    async def _leave(
        self, node: int, member_id: str, pending: asyncio.Future[Any], joined_at: float | None
    ) -> tuple[float | None, float, str | None]:
        """Send LeaveGroup for the visitor: (when it joined, when it left, why the leave failed
        or None)."""
        left_at = time.monotonic()
        refused: str | None = None
        leave = asyncio.ensure_future(
            self._client.send(node, LeaveGroupRequest(self.group_id, member_id))
        )
        try:
            await asyncio.shield(leave)
            left_at = time.monotonic()
        except KafkaError as error:
            refused = f"LeaveGroup on {self.group_id!r} failed: {error}"
        # Answered by the coordinator at the leave (UNKNOWN_MEMBER_ID) or at the join's end.
        with contextlib.suppress(KafkaError, TimeoutError):
            answer = await asyncio.wait_for(pending, 5.0)
            if joined_at is None and answer.error_code == 0:
                joined_at = left_at
        return joined_at, left_at, refused

    async def _stable_without(
        self, before: ClassicGroup, member_id: str, settle_timeout: float
    ) -> ClassicGroup:
        """The group once Stable again without the visitor; VisitFailed after settle_timeout."""
        after = before
        deadline = time.monotonic() + settle_timeout
        while time.monotonic() < deadline:
            after = await self.describe()
            if after.state == "Stable" and member_id not in after.member_ids:
                return after
            await asyncio.sleep(0.05)
        raise VisitFailed(
            f"group {self.group_id!r} was not Stable again within {settle_timeout:g} s "
            f"(state {after.state})"
        )

    async def close(self) -> None:
        await self._client.close()
