"""Which lever the sidecar pulls for a group, from what the broker says of the group.

A classic group's members must all offer one protocol name (the assignor's), and every client
names its own: librdkafka and the Java client `range`, `roundrobin`, `cooperative-sticky`, kafkajs
`RoundRobinAssigner`, an application its own assignor's name. A member offering another name is
refused with INCONSISTENT_GROUP_PROTOCOL, so the sidecar reads the group's protocol first
(DescribeGroups) and picks (docs/enforcing.md, "Client libraries"):

- REJOIN: the protocol is one librdkafka offers; the sidecar's librdkafka member stays in the group
  and rejoins with changed subscription metadata (the lever for every librdkafka and Java fleet).
- SUBSCRIPTION: a KIP-848 group; the member changes its subscription (no JoinGroup there).
- VISIT: any other classic consumer protocol. The sidecar cannot stay a member: assignors such as
  kafkajs' spread every partition of the leader's topics over every member, whatever each
  subscribed to (measured: a member subscribed only to the control topics got 2 of 6 application
  partitions). It joins offering the group's own protocol, which starts the rebalance, and leaves
  before the join completes, so the group forms without it: one generation, nothing held.
- WAIT: the group has no members and the application's settings name no strategy. Joining then
  would fix the group's protocol to librdkafka's default and lock out a fleet whose client names
  its protocol otherwise; the sidecar waits for the group to form.
- UNSUPPORTED: a protocol type other than `consumer` (Kafka Connect's `connect`, ...), a group
  kind the sidecar cannot join, or a classic Kafka Streams application (protocol name `stream`,
  StreamsPartitionAssignor). Never a visit there: the Streams leader decodes every member's
  subscription user data before its error handling, so a visitor still in the group when the
  leader assigns fails the leader's stream thread, and under the default uncaught-exception
  handler takes the whole client to ERROR. No other lever is safe: a librdkafka member cannot
  offer `stream` (its metadata would be just as undecodable), and an empty protocol name is no
  consumer group's. Streams groups (KIP-1071, `group.protocol=streams`) have no JoinGroup at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The protocol names librdkafka's partition.assignment.strategy can offer.
LIBRDKAFKA_PROTOCOLS = frozenset({"range", "roundrobin", "cooperative-sticky"})
CONSUMER_PROTOCOL_TYPE = "consumer"
# The protocol name of Kafka Streams' StreamsPartitionAssignor on the classic protocol.
STREAMS_PROTOCOL_NAME = "stream"
# group.protocol of a KIP-1071 streams application, as the sidecar may read it from its settings.
STREAMS_GROUP_PROTOCOL = "streams"

KAFKA_STREAMS_REFUSAL = (
    "a classic Kafka Streams group (protocol {name!r}, StreamsPartitionAssignor): enforced "
    "rebalances need a member the Streams leader can decode, and the sidecar's visit would put "
    "a foreign member in the group, whose subscription the leader fails on (the stream thread "
    "dies and, with the default uncaught-exception handler, the client goes to ERROR); the "
    "sidecar refuses rather than risk the application. Fix: remove spec.policy.enforce from its "
    "ConsumerGroup (Kafka Streams rebalances on its own when instances come and go)"
)
STREAMS_GROUP_REFUSAL = (
    "a streams group (KIP-1071, group.protocol=streams): the sidecar cannot join it, so it "
    "cannot enforce rebalances of this group. Fix: remove spec.policy.enforce from its "
    "ConsumerGroup; its per-group delay is spec.policy.groupConfigs.streams"
)


class Lever(StrEnum):
    REJOIN = "rejoin"
    SUBSCRIPTION = "subscription"
    VISIT = "visit"
    WAIT = "wait"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class GroupFacts:
    """What the broker said of the group (all None when it does not exist yet)."""

    # "classic", "consumer" (KIP-848) or "unknown"; None when the group has no members.
    kind: str | None = None
    has_members: bool = False
    # The classic protocol type ("consumer" for consumer groups) and the chosen protocol name.
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class LeverChoice:
    lever: Lever
    # REJOIN: the partition.assignment.strategy to use (None: the application's own).
    strategy: str | None = None
    # VISIT: the protocol name to offer.
    protocol_name: str | None = None
    # Why, in words for the log and for GET /v1/group; for UNSUPPORTED, what to do.
    reason: str = ""


def _offers(strategy: str | None, name: str) -> bool:
    return name in {part.strip() for part in (strategy or "").split(",")}


def choose_lever(
    facts: GroupFacts, *, configured_strategy: str | None, configured_protocol: str | None
) -> LeverChoice:
    # Before anything else: no lever of a Streams application may put a member in its group.
    if STREAMS_GROUP_PROTOCOL in (configured_protocol, facts.kind):
        return LeverChoice(Lever.UNSUPPORTED, reason=STREAMS_GROUP_REFUSAL)
    if facts.protocol_name == STREAMS_PROTOCOL_NAME:
        return LeverChoice(
            Lever.UNSUPPORTED, reason=KAFKA_STREAMS_REFUSAL.format(name=facts.protocol_name)
        )
    if configured_protocol == "consumer" or (facts.has_members and facts.kind == "consumer"):
        return LeverChoice(Lever.SUBSCRIPTION, reason="a KIP-848 group: a subscription change")
    # A group that is forming has members but no protocol yet: as good as empty.
    forming = facts.kind in ("classic", "unknown", None) and not facts.protocol_name
    if not facts.has_members or forming:
        if configured_strategy or configured_protocol:
            return LeverChoice(
                Lever.REJOIN, reason="the group has no members; joining with the application's"
            )
        return LeverChoice(
            Lever.WAIT,
            reason="the group has no members or no protocol yet and "
            "KAFKA_PARTITION_ASSIGNMENT_STRATEGY is unset: waiting for the application to form "
            "it, to join with its protocol",
        )
    # "unknown": a broker that does not tell the kind; DescribeGroups' protocol type decides.
    if facts.kind not in ("classic", "unknown", None):
        return LeverChoice(
            Lever.UNSUPPORTED,
            reason=f"group kind {facts.kind!r} is neither a classic nor a KIP-848 consumer "
            "group: the sidecar cannot join it, so it cannot enforce rebalances of this group; "
            "remove spec.policy.enforce from its ConsumerGroup",
        )
    name = facts.protocol_name or ""
    if facts.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return LeverChoice(
            Lever.UNSUPPORTED,
            reason=f"protocol type {facts.protocol_type!r} (protocol {name!r}) is not a "
            "consumer group's: the sidecar joins consumer groups only (their subscription "
            "metadata is what it can write); remove spec.policy.enforce from its ConsumerGroup",
        )
    if name in LIBRDKAFKA_PROTOCOLS:
        strategy = None if _offers(configured_strategy, name) else name
        return LeverChoice(
            Lever.REJOIN, strategy=strategy, reason=f"protocol {name!r}: a rejoin as a member"
        )
    return LeverChoice(
        Lever.VISIT,
        protocol_name=name,
        reason=f"protocol {name!r} is not librdkafka's: a join with it, left before it completes",
    )
