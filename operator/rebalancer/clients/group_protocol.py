"""The wire formats of the batched group reads, for aiokafka's connection layer.

FindCoordinator v4 (KIP-699: many keys), DescribeGroups v5 (many groups, with static members'
instance ids), ConsumerGroupDescribe v0 (API key 69, KIP-848 groups) and OffsetFetch v8 (many
groups). aiokafka 0.14 stops at FindCoordinator v1, DescribeGroups v3 and OffsetFetch v3, one key
or group each, and has no ConsumerGroupDescribe, so the schemas are written here from Kafka's
message definitions (common/message/*.json in kafka-clients 4.4.0), as clients/streams_groups.py
does. aiokafka has no type hints mypy reads, hence the ignores on the classes built on its types.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from io import BytesIO

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

FIND_COORDINATOR = 10
DESCRIBE_GROUPS = 15
OFFSET_FETCH = 9
CONSUMER_GROUP_DESCRIBE = 69
# FindCoordinator's key type of a consumer group (1 is a transactional id).
GROUP_KEY_TYPE = 0
_TEXT = CompactString("utf-8")


class _Uuid(AbstractType[uuid.UUID]):  # type: ignore[misc]
    @classmethod
    def encode(cls, value: uuid.UUID) -> bytes:
        return value.bytes

    @classmethod
    def decode(cls, data: BytesIO) -> uuid.UUID:
        return uuid.UUID(bytes=data.read(16))


class FindCoordinatorResponseV4(Response):  # type: ignore[misc]
    API_KEY = FIND_COORDINATOR
    API_VERSION = 4
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "coordinators",
            CompactArray(
                ("key", _TEXT),
                ("node_id", Int32),
                ("host", _TEXT),
                ("port", Int32),
                ("error_code", Int16),
                ("error_message", _TEXT),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class FindCoordinatorRequestV4(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = FIND_COORDINATOR
    API_VERSION = 4
    RESPONSE_TYPE = FindCoordinatorResponseV4
    SCHEMA = Schema(
        ("key_type", Int8),
        ("coordinator_keys", CompactArray(_TEXT)),
        ("tags", TaggedFields),
    )


class FindGroupCoordinators(Request[FindCoordinatorRequestV4]):  # type: ignore[misc]
    """The coordinators of many groups in one request."""

    API_KEY = FIND_COORDINATOR

    def __init__(self, group_ids: Sequence[str]) -> None:
        self._group_ids = list(group_ids)

    def build(self, request_struct_class: type[FindCoordinatorRequestV4]) -> RequestStruct:
        return request_struct_class(GROUP_KEY_TYPE, self._group_ids, {})


class DescribeGroupsResponseV5(Response):  # type: ignore[misc]
    API_KEY = DESCRIBE_GROUPS
    API_VERSION = 5
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("group_id", _TEXT),
                ("group_state", _TEXT),
                ("protocol_type", _TEXT),
                ("protocol_data", _TEXT),
                (
                    "members",
                    CompactArray(
                        ("member_id", _TEXT),
                        ("group_instance_id", _TEXT),
                        ("client_id", _TEXT),
                        ("client_host", _TEXT),
                        ("member_metadata", CompactBytes),
                        ("member_assignment", CompactBytes),
                        ("tags", TaggedFields),
                    ),
                ),
                ("authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class DescribeGroupsRequestV5(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = DESCRIBE_GROUPS
    API_VERSION = 5
    RESPONSE_TYPE = DescribeGroupsResponseV5
    SCHEMA = Schema(
        ("groups", CompactArray(_TEXT)),
        ("include_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class DescribeClassicGroups(Request[DescribeGroupsRequestV5]):  # type: ignore[misc]
    API_KEY = DESCRIBE_GROUPS

    def __init__(self, group_ids: Sequence[str]) -> None:
        self._group_ids = list(group_ids)

    def build(self, request_struct_class: type[DescribeGroupsRequestV5]) -> RequestStruct:
        return request_struct_class(self._group_ids, False, {})


_ASSIGNMENT = Schema(
    (
        "topic_partitions",
        CompactArray(
            ("topic_id", _Uuid),
            ("topic_name", _TEXT),
            ("partitions", CompactArray(Int32)),
            ("tags", TaggedFields),
        ),
    ),
    ("tags", TaggedFields),
)


class ConsumerGroupDescribeResponseV0(Response):  # type: ignore[misc]
    API_KEY = CONSUMER_GROUP_DESCRIBE
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("error_message", _TEXT),
                ("group_id", _TEXT),
                ("group_state", _TEXT),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                ("assignor_name", _TEXT),
                (
                    "members",
                    CompactArray(
                        ("member_id", _TEXT),
                        ("instance_id", _TEXT),
                        ("rack_id", _TEXT),
                        ("member_epoch", Int32),
                        ("client_id", _TEXT),
                        ("client_host", _TEXT),
                        ("subscribed_topic_names", CompactArray(_TEXT)),
                        ("subscribed_topic_regex", _TEXT),
                        ("assignment", _ASSIGNMENT),
                        ("target_assignment", _ASSIGNMENT),
                        ("tags", TaggedFields),
                    ),
                ),
                ("authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class ConsumerGroupDescribeRequestV0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = CONSUMER_GROUP_DESCRIBE
    API_VERSION = 0
    RESPONSE_TYPE = ConsumerGroupDescribeResponseV0
    SCHEMA = Schema(
        ("group_ids", CompactArray(_TEXT)),
        ("include_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class DescribeConsumerGroups(Request[ConsumerGroupDescribeRequestV0]):  # type: ignore[misc]
    API_KEY = CONSUMER_GROUP_DESCRIBE

    def __init__(self, group_ids: Sequence[str]) -> None:
        self._group_ids = list(group_ids)

    def build(self, request_struct_class: type[ConsumerGroupDescribeRequestV0]) -> RequestStruct:
        return request_struct_class(self._group_ids, False, {})


class OffsetFetchResponseV8(Response):  # type: ignore[misc]
    API_KEY = OFFSET_FETCH
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("group_id", _TEXT),
                (
                    "topics",
                    CompactArray(
                        ("name", _TEXT),
                        (
                            "partitions",
                            CompactArray(
                                ("partition_index", Int32),
                                ("committed_offset", Int64),
                                ("committed_leader_epoch", Int32),
                                ("metadata", _TEXT),
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
        ("tags", TaggedFields),
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
                ("group_id", _TEXT),
                (
                    "topics",
                    CompactArray(
                        ("name", _TEXT),
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


class FetchGroupOffsets(Request[OffsetFetchRequestV8]):  # type: ignore[misc]
    """Every committed offset of many groups: a null topic list asks for all of a group's."""

    API_KEY = OFFSET_FETCH

    def __init__(self, group_ids: Sequence[str]) -> None:
        self._group_ids = list(group_ids)

    def build(self, request_struct_class: type[OffsetFetchRequestV8]) -> RequestStruct:
        groups: list[tuple[str, None, dict[int, bytes]]] = [
            (group_id, None, {}) for group_id in self._group_ids
        ]
        return request_struct_class(groups, False, {})
