"""Group describes and committed offsets read in batches, one request per coordinator.

librdkafka 2.16 (confluent-kafka 2.16.1) sends one DescribeGroups, one ConsumerGroupDescribe
and one OffsetFetch per group however many groups a call carries, with a FindCoordinator lookup
for most of them (tests/clients/kafka/test_gateway_request_counts.py). Every one of those
requests takes a list, so the reads asked within a batch window are sent here with aiokafka's
connection (security as for the group visitor): one FindCoordinator v4 for the groups whose
coordinator is not known, then per coordinator one ConsumerGroupDescribe, one DescribeGroups for
the groups it says are not KIP-848 groups, and one OffsetFetch v8 (planning/coordinator_batches).

Answers are the attribute shapes of librdkafka's results, so the gateway reads them with the
same functions as before (clients/kafka_reading.py). An error in an answer stays with its group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError

from rebalancer.clients.group_protocol import (
    DescribeClassicGroups,
    DescribeConsumerGroups,
    FetchGroupOffsets,
    FindGroupCoordinators,
)
from rebalancer.clients.group_visiting import client_options
from rebalancer.clients.kafka_wire import subscription_generation
from rebalancer.planning.coordinator_batches import (
    CLASSIC_FALLBACK,
    COORDINATOR_GONE,
    batch_by_coordinator,
    error_name,
    remembered,
)
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.kafka_properties import SettingsError

logger = logging.getLogger(__name__)

# librdkafka's name for a group whose protocol type is "consumer" (or empty: a group that only
# commits offsets); any other type is not a consumer group to it.
CONSUMER_PROTOCOL_TYPE = "consumer"
# Called with the requests of each kind just sent ("DescribeGroups": 1, ...).
RequestCounter = Callable[[Mapping[str, int]], None]
# The reader's failure codes that are not Kafka's: no broker answered the bootstrap, or the
# coordinator's connection failed (librdkafka's names for the like).
UNREACHED = "_ALL_BROKERS_DOWN"
DROPPED = "_TRANSPORT"


def batch_readable(kafka: Mapping[str, str]) -> str | None:
    """Why these librdkafka settings cannot be carried over to aiokafka's connection, None
    when they can."""
    if kafka.get("ssl.certificate.pem") or kafka.get("ssl.key.pem"):
        return "aiokafka takes a TLS client certificate from files only"
    if str(kafka.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        return "aiokafka's TLS context here always verifies the broker's certificate"
    try:
        client_options(kafka)
    except SettingsError as error:
        return str(error)
    return None


class GroupReadFailed(RebalancerError):
    """What a batch says about one group instead of an answer: a Kafka error code's name (or
    UNREACHED, DROPPED) and the text that goes with it."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(f"{text} ({code})")
        self.code = code
        self.text = text


@dataclass(frozen=True)
class Node:
    id: int


@dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    offset: int = -1001
    error: str | None = None


@dataclass(frozen=True)
class Assignment:
    topic_partitions: tuple[Partition, ...]


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: Assignment | None
    target_assignment: Assignment | None = None
    # Classic groups: the generation the member's last JoinGroup came from (KIP-792), which
    # librdkafka's description does not carry.
    subscribed_generation: int | None = None


@dataclass(frozen=True)
class Description:
    """One group as librdkafka's ConsumerGroupDescription has it."""

    group_id: str
    # As librdkafka's enum has it: read by name (kafka_reading.read_state), so the wire's
    # "CompletingRebalance" reads as COMPLETING_REBALANCE.
    state: GroupState
    type: str
    partition_assignor: str
    members: tuple[Member, ...]
    coordinator: Node
    # KIP-848 groups: the group epoch, which librdkafka's description does not carry.
    group_epoch: int | None = None


@dataclass(frozen=True)
class Offsets:
    """One group's committed offsets as librdkafka's ConsumerGroupTopicPartitions has them."""

    group_id: str
    topic_partitions: tuple[Partition, ...]


def _partitions(raw: Sequence[Any] | None) -> Assignment:
    return Assignment(
        tuple(Partition(str(name), int(p)) for _, name, parts, _ in raw or () for p in parts or ())
    )


