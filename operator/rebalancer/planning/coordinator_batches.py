"""Which groups share a request: the groups of one batch window split by coordinator.

Reading a group costs a request to its coordinator, and every request of the group reads
(DescribeGroups, ConsumerGroupDescribe, OffsetFetch v8+) takes a list of groups, so one batch
costs each coordinator one request per kind, plus one FindCoordinator (v4+, a list of keys) for
the groups whose coordinator is not known yet. A coordinator stays known until an answer says
the group moved or its coordinator is not ready (COORDINATOR_GONE); the next batch looks it up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Kafka's error codes the group reads may answer, by name (the names librdkafka and the
# gateway's messages use).
ERROR_NAMES: Mapping[int, str] = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    24: "INVALID_GROUP_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
    88: "UNSTABLE_OFFSET_COMMIT",
}
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
GROUP_ID_NOT_FOUND = 69
UNSUPPORTED_VERSION = 35
# Answers after which the group's coordinator must be looked up again.
COORDINATOR_GONE = frozenset(
    {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
)
# ConsumerGroupDescribe answers that mean "not a KIP-848 group here": a classic group, no group
# at all, or a coordinator that does not serve the API. DescribeGroups tells the rest, as
# librdkafka does (rd_kafka_admin_describe_consumer_group_do_fallback_to_classic).
CLASSIC_FALLBACK = frozenset({GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION})
# Answers that change by themselves: the coordinator loads, moves or is elected.
PASSING = COORDINATOR_GONE


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error code {code}")


@dataclass(frozen=True)
class CoordinatorBatches:
    """A batch's groups: those whose coordinator must be looked up first, and the others by
    coordinator node, in the order they were asked for."""

    lookups: tuple[str, ...]
    by_node: Mapping[int, tuple[str, ...]]


def batch_by_coordinator(group_ids: Iterable[str], known: Mapping[str, int]) -> CoordinatorBatches:
    lookups: list[str] = []
    by_node: dict[int, list[str]] = {}
    for group_id in dict.fromkeys(group_ids):
        node = known.get(group_id)
        if node is None:
            lookups.append(group_id)
        else:
            by_node.setdefault(node, []).append(group_id)
    return CoordinatorBatches(
        tuple(lookups), {node: tuple(groups) for node, groups in sorted(by_node.items())}
    )


def remembered(known: Mapping[str, int], answers: Mapping[str, int | None]) -> dict[str, int]:
    """The coordinators known after a round of answers: each group's node when the answer named
    one, forgotten when it said None (the coordinator moved, loads, or could not be reached)."""
    after = dict(known)
    for group_id, node in answers.items():
        if node is None:
            after.pop(group_id, None)
        else:
            after[group_id] = node
    return after
