"""confluent-kafka admin results read into the operator's own structs.

Works on attribute names, not confluent classes, so it stays testable with simple stand-ins.
A live group described without members (an answer cut short, for example by a missing ACL) is
"members not known", never "no members".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    BrokerProfile,
    ClusterView,
    CommittedOffsets,
    GroupProtocol,
    GroupState,
    TopicPartition,
)

_STATES = {
    "UNKNOWN": GroupState.UNKNOWN,
    "UNKOWN": GroupState.UNKNOWN,
    "PREPARING_REBALANCING": GroupState.PREPARING_REBALANCE,
    "PREPARING_REBALANCE": GroupState.PREPARING_REBALANCE,
    "COMPLETING_REBALANCING": GroupState.COMPLETING_REBALANCE,
    "COMPLETING_REBALANCE": GroupState.COMPLETING_REBALANCE,
    "STABLE": GroupState.STABLE,
    "DEAD": GroupState.DEAD,
    "EMPTY": GroupState.EMPTY,
    "ASSIGNING": GroupState.ASSIGNING,
    "RECONCILING": GroupState.RECONCILING,
}
_PROTOCOLS = {"CLASSIC": GroupProtocol.CLASSIC, "CONSUMER": GroupProtocol.CONSUMER}
# Kafka's own internal topics: never consumed by applications, so never part of a group's count.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value)).upper()


def read_state(value: Any) -> GroupState:
    return _STATES.get(_enum_name(value), GroupState.UNKNOWN)


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    parts: Iterable[Any] = getattr(assignment, "topic_partitions", None) or ()
    return tuple(sorted(TopicPartition(str(tp.topic), int(tp.partition)) for tp in parts))


def read_member(member: Any) -> BrokerMember:
    # Only ConsumerGroupDescribe (KIP-848 groups) has a target assignment; DescribeGroups has none.
    target = getattr(member, "target_assignment", None)
    return BrokerMember(
        member_id=str(member.member_id or ""),
        client_id=str(member.client_id or ""),
        host=str(member.host or "").lstrip("/"),
        instance_id=getattr(member, "group_instance_id", None) or None,
        partitions=_partitions(getattr(member, "assignment", None)),
        target_partitions=None if target is None else _partitions(target),
        joined_generation=_int_or_none(getattr(member, "subscribed_generation", None)),
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def read_group(description: Any) -> BrokerGroupView:
    state = read_state(getattr(description, "state", None))
    members = tuple(read_member(member) for member in description.members or ())
    members_known = bool(members) or state in (GroupState.EMPTY, GroupState.DEAD)
    protocol = _PROTOCOLS.get(_enum_name(getattr(description, "type", None)), GroupProtocol.UNKNOWN)
    # Classic: the protocol the leader's assignor chose; KIP-848: the broker's assignor (uniform).
    assignor = str(description.partition_assignor or "") or None
    coordinator = getattr(description, "coordinator", None)
    coordinator_id = getattr(coordinator, "id", None)
    return BrokerGroupView(
        group_id=str(description.group_id),
        state=state,
        protocol=protocol,
        assignor=assignor,
        members=tuple(sorted(members, key=lambda member: (member.host, member.member_id))),
        coordinator_id=int(coordinator_id) if coordinator_id is not None else None,
        members_known=members_known,
        group_epoch=_int_or_none(getattr(description, "group_epoch", None)),
    )


def read_cluster(result: Any) -> ClusterView:
    controller = getattr(result, "controller", None)
    controller_id = getattr(controller, "id", None)
    nodes = getattr(result, "nodes", None) or ()
    return ClusterView(
        cluster_id=getattr(result, "cluster_id", None) or None,
        broker_count=len(nodes),
        controller_id=int(controller_id)
        if controller_id is not None and controller_id >= 0
        else None,
    )


_BASE64_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def cluster_profile_hint(cluster_id: str | None) -> BrokerProfile | None:
    """Guess the broker implementation from its cluster id (all ids below are defaults)."""
    if not cluster_id:
        return None
    if cluster_id.startswith("redpanda."):
        return BrokerProfile.REDPANDA
    if _BASE64_UUID.match(cluster_id):
        return BrokerProfile.APACHE_KAFKA
    return None


def read_offsets(group_id: str, result: Any) -> CommittedOffsets:
    offsets: dict[TopicPartition, int] = {}
    for tp in getattr(result, "topic_partitions", None) or ():
        # Partitions without a commit come back as OFFSET_INVALID (-1001); per-partition errors
        # leave that partition out rather than failing the whole answer.
        if getattr(tp, "error", None) is None and int(tp.offset) >= 0:
            offsets[TopicPartition(str(tp.topic), int(tp.partition))] = int(tp.offset)
    return CommittedOffsets.of(group_id, offsets)


def read_topics(metadata: Any) -> dict[str, int]:
    topics: dict[str, int] = {}
    for name, topic in (getattr(metadata, "topics", None) or {}).items():
        # A topic being created reports an error and no partitions yet: not there for us.
        if name in INTERNAL_TOPICS or not topic.partitions:
            continue
        topics[str(name)] = len(topic.partitions)
    return dict(sorted(topics.items()))


def read_request_totals(statistics: str) -> dict[tuple[str, str], int]:
    """Requests a librdkafka client has sent since it was made, by (client name, request kind),
    summed over its brokers, from its statistics JSON (statistics.interval.ms, stats_cb: each
    broker's "req" object counts requests by Kafka API name)."""
    try:
        parsed = json.loads(statistics)
    except json.JSONDecodeError as error:
        raise ValueError(f"librdkafka statistics are not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise ValueError("librdkafka statistics are not a JSON object")
    client = str(parsed.get("name") or "")
    totals: dict[tuple[str, str], int] = {}
    for broker in (parsed.get("brokers") or {}).values():
        requests = broker.get("req") if isinstance(broker, dict) else None
        for kind, count in (requests or {}).items():
            if isinstance(count, int) and count > 0:
                totals[(client, str(kind))] = totals.get((client, str(kind)), 0) + count
    return totals


@dataclass
class RequestTally:
    """Turns librdkafka's running totals into requests sent since the last report. A client
    replaced by a new one (another name) starts from zero; a total that went down (a broker
    entry dropped from the statistics) counts from its new value."""

    seen: dict[tuple[str, str], int] = field(default_factory=dict)

    def since_last(self, totals: Mapping[tuple[str, str], int]) -> dict[str, int]:
        sent: dict[str, int] = {}
        for key, total in totals.items():
            before = self.seen.get(key, 0)
            delta = total - before if total >= before else total
            self.seen[key] = total
            if delta > 0:
                sent[key[1]] = sent.get(key[1], 0) + delta
        return sent
