"""Streams groups (KIP-1071) read from the broker: ListGroups v5 by type, StreamsGroupDescribe.

librdkafka 2.16 (confluent-kafka 2.16.1) cannot see a streams group: it has no
StreamsGroupDescribe, its ConsumerGroupType knows only CONSUMER and CLASSIC (a types filter of
UNKNOWN is refused locally), its list_consumer_groups leaves streams groups out, and
describe_consumer_groups answers for a live streams group with a Dead classic group and no
members (measured on Apache Kafka 4.4 with a running Kafka Streams 4.4 application). So the two
requests are sent here with aiokafka's connection (security as for the group visitor), from
their schemas in Kafka's message definitions (common/message/*.json in kafka-clients 4.4.0), with
the types and parts clients/kafka_wire.py declares. aiokafka has no type hints mypy reads, hence
the ignores on the classes built on its types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import KafkaError
from aiokafka.protocol.api import RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

from rebalancer.clients.group_visiting import client_options
from rebalancer.clients.kafka_wire import (
    EPOCH_GROUP_HEAD,
    TEXT,
    ByNames,
    DescribeByIds,
    Nullable,
    UInt16,
    answer_schema,
    describe_by_ids,
    described_groups,
)
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.streams_groups import (
    STREAMS_GROUP_TYPE,
    ListedGroup,
    StreamsAssignment,
    StreamsGroupView,
    StreamsMember,
    Subtopology,
    TaskSet,
)

# Kafka's error codes the answers may carry, by name for messages.
_ERRORS = {
    15: "COORDINATOR_NOT_AVAILABLE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    16: "NOT_COORDINATOR",
    24: "INVALID_GROUP_ID",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
}
# Answers that change by themselves: the coordinator loads, moves or is elected.
_PASSING = {14, 15, 16}
# StreamsGroupDescribe's answer for a group id that has no streams group: none at all, or a
# classic or KIP-848 group ("Group g is not a streams group.").
GROUP_ID_NOT_FOUND = 69
STREAMS_GROUP_DESCRIBE = 89
LIST_GROUPS = 16


def _error_name(code: int) -> str:
    return _ERRORS.get(code, f"error code {code}")


class StreamsGroupUnreadable(RebalancerError):
    """The broker could not be asked, or said no; the message names the request and why."""

    def __init__(self, message: str, *, retriable: bool = False, code: int | None = None) -> None:
        super().__init__(message)
        # A coordinator moving or loading, or a broker away, answers later; a refusal does not.
        self.retriable = retriable
        # Kafka's error code when the broker answered with one.
        self.code = code


_KEY_VALUE = CompactArray(("key", TEXT), ("value", TEXT), ("tags", TaggedFields))
_TOPIC_INFO = CompactArray(
    ("name", TEXT),
    ("partitions", Int32),
    ("replication_factor", Int16),
    ("topic_configs", _KEY_VALUE),
    ("tags", TaggedFields),
)
_TASK_IDS = CompactArray(
    ("subtopology_id", TEXT), ("partitions", CompactArray(Int32)), ("tags", TaggedFields)
)
_TASK_OFFSETS = CompactArray(
    ("subtopology_id", TEXT),
    ("partition", Int32),
    ("offset", Int64),
    ("tags", TaggedFields),
)
_ASSIGNMENT = Schema(
    ("active_tasks", _TASK_IDS),
    ("standby_tasks", _TASK_IDS),
    ("warmup_tasks", _TASK_IDS),
    ("tags", TaggedFields),
)
_SUBTOPOLOGIES = CompactArray(
    ("subtopology_id", TEXT),
    ("source_topics", CompactArray(TEXT)),
    ("repartition_sink_topics", CompactArray(TEXT)),
    ("state_changelog_topics", _TOPIC_INFO),
    ("repartition_source_topics", _TOPIC_INFO),
    ("tags", TaggedFields),
)
_MEMBERS = CompactArray(
    ("member_id", TEXT),
    ("member_epoch", Int32),
    ("instance_id", TEXT),
    ("rack_id", TEXT),
    ("client_id", TEXT),
    ("client_host", TEXT),
    ("topology_epoch", Int32),
    ("process_id", TEXT),
    ("user_endpoint", Nullable(("host", TEXT), ("port", UInt16), ("tags", TaggedFields))),
    ("client_tags", _KEY_VALUE),
    ("task_offsets", _TASK_OFFSETS),
    ("task_end_offsets", _TASK_OFFSETS),
    ("assignment", _ASSIGNMENT),
    ("target_assignment", _ASSIGNMENT),
    ("is_classic", Boolean),
    ("tags", TaggedFields),
)


class StreamsGroupDescribeResponseV0(Response):  # type: ignore[misc]
    API_KEY = STREAMS_GROUP_DESCRIBE
    API_VERSION = 0
    SCHEMA = described_groups(
        *EPOCH_GROUP_HEAD,
        (
            "topology",
            Nullable(("epoch", Int32), ("subtopologies", _SUBTOPOLOGIES), ("tags", TaggedFields)),
        ),
        ("members", _MEMBERS),
    )


class StreamsGroupDescribeRequestV0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = STREAMS_GROUP_DESCRIBE
    API_VERSION = 0
    RESPONSE_TYPE = StreamsGroupDescribeResponseV0
    SCHEMA = describe_by_ids()


class StreamsGroupDescribeRequest(DescribeByIds[StreamsGroupDescribeRequestV0]):
    API_KEY = STREAMS_GROUP_DESCRIBE


class ListGroupsResponseV5(Response):  # type: ignore[misc]
    API_KEY = LIST_GROUPS
    API_VERSION = 5
    SCHEMA = answer_schema(
        ("error_code", Int16),
        (
            "groups",
            CompactArray(
                ("group_id", TEXT),
                ("protocol_type", TEXT),
                ("group_state", TEXT),
                ("group_type", TEXT),
                ("tags", TaggedFields),
            ),
        ),
    )


class ListGroupsRequestV5(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = LIST_GROUPS
    API_VERSION = 5
    RESPONSE_TYPE = ListGroupsResponseV5
    SCHEMA = Schema(
        ("states_filter", CompactArray(TEXT)),
        ("types_filter", CompactArray(TEXT)),
        ("tags", TaggedFields),
    )


class ListGroupsByTypeRequest(ByNames[ListGroupsRequestV5]):
    """ListGroups v5 (KIP-848): a types filter (the names), and each group's type in the answer."""

    API_KEY = LIST_GROUPS

    def build(self, request_struct_class: type[ListGroupsRequestV5]) -> ListGroupsRequestV5:
        return request_struct_class([], self._names, {})