def consumer_description(raw: Any, node: int) -> Description:
    """A ConsumerGroupDescribe v0 DescribedGroup without an error."""
    members = tuple(
        Member(
            member_id=str(m[0]),
            client_id=str(m[4]),
            host=str(m[5]),
            group_instance_id=m[1],
            assignment=_partitions(m[8][0]),
            target_assignment=_partitions(m[9][0]),
        )
        for m in raw[7] or ()
    )
    state, assignor = GroupState.named(raw[3]), str(raw[6] or "")
    return Description(str(raw[2]), state, "CONSUMER", assignor, members, Node(node), int(raw[4]))


def _assignment(raw: bytes | None) -> Assignment | None:
    if not raw:
        return None
    decoded = ConsumerProtocolMemberAssignment.decode(raw)
    return Assignment(
        tuple(Partition(str(topic), int(p)) for topic, parts in decoded.assignment for p in parts)
    )


def classic_description(raw: Any, node: int) -> Description:
    """A DescribeGroups v5 DescribedGroup; GroupReadFailed for an error, or a group of another
    protocol type than consumers' (librdkafka refuses those alike)."""
    code, group_id, state, protocol_type, protocol = raw[:5]
    if code:
        raise GroupReadFailed(error_name(code), f"DescribeConsumerGroups: {error_name(code)}")
    if protocol_type and protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise GroupReadFailed(
            "_INVALID_ARG", f"GroupId {group_id} is not a consumer group ({protocol_type})."
        )
    members = tuple(
        Member(
            str(m[0]),
            str(m[2]),
            str(m[3]),
            m[1],
            _assignment(m[5]),
            subscribed_generation=subscription_generation(m[4]),
        )
        for m in raw[5] or ()
    )
    return Description(
        str(group_id), GroupState.named(state), "CLASSIC", str(protocol or ""), members, Node(node)
    )


def group_offsets(raw: Any) -> Offsets:
    """An OffsetFetch v8 group; GroupReadFailed for a group-level error."""
    group_id, topics, code = raw[0], raw[1], raw[2]
    if code:
        raise GroupReadFailed(error_name(code), f"OffsetFetch: {error_name(code)}")
    return Offsets(
        str(group_id),
        tuple(
            Partition(str(name), int(p[0]), int(p[1]), error_name(p[4]) if p[4] else None)
            for name, partitions, _ in topics or ()
            for p in partitions or ()
        ),
    )


class _CountedClient(AIOKafkaClient):  # type: ignore[misc]
    """aiokafka's client, its periodic metadata refreshes counted."""

    def __init__(self, count: RequestCounter, **options: Any) -> None:
        super().__init__(**options)
        self._count = count

    async def _metadata_update(self, cluster_metadata: Any, topics: Any) -> Any:
        self._count({"Metadata": 1})
        return await super()._metadata_update(cluster_metadata, topics)


@dataclass
class _Batch:
    # Each group's askers await one future: a Description, or Offsets.
    describes: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    offsets: dict[str, asyncio.Future[Any]] = field(default_factory=dict)

    def futures(self) -> list[asyncio.Future[Any]]:
        return [*self.describes.values(), *self.offsets.values()]


