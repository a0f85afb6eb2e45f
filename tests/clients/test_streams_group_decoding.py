"""StreamsGroupDescribe answers decoded by clients/streams_groups.py: nullable structs, the
unsigned port, and per-group errors, without a broker (the live shape is in
tests/clients/kafka/test_streams_groups.py)."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.clients.streams_groups import (
    GROUP_ID_NOT_FOUND,
    StreamsGroupDescribeResponseV0,
    StreamsGroupUnreadable,
    read_described_group,
)


def assignment(active: list[int], warmup: list[int] = []) -> tuple[Any, ...]:  # noqa: B006
    warm = [("0", warmup, {})] if warmup else []
    return ([("0", active, {})], [], warm, {})


def member(member_id: str, endpoint: tuple[Any, ...] | None, target: list[int]) -> tuple[Any, ...]:
    return (
        member_id,
        7,
        None,  # instance id: dynamic membership
        None,
        f"{member_id}-client",
        "/10.0.0.1",
        1,
        f"{member_id}-process",
        endpoint,
        [("zone", "a", {})],
        [("0", 0, 42, {})],
        [("0", 0, 50, {})],
        assignment([0, 1]),
        assignment(target, warmup=[2]),
        False,
        {},
    )


def encoded_answer(groups: list[tuple[Any, ...]]) -> bytes:
    data: bytes = StreamsGroupDescribeResponseV0.SCHEMA.encode((0, groups, {}))
    return data


def group(members: list[tuple[Any, ...]], topology: tuple[Any, ...] | None) -> tuple[Any, ...]:
    return (0, None, "orders-app", "Reconciling", 8, 8, topology, members, -2147483648, {})


def test_a_described_group_reads_back_with_its_tasks_and_topology() -> None:
    topology = (
        1,
        [("0", ["orders"], [], [("orders-app-store-changelog", 0, 0, [], {})], [], {})],
        {},
    )
    raw = encoded_answer(
        [group([member("m1", ("m1.local", 65000, {}), [0, 1]), member("m2", None, [3])], topology)]
    )
    answer = StreamsGroupDescribeResponseV0.decode(raw)
    view = read_described_group(answer.groups[0])
    assert (view.group_id, view.state, view.group_epoch) == ("orders-app", "Reconciling", 8)
    assert view.topology is not None
    assert view.topology[0].source_topics == ("orders",)
    assert view.topology[0].changelog_topics == ("orders-app-store-changelog",)
    first, second = view.members
    assert first.assignment.tasks("active") == {("0", 0), ("0", 1)}
    assert first.target.tasks("warmup") == {("0", 2)}
    assert first.reconciling  # its target adds a warm-up task it does not hold yet
    assert second.target.tasks("active") == {("0", 3)} and second.reconciling
    assert not view.settled


def test_a_group_without_a_topology_yet_reads_as_none() -> None:
    answer = StreamsGroupDescribeResponseV0.decode(encoded_answer([group([], None)]))
    view = read_described_group(answer.groups[0])
    assert view.topology is None and view.members == ()


def test_a_per_group_error_names_the_group_and_the_code() -> None:
    failed = (30, "denied", "orders-app", "", -1, -1, None, [], -2147483648, {})
    answer = StreamsGroupDescribeResponseV0.decode(encoded_answer([failed]))
    with pytest.raises(
        StreamsGroupUnreadable, match=r"'orders-app'.*GROUP_AUTHORIZATION_FAILED"
    ) as refused:
        read_described_group(answer.groups[0])
    assert not refused.value.retriable  # only an ACL helps
    moving = (16, None, "orders-app", "", -1, -1, None, [], -2147483648, {})
    answer = StreamsGroupDescribeResponseV0.decode(encoded_answer([moving]))
    with pytest.raises(StreamsGroupUnreadable, match="NOT_COORDINATOR") as moved:
        read_described_group(answer.groups[0])
    assert moved.value.retriable  # the coordinator moved: asking again finds it
    assert (refused.value.code, moved.value.code) == (30, 16)


def test_no_streams_group_of_the_id_is_told_by_its_code() -> None:
    """What a declared streams group's first look tells from a refusal: none of that id yet,
    or a classic or KIP-848 group (clients.streams_groups.describe_streams_group)."""
    other = (69, "Group orders-app is not a streams group.", "orders-app", "", -1, -1, None, [],
             -2147483648, {})  # fmt: skip
    answer = StreamsGroupDescribeResponseV0.decode(encoded_answer([other]))
    with pytest.raises(StreamsGroupUnreadable, match="GROUP_ID_NOT_FOUND") as missing:
        read_described_group(answer.groups[0])
    assert missing.value.code == GROUP_ID_NOT_FOUND and not missing.value.retriable