_Raw: TypeAlias = Any  # a decoded aiokafka struct: tuples in schema order


def _task_sets(raw: Sequence[_Raw] | None) -> tuple[TaskSet, ...]:
    return tuple(
        TaskSet(str(subtopology), tuple(sorted(int(p) for p in partitions or ())))
        for subtopology, partitions, _ in raw or ()
    )


def _assignment(raw: _Raw) -> StreamsAssignment:
    active, standby, warmup, _ = raw
    return StreamsAssignment(_task_sets(active), _task_sets(standby), _task_sets(warmup))


def _member(raw: _Raw) -> StreamsMember:
    return StreamsMember(
        member_id=str(raw[0]),
        member_epoch=int(raw[1]),
        instance_id=raw[2],
        process_id=str(raw[7]),
        client_id=str(raw[4]),
        client_host=str(raw[5]),
        assignment=_assignment(raw[12]),
        target=_assignment(raw[13]),
    )


def _topology(raw: _Raw | None) -> tuple[Subtopology, ...] | None:
    if raw is None or raw[1] is None:
        return None
    return tuple(
        Subtopology(
            subtopology_id=str(sub[0]),
            source_topics=tuple(sub[1] or ()),
            changelog_topics=tuple(str(info[0]) for info in sub[3] or ()),
            repartition_sink_topics=tuple(sub[2] or ()),
        )
        for sub in raw[1]
    )