class GroupBatchReader:
    """Reads asked within `window_s` of each other go out together; close() when done. Lives on
    the event loop it was made on."""

    def __init__(
        self,
        kafka: Mapping[str, str],
        *,
        window_s: float,
        request_timeout_s: float,
        count_requests: RequestCounter | None = None,
        count_batch: Callable[[int], None] | None = None,
        client_id: str = "rebalancer-observer",
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self._count_requests = count_requests
        self._count_batch = count_batch
        self._client = _CountedClient(
            self._count,
            client_id=client_id,
            request_timeout_ms=int(request_timeout_s * 1000),
            **client_options(kafka),
        )
        self._window_s = window_s
        self._started = False
        self._starting = asyncio.Lock()
        self._known: dict[str, int] = {}
        self._batch = _Batch()
        self._flush: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()
        self.sent: dict[tuple[int | None, str], int] = {}

    def _count(self, sent: Mapping[str, int], node: int | None = None) -> None:
        for kind, count in sent.items():
            self.sent[(node, kind)] = self.sent.get((node, kind), 0) + count
        if self._count_requests is not None:
            self._count_requests(sent)

    def coordinator_of(self, group_id: str) -> int | None:
        """The node the reader takes for the group's coordinator, None when not known."""
        return self._known.get(group_id)

    async def describe(self, group_id: str) -> Description:
        description: Description = await self._ask(self._batch.describes, group_id)
        return description

    async def offsets(self, group_id: str) -> Offsets:
        offsets: Offsets = await self._ask(self._batch.offsets, group_id)
        return offsets

    async def _ask(self, waiting: dict[str, asyncio.Future[Any]], group_id: str) -> Any:
        future = waiting.get(group_id)
        if future is None:
            future = waiting[group_id] = self.loop.create_future()
            # Retrieved here too: an asker that gave up leaves nobody else to.
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
        if self._flush is None:
            self._flush = self.loop.call_later(self._window_s, self._start_batch)
        # Shielded: one asker given up must not cancel what another awaits.
        return await asyncio.shield(future)

    def _start_batch(self) -> None:
        batch, self._batch, self._flush = self._batch, _Batch(), None
        if self._count_batch is not None and batch.describes:
            self._count_batch(len(batch.describes))
        task = self.loop.create_task(self._serve(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _serve(self, batch: _Batch) -> None:
        try:
            await self._serve_batch(batch)
        except Exception as error:  # the askers raise it, each in its own observation
            failure = (
                error
                if isinstance(error, GroupReadFailed)
                else GroupReadFailed(DROPPED, str(error))
            )
            for future in batch.futures():
                if not future.done():
                    future.set_exception(failure)

    async def _serve_batch(self, batch: _Batch) -> None:
        await self._start()
        groups = [*batch.describes, *batch.offsets]
        plan = batch_by_coordinator(groups, self._known)
        found = await self._look_up(plan.lookups, batch)
        self._known = remembered(self._known, found)
        by_node = batch_by_coordinator(groups, self._known).by_node
        await asyncio.gather(
            *(
                self._serve_node(
                    node,
                    {g: batch.describes[g] for g in ids if g in batch.describes},
                    {g: batch.offsets[g] for g in ids if g in batch.offsets},
                )
                for node, ids in by_node.items()
            )
        )

    async def _start(self) -> None:
        async with self._starting:
            if self._started:
                return
            try:
                self._count({"Metadata": 1})
                await self._client.bootstrap()
            except (TimeoutError, KafkaError, OSError) as error:
                raise GroupReadFailed(UNREACHED, str(error)) from None
            self._started = True

    async def _send(self, node: int, request: Any, kind: str) -> Any:
        answer = await self._client.send(node, request)
        self._count({kind: 1}, node)
        return answer

    async def _look_up(self, group_ids: Sequence[str], batch: _Batch) -> dict[str, int | None]:
        """Each group's coordinator from one FindCoordinator; a group the broker names none
        for has its askers told why, and is left out."""
        if not group_ids:
            return {}
        node = self._client.get_random_node()
        try:
            answer = await self._send(node, FindGroupCoordinators(group_ids), "FindCoordinator")
        except IncompatibleBrokerVersion:
            raise GroupReadFailed(
                "UNSUPPORTED_VERSION", "the broker does not support FindCoordinator v4 (Kafka 2.8+)"
            ) from None
        except (TimeoutError, KafkaError, OSError) as error:
            raise GroupReadFailed(UNREACHED, str(error)) from None
        found: dict[str, int | None] = {}
        for key, node_id, _, _, code, message, _ in answer.coordinators:
            if code:
                found[str(key)] = None
                failure = GroupReadFailed(
                    error_name(code), f"FindCoordinator: {message or error_name(code)}"
                )
                for waiting in (batch.describes, batch.offsets):
                    future = waiting.get(str(key))
                    if future is not None and not future.done():
                        future.set_exception(failure)
            else:
                found[str(key)] = int(node_id)
        return found

    async def _serve_node(
        self,
        node: int,
        describes: dict[str, asyncio.Future[Description]],
        offsets: dict[str, asyncio.Future[Offsets]],
    ) -> None:
        results = await asyncio.gather(
            self._describe_on(node, list(describes)),
            self._offsets_on(node, list(offsets)),
            return_exceptions=True,
        )
        waiting: tuple[Mapping[str, asyncio.Future[Any]], ...] = (describes, offsets)
        for futures, answered in zip(waiting, results, strict=True):
            for group_id, future in futures.items():
                if future.done():
                    continue
                outcome: Any = answered
                if isinstance(answered, dict):
                    outcome = answered.get(group_id) or GroupReadFailed(
                        "_BAD_MSG", f"the coordinator's answer left group {group_id!r} out"
                    )
                elif not isinstance(answered, GroupReadFailed):
                    outcome = GroupReadFailed(DROPPED, str(answered))
                self._settle(group_id, future, outcome)

    def _settle(self, group_id: str, future: asyncio.Future[Any], outcome: Any) -> None:
        if isinstance(outcome, GroupReadFailed):
            if outcome.code in (DROPPED, *(error_name(c) for c in COORDINATOR_GONE)):
                self._known = remembered(self._known, {group_id: None})
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    async def _describe_on(self, node: int, group_ids: list[str]) -> dict[str, Any]:
        """Each group's Description or GroupReadFailed: ConsumerGroupDescribe first, then one
        DescribeGroups for the groups that are not KIP-848 groups."""
        if not group_ids:
            return {}
        answers: dict[str, Any] = {}
        classic: list[str] = []
        try:
            answer = await self._send(
                node, DescribeConsumerGroups(group_ids), "ConsumerGroupDescribe"
            )
            for raw in answer.groups:
                code = int(raw[0])
                if code in CLASSIC_FALLBACK:
                    classic.append(str(raw[2]))
                elif code:
                    said = raw[1] or error_name(code)
                    answers[str(raw[2])] = GroupReadFailed(
                        error_name(code), f"ConsumerGroupDescribe: {said}"
                    )
                else:
                    answers[str(raw[2])] = consumer_description(raw, node)
        except IncompatibleBrokerVersion:
            classic = list(group_ids)  # a broker without KIP-848
        except (TimeoutError, KafkaError, OSError) as error:
            raise GroupReadFailed(DROPPED, str(error)) from None
        if classic:
            try:
                answer = await self._send(node, DescribeClassicGroups(classic), "DescribeGroups")
            except (TimeoutError, KafkaError, OSError) as error:
                raise GroupReadFailed(DROPPED, str(error)) from None
            for raw in answer.groups:
                try:
                    answers[str(raw[1])] = classic_description(raw, node)
                except GroupReadFailed as failure:
                    answers[str(raw[1])] = failure
        return answers

    async def _offsets_on(self, node: int, group_ids: list[str]) -> dict[str, Any]:
        if not group_ids:
            return {}
        try:
            answer = await self._send(node, FetchGroupOffsets(group_ids), "OffsetFetch")
        except (TimeoutError, KafkaError, OSError) as error:
            raise GroupReadFailed(DROPPED, str(error)) from None
        answers: dict[str, Any] = {}
        for raw in answer.groups:
            try:
                answers[str(raw[0])] = group_offsets(raw)
            except GroupReadFailed as failure:
                answers[str(raw[0])] = failure
        return answers

    def forget(self, group_id: str) -> None:
        """Look the group's coordinator up again at its next read."""
        self._known.pop(group_id, None)

    async def close(self) -> None:
        self._stop()
        for task in list(self._running):
            task.cancel()
        await self._client.close()

    def close_soon(self) -> None:
        """close() from wherever the gateway is closed: on the reader's loop when it still
        runs, its connections dropped at once when it does not."""
        self._stop()
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self.close()))

    def _stop(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        closed = GroupReadFailed(UNREACHED, "the Kafka connection is closed")
        for future in self._batch.futures():
            if not future.done():
                future.set_exception(closed)
        self._batch = _Batch()
