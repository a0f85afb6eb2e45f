"""The wire formats of the batched group reads, for aiokafka's connection layer.

FindCoordinator v4 (KIP-699: many keys), DescribeGroups v5 (many groups, with static members'
instance ids), ConsumerGroupDescribe v0 (API key 69, KIP-848 groups) and OffsetFetch v8 (many
groups). aiokafka 0.14 stops at FindCoordinator v1, DescribeGroups v3 and OffsetFetch v3, one key
or group each, and has no ConsumerGroupDescribe, so the schemas are written here from Kafka's
message definitions (common/message/*.json in kafka-clients 4.4.0), with the types and parts
clients/kafka_wire.py declares for them and clients/streams_groups.py. aiokafka has no type hints
mypy reads, hence the ignores on the classes built on its types.
"""

from __future__ import annotations

from aiokafka.protocol.api import RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactBytes,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

from rebalancer.clients.kafka_wire import (
    EPOCH_GROUP_HEAD,
    TEXT,
    ByNames,
    DescribeByIds,
    Uuid,
    answer_schema,
    describe_by_ids,
    described_groups,
)

FIND_COORDINATOR = 10
DESCRIBE_GROUPS = 15
OFFSET_FETCH = 9
CONSUMER_GROUP_DESCRIBE = 69
# FindCoordinator's key type of a consumer group (1 is a transactional id).
GROUP_KEY_TYPE = 0


class FindCoordinatorResponseV4(Response):  # type: ignore[misc]
    API_KEY = FIND_COORDINATOR
    API_VERSION = 4
    SCHEMA = answer_schema(
        (
            "coordinators",
            CompactArray(
                ("key", TEXT),
                ("node_id", Int32),
                ("host", TEXT),
                ("port", Int32),
                ("error_code", Int16),
                ("error_message", TEXT),
                ("tags", TaggedFields),
            ),
        ),
    )


class FindCoordinatorRequestV4(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = FIND_COORDINATOR
    API_VERSION = 4
    RESPONSE_TYPE = FindCoordinatorResponseV4
    SCHEMA = Schema(
        ("key_type", Int8),
        ("coordinator_keys", CompactArray(TEXT)),
        ("tags", TaggedFields),
    )


class FindGroupCoordinators(ByNames[FindCoordinatorRequestV4]):
    """The coordinators of many groups in one request."""

    API_KEY = FIND_COORDINATOR

    def build(self, request_struct_class: type[FindCoordinatorRequestV4]) -> RequestStruct:
        return request_struct_class(GROUP_KEY_TYPE, self._names, {})


class DescribeGroupsResponseV5(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_GROUPS
    API_VERSION = 5
    SCHEMA = described_groups(
        ("error_code", Int16),
        ("group_id", TEXT),
        ("group_state", TEXT),
        ("protocol_type", TEXT),
        ("protocol_data", TEXT),
        (
            "members",
            CompactArray(
                ("member_id", TEXT),
                ("group_instance_id", TEXT),
                ("client_id", TEXT),
                ("client_host", TEXT),
                ("member_metadata", CompactBytes),
                ("member_assignment", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
    )


class DescribeGroupsRequestV5(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DESCRIBE_GROUPS
    API_VERSION = 5
    RESPONSE_TYPE = DescribeGroupsResponseV5
    SCHEMA = describe_by_ids("groups")


class DescribeClassicGroups(DescribeByIds[DescribeGroupsRequestV5]):
    API_KEY = DESCRIBE_GROUPS


_ASSIGNMENT = Schema(
    (
        "topic_partitions",
        CompactArray(
            ("topic_id", Uuid),
            ("topic_name", TEXT),
            ("partitions", CompactArray(Int32)),
            ("tags", TaggedFields),
        ),
    ),
    ("tags", TaggedFields),
)


class ConsumerGroupDescribeResponseV0(Response):  # type: ignore[misc]
    API_KEY = CONSUMER_GROUP_DESCRIBE
    API_VERSION = 0
    SCHEMA = described_groups(
        *EPOCH_GROUP_HEAD,
        ("assignor_name", TEXT),
        (
            "members",
            CompactArray(
                ("member_id", TEXT),
                ("instance_id", TEXT),
                ("rack_id", TEXT),
                ("member_epoch", Int32),
                ("client_id", TEXT),
                ("client_host", TEXT),
                ("subscribed_topic_names", CompactArray(TEXT)),
                ("subscribed_topic_regex", TEXT),
                ("assignment", _ASSIGNMENT),
                ("target_assignment", _ASSIGNMENT),
                ("tags", TaggedFields),
            ),
        ),
    )


class ConsumerGroupDescribeRequestV0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = CONSUMER_GROUP_DESCRIBE
    API_VERSION = 0
    RESPONSE_TYPE = ConsumerGroupDescribeResponseV0
    SCHEMA = describe_by_ids()


class DescribeConsumerGroups(DescribeByIds[ConsumerGroupDescribeRequestV0]):
    API_KEY = CONSUMER_GROUP_DESCRIBE


class OffsetFetchResponseV8(Response):  # type: ignore[misc]
    API_KEY = OFFSET_FETCH
    API_VERSION = 8
    SCHEMA = answer_schema(
        (
            "groups",
            CompactArray(
                ("group_id", TEXT),
                (
                    "topics",
                    CompactArray(
                        ("name", TEXT),
                        (
                            "partitions",
                            CompactArray(
                                ("partition_index", Int32),
                                ("committed_offset", Int64),
                                ("committed_leader_epoch", Int32),
                                ("metadata", TEXT),
                                ("error_code", Int16),
                                ("tags", TaggedFields),
                            ),
                        ),
                        ("tags", TaggedFields),
                    ),
                ),
                ("error_code", Int16),
                ("tags", TaggedFields),
            ),
        ),
    )


class OffsetFetchRequestV8(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = OFFSET_FETCH
    API_VERSION = 8
    RESPONSE_TYPE = OffsetFetchResponseV8
    SCHEMA = Schema(
        (
            "groups",
            CompactArray(
                ("group_id", TEXT),
                (
                    "topics",
                    CompactArray(
                        ("name", TEXT),
                        ("partition_indexes", CompactArray(Int32)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


class FetchGroupOffsets(ByNames[OffsetFetchRequestV8]):
    """Every committed offset of many groups: a null topic list asks for all of a group's."""

    API_KEY = OFFSET_FETCH

    def build(self, request_struct_class: type[OffsetFetchRequestV8]) -> RequestStruct:
        groups: list[tuple[str, None, dict[int, bytes]]] = [
            (group_id, None, {}) for group_id in self._names
        ]
        return request_struct_class(groups, False, {})
