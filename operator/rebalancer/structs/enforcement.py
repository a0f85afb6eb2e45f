"""Enforced rebalances: the control topics, request statuses and the control-log records.

The mechanism is described in docs/enforcing.md. Every sidecar of a group is a member of the
group subscribed only to the group's control topic; requests and their outcomes travel through
that topic as the JSON records defined here, so every sidecar sees every request and the one
that owns the control partition acts.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.errors import RebalancerError

# Group states in which a rebalance under way will still compute an assignment after a request
# that arrives now, so the request is served by it (KIP-568's "in progress"). A KIP-848 group
# that is Reconciling already has its target for the current epoch, computed before the request:
# only a new epoch serves it, so Reconciling is not among them.
SERVING_REBALANCE_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning"})

CONTROL_PREFIX = "__rebalancer."
FLIP_SUFFIX = ".flip"
MAX_TOPIC_LENGTH = 249
MAX_REQUEST_ID = 128
MAX_REASON = 512
RECORD_VERSION = 1
_TOPIC_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")


def control_topic(group_id: str) -> str:
    """`__rebalancer.<group-id>`, made a legal topic name and short enough for its flip twin.

    Group ids may hold ':' and '/', topic names may not; a digest keeps two such groups apart.
    """
    safe = _TOPIC_UNSAFE.sub("_", group_id)
    name = CONTROL_PREFIX + safe
    if safe != group_id or len(name) + len(FLIP_SUFFIX) > MAX_TOPIC_LENGTH:
        digest = hashlib.sha256(group_id.encode()).hexdigest()[:12]
        room = MAX_TOPIC_LENGTH - len(FLIP_SUFFIX) - len(CONTROL_PREFIX) - len(digest) - 1
        name = f"{CONTROL_PREFIX}{safe[:room]}.{digest}"
    return name


def flip_topic(group_id: str) -> str:
    """The second control topic the actor adds to and drops from its subscription."""
    return control_topic(group_id) + FLIP_SUFFIX


def actors_group(group_id: str) -> str:
    """The sidecars' own group, where the control partition's lease is held when they cannot be
    members of the application's group (a protocol librdkafka cannot offer: the VISIT lever)."""
    return control_topic(group_id) + ".actors"


def pattern_takes_control_topics(pattern: str, group_id: str) -> bool:
    """Whether an application's pattern subscription would also consume the control topics.

    Then the application's members would be assigned the sidecars' partitions and enforcement
    would move partitions between application members: the operator refuses to enforce.
    """
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False
    return any(
        compiled.match(topic) is not None
        for topic in (control_topic(group_id), flip_topic(group_id))
    )


class EnforceStatus(StrEnum):
    """Where one request stands; FINAL statuses never change again."""

    ACCEPTED = "accepted"
    ENFORCING = "enforcing"
    ENFORCED = "enforced"
    IN_PROGRESS = "in-progress"
    FAILED = "failed"
    EXPIRED = "expired"

    @property
    def final(self) -> bool:
        return self in (EnforceStatus.ENFORCED, EnforceStatus.FAILED, EnforceStatus.EXPIRED)


class RecordKind(StrEnum):
    REQUEST = "request"
    OUTCOME = "outcome"
    # An actor writes a claim when it takes the control partition and acts only once it has
    # read its own claim back: everything before it, earlier actors' outcomes included, is known.
    CLAIM = "claim"


@dataclass(frozen=True)
class EnforceRequest:
    request_id: str
    reason: str
    retry_when_stable: bool
    received_by: str
    at: float


@dataclass(frozen=True)
class EnforceOutcome:
    request_id: str
    status: EnforceStatus
    actor: str
    at: float
    message: str = ""
    # The generation the actor saw when it acted, and the first new one after it.
    from_generation: int | None = None
    generation: int | None = None
    will_retry: bool = False


@dataclass(frozen=True)
class ActorClaim:
    actor: str
    nonce: str
    at: float


ControlRecord = EnforceRequest | EnforceOutcome | ActorClaim


class RecordInvalid(RebalancerError, ValueError):
    """A control-log record this version cannot read; readers skip it."""


def encode_record(record: ControlRecord) -> bytes:
    body: dict[str, object]
    if isinstance(record, EnforceRequest):
        body = {
            "kind": RecordKind.REQUEST.value,
            "requestId": record.request_id,
            "reason": record.reason,
            "retryWhenStable": record.retry_when_stable,
            "receivedBy": record.received_by,
            "at": round(record.at, 3),
        }
    elif isinstance(record, EnforceOutcome):
        body = {
            "kind": RecordKind.OUTCOME.value,
            "requestId": record.request_id,
            "status": record.status.value,
            "actor": record.actor,
            "at": round(record.at, 3),
            "message": record.message,
            "fromGeneration": record.from_generation,
            "generation": record.generation,
            "willRetry": record.will_retry,
        }
    else:
        body = {
            "kind": RecordKind.CLAIM.value,
            "actor": record.actor,
            "nonce": record.nonce,
            "at": round(record.at, 3),
        }
    body["version"] = RECORD_VERSION
    return json.dumps(body, separators=(",", ":")).encode()


def _field(body: dict[str, object], key: str, kind: type) -> object:
    value = body.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RecordInvalid(f"field {key!r} is missing or not a {kind.__name__}")
    return value


def _optional_int(body: dict[str, object], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordInvalid(f"field {key!r} is not an integer")
    return value


def decode_record(raw: bytes | None) -> ControlRecord:
    if raw is None:
        raise RecordInvalid("empty record")
    try:
        body = json.loads(raw)
    except ValueError as error:
        raise RecordInvalid(f"not JSON: {error}") from None
    if not isinstance(body, dict):
        raise RecordInvalid("not a JSON object")
    at = body.get("at")
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise RecordInvalid("field 'at' is missing or not a number")
    kind = body.get("kind")
    if kind == RecordKind.REQUEST:
        return EnforceRequest(
            request_id=str(_field(body, "requestId", str)),
            reason=str(body.get("reason") or ""),
            retry_when_stable=bool(body.get("retryWhenStable")),
            received_by=str(body.get("receivedBy") or ""),
            at=float(at),
        )
    if kind == RecordKind.OUTCOME:
        try:
            status = EnforceStatus(str(_field(body, "status", str)))
        except ValueError:
            raise RecordInvalid(f"unknown status {body.get('status')!r}") from None
        return EnforceOutcome(
            request_id=str(_field(body, "requestId", str)),
            status=status,
            actor=str(body.get("actor") or ""),
            at=float(at),
            message=str(body.get("message") or ""),
            from_generation=_optional_int(body, "fromGeneration"),
            generation=_optional_int(body, "generation"),
            will_retry=bool(body.get("willRetry")),
        )
    if kind == RecordKind.CLAIM:
        return ActorClaim(
            actor=str(_field(body, "actor", str)),
            nonce=str(_field(body, "nonce", str)),
            at=float(at),
        )
    raise RecordInvalid(f"unknown record kind {kind!r}")
