from __future__ import annotations

import struct

import pytest

from rebalancer.structs.group_metadata import UNRECOGNISED, GroupMetadata, parse_group_metadata

# Captured from confluent-kafka 2.16.1 (librdkafka 2.16.0) against the lab's broker.
BEFORE_JOIN = b"CGMDv2:\xff\xff\xff\xffg1\x00\x00\x01"
JOINED = b"CGMDv2:\x00\x00\x00\x00g1\x00rdkafka-e1db53f6-b45b-4cf4-9de0-6a4a3f05969b\x00\x01"
STATIC = b"CGMDv2:\xff\xff\xff\xffgx\x00\x00\x00pod-0\x00"


def encode(generation: int, group: bytes, member: bytes, instance: bytes | None) -> bytes:
    tail = b"\x01" if instance is None else b"\x00" + instance + b"\x00"
    return b"CGMDv2:" + struct.pack("=i", generation) + group + b"\x00" + member + b"\x00" + tail


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (BEFORE_JOIN, GroupMetadata(-1, "g1", None, None)),
        (JOINED, GroupMetadata(0, "g1", "rdkafka-e1db53f6-b45b-4cf4-9de0-6a4a3f05969b", None)),
        (STATIC, GroupMetadata(-1, "gx", None, "pod-0")),
        (encode(7, b"orders", b"m-1", b"orders-0"), GroupMetadata(7, "orders", "m-1", "orders-0")),
        (encode(2**31 - 1, b"g", b"m", None), GroupMetadata(2**31 - 1, "g", "m", None)),
        (bytearray(encode(3, b"g", b"m", None)), GroupMetadata(3, "g", "m", None)),
    ],
)
def test_librdkafka_metadata_is_decoded(raw: bytes, expected: GroupMetadata) -> None:
    assert parse_group_metadata(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [b"", b"CGMDv1:\x00\x00\x00\x03g\x00", b"CGMDv2:\x01\x00", None, "CGMDv2:abcd", 42, b"junk"],
)
def test_unrecognised_formats_give_an_unknown_generation(raw: object) -> None:
    parsed = parse_group_metadata(raw)
    assert parsed == UNRECOGNISED
    assert parsed.generation == -1
    assert not parsed.known


def test_generation_survives_a_truncated_tail() -> None:
    raw = b"CGMDv2:" + struct.pack("=i", 5) + b"group-without-terminator"
    assert parse_group_metadata(raw) == GroupMetadata(5)


def test_generations_below_minus_one_are_clamped() -> None:
    assert parse_group_metadata(encode(-7, b"g", b"m", None)).generation == -1
