"""Pieces of Kafka's wire format that aiokafka 0.14 lacks, for the requests written here.

clients/group_protocol.py (the batched group reads) and clients/streams_groups.py (KIP-1071
streams groups) write their schemas from Kafka's message definitions (common/message/*.json in
kafka-clients 4.4.0); the types and the parts those schemas share are declared once, here.
aiokafka has no type hints mypy reads, hence the ignores on the classes built on its types.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from io import BytesIO
from typing import Any, TypeVar

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

TEXT = CompactString("utf-8")


class Uuid(AbstractType[uuid.UUID]):  # type: ignore[misc]
    @classmethod
    def encode(cls, value: uuid.UUID) -> bytes:
        return value.bytes

    @classmethod
    def decode(cls, data: BytesIO) -> uuid.UUID:
        return uuid.UUID(bytes=data.read(16))


class UInt16(AbstractType[int]):  # type: ignore[misc]
    @classmethod
    def encode(cls, value: int) -> bytes:
        return struct.pack(">H", value)

    @classmethod
    def decode(cls, data: BytesIO) -> int:
        (value,) = struct.unpack(">H", data.read(2))
        return int(value)


class Nullable(Schema):  # type: ignore[misc]
    """A nullable struct of a flexible version: an int8 marker (-1 null, 1 present) first."""

    def encode(self, item: Sequence[Any] | None) -> bytes:
        if item is None:
            return bytes(Int8.encode(-1))
        encoded: bytes = super().encode(item)
        return bytes(Int8.encode(1)) + encoded

    def decode(self, data: BytesIO) -> Any:
        if Int8.decode(data) < 0:
            return None
        return super().decode(data)


# How a group's entry begins in the answers of ConsumerGroupDescribe (KIP-848) and
# StreamsGroupDescribe (KIP-1071).
EPOCH_GROUP_HEAD = (
    ("error_code", Int16),
    ("error_message", TEXT),
    ("group_id", TEXT),
    ("group_state", TEXT),
    ("group_epoch", Int32),
    ("assignment_epoch", Int32),
)


def answer_schema(*fields: tuple[str, Any]) -> Schema:
    """The answer of each request written here: its throttle time, `fields`, its tagged fields."""
    return Schema(("throttle_time_ms", Int32), *fields, ("tags", TaggedFields))


def described_groups(*fields: tuple[str, Any]) -> Schema:
    """The answer of a Describe request of many groups (DescribeGroups v5, ConsumerGroupDescribe,
    StreamsGroupDescribe): an entry of `fields` a group, then its authorized operations."""
    return answer_schema(
        ("groups", CompactArray(*fields, ("authorized_operations", Int32), ("tags", TaggedFields)))
    )


def describe_by_ids(ids_field: str = "group_ids") -> Schema:
    """The matching request: the group ids (under the name Kafka gives them), and whether the
    answer names the authorized operations."""
    return Schema(
        (ids_field, CompactArray(TEXT)),
        ("include_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


RequestT = TypeVar("RequestT", bound=RequestStruct)


class ByNames(Request[RequestT]):  # type: ignore[misc]
    """A request about many groups (or group types), named in one list; a subclass names the
    API key and, as the type argument, its request structs, and builds them from `_names`."""

    # aiokafka wants a key on every Request class; this one is never sent itself.
    API_KEY = -1

    def __init__(self, names: Sequence[str]) -> None:
        self._names = list(names)


class DescribeByIds(ByNames[RequestT]):
    """A Describe request of many groups, its authorized operations not asked for."""

    def build(self, request_struct_class: type[RequestT]) -> RequestT:
        built: RequestT = request_struct_class(self._names, False, {})
        return built


def subscription_generation(metadata: bytes | None) -> int | None:
    """The generation a classic consumer-group member was in when it last joined, from the
    ConsumerProtocolSubscription its JoinGroup carried (DescribeGroups' member_metadata):
    a field since version 2 (KIP-792), -1 for a member joining afresh. None when the metadata
    is older, of another protocol or cut short."""
    if not metadata:
        return None
    data = BytesIO(metadata)
    try:
        version = Int16.decode(data)
        if version < 2:
            return None
        for _ in range(Int32.decode(data)):  # topics
            _skip(data, Int16.decode(data))
        _skip(data, Int32.decode(data))  # user data
        for _ in range(Int32.decode(data)):  # owned partitions, by topic
            _skip(data, Int16.decode(data))
            _skip(data, 4 * Int32.decode(data))
        return int(Int32.decode(data))
    except (struct.error, ValueError):
        return None


def _skip(data: BytesIO, length: int) -> None:
    """Past `length` bytes (a null field's -1 is none); ValueError when they are not there."""
    if length > 0 and len(data.read(length)) != length:
        raise ValueError("metadata cut short")