def read_described_group(raw: _Raw) -> StreamsGroupView:
    """One DescribedGroup of a StreamsGroupDescribe answer; StreamsGroupUnreadable when the
    broker answered for it with an error."""
    code, message, group_id = int(raw[0]), raw[1], str(raw[2])
    if code:
        said = f": {message}" if message else ""
        raise StreamsGroupUnreadable(
            f"StreamsGroupDescribe on {group_id!r}: {_error_name(code)}{said}",
            retriable=code in _PASSING,
            code=code,
        )
    return StreamsGroupView(
        group_id=group_id,
        state=str(raw[3]),
        group_epoch=int(raw[4]),
        assignment_epoch=int(raw[5]),
        topology=_topology(raw[6]),
        members=tuple(_member(member) for member in raw[7] or ()),
    )


class StreamsGroupReader:
    """One aiokafka connection to a cluster, for streams groups; close() when done."""

    def __init__(self, kafka: Mapping[str, str], client_id: str = "rebalancer-streams") -> None:
        self._client = AIOKafkaClient(client_id=client_id, **client_options(kafka))
        self._started = False

    async def _start(self) -> None:
        if not self._started:
            await self._client.bootstrap()
            self._started = True

    async def list_groups(self, types: Sequence[str] = (STREAMS_GROUP_TYPE,)) -> list[ListedGroup]:
        """Every group of these types on every broker (each lists those it coordinates)."""
        try:
            await self._start()
            await self._client.force_metadata_update()
            listed: list[ListedGroup] = []
            for broker in sorted(self._client.cluster.brokers(), key=lambda b: b.nodeId):
                answer = await self._client.send(broker.nodeId, ListGroupsByTypeRequest(types))
                if answer.error_code:
                    raise StreamsGroupUnreadable(
                        f"ListGroups on broker {broker.nodeId}: {_error_name(answer.error_code)}",
                        retriable=answer.error_code in _PASSING,
                    )
                listed += [
                    ListedGroup(str(g[0]), str(g[1] or ""), str(g[2] or ""), str(g[3] or ""))
                    for g in answer.groups
                ]
        except KafkaError as error:
            raise StreamsGroupUnreadable(
                f"ListGroups failed: {error}", retriable=bool(error.retriable)
            ) from None
        return sorted(listed, key=lambda group: group.group_id)

    async def describe(self, group_id: str) -> StreamsGroupView:
        """The group as its coordinator describes it (StreamsGroupDescribe v0, Kafka 4.1+)."""
        try:
            await self._start()
            node = await self._client.coordinator_lookup(CoordinationType.GROUP, group_id)
            answer = await self._client.send(node, StreamsGroupDescribeRequest([group_id]))
        except KafkaError as error:
            raise StreamsGroupUnreadable(
                f"StreamsGroupDescribe on {group_id!r} failed: {error}",
                retriable=bool(error.retriable),
            ) from None
        return read_described_group(answer.groups[0])

    async def close(self) -> None:
        await self._client.close()


async def read_streams_group(kafka: Mapping[str, str], group_id: str) -> StreamsGroupView | None:
    """The group's describe when the broker lists it as a streams group, None when it does not
    (a classic or KIP-848 group, or none). One connection, closed before returning."""
    reader = StreamsGroupReader(kafka, client_id="rebalancer-observer")
    try:
        listed = await reader.list_groups()
        if group_id not in {group.group_id for group in listed}:
            return None
        return await reader.describe(group_id)
    finally:
        await reader.close()


async def describe_streams_group(
    kafka: Mapping[str, str], group_id: str
) -> StreamsGroupView | None:
    """The group's StreamsGroupDescribe without a ListGroups first, for a group the spec
    declares a streams group; None when the broker has no streams group of that id (none yet,
    or a classic or KIP-848 group: GROUP_ID_NOT_FOUND answers both). One connection, closed
    before returning."""
    reader = StreamsGroupReader(kafka, client_id="rebalancer-observer")
    try:
        return await reader.describe(group_id)
    except StreamsGroupUnreadable as error:
        if error.code == GROUP_ID_NOT_FOUND:
            return None
        raise
    finally:
        await reader.close()
