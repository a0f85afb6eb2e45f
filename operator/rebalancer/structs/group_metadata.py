"""Decode librdkafka's consumer group metadata, the one place a consumer learns its generation.

confluent-kafka's `Consumer.consumer_group_metadata()` is documented as opaque (it exists for
transactional producers), but librdkafka serialises it as:

    b"CGMDv2:" | int32 generation (native byte order, -1 before the first join)
    | group id NUL | member id NUL | int8 "instance id is null" | [instance id NUL]

If a future librdkafka changes this, the parser reports generation -1 rather than guessing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")
UNKNOWN_GENERATION = -1


@dataclass(frozen=True)
class GroupMetadata:
    generation: int
    group_id: str | None = None
    member_id: str | None = None
    instance_id: str | None = None

    @property
    def known(self) -> bool:
        return self.generation >= 0


UNRECOGNISED = GroupMetadata(UNKNOWN_GENERATION)


def _cstring(raw: bytes, start: int) -> tuple[str, int] | None:
    end = raw.find(b"\x00", start)
    if end < 0:
        return None
    return raw[start:end].decode("utf-8", errors="replace"), end + 1


def parse_group_metadata(raw: object) -> GroupMetadata:
    """Decode what `consumer_group_metadata()` returned; UNRECOGNISED if it is not CGMDv2."""
    if isinstance(raw, bytearray | memoryview):
        raw = bytes(raw)
    if not isinstance(raw, bytes) or not raw.startswith(_MAGIC):
        return UNRECOGNISED
    offset = len(_MAGIC)
    if len(raw) < offset + _GENERATION.size:
        return UNRECOGNISED
    (generation,) = _GENERATION.unpack_from(raw, offset)
    generation = max(generation, UNKNOWN_GENERATION)
    offset += _GENERATION.size
    group = _cstring(raw, offset)
    member = _cstring(raw, group[1]) if group else None
    if group is None or member is None:
        # The generation comes first, so it is still trustworthy on a truncated tail.
        return GroupMetadata(generation)
    instance_id: str | None = None
    flag_at = member[1]
    if flag_at < len(raw) and raw[flag_at] == 0:
        instance = _cstring(raw, flag_at + 1)
        instance_id = instance[0] if instance else None
    return GroupMetadata(generation, group[0], member[0] or None, instance_id)
