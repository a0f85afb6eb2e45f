"""A classic Kafka Streams group rebalancing on its own (KIP-441 probing, cooperative follow-ups)
gets its own cause in the history, not an unexplained one (planning/rebalances.py)."""

from __future__ import annotations

import pytest

from rebalancer.planning.observing import combine_observation
from rebalancer.planning.rebalances import (
    EventContext,
    GroupTracking,
    detect_rebalances,
    explained_cause,
)
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.history import RebalanceCause, RebalanceEvent

CONTEXT = EventContext("apps", "uppercase", "uppercase", "k:9092")


def member(host: str, partition: int) -> BrokerMember:
    return BrokerMember(f"{host}-id", host, host, None, (TopicPartition("words", partition),))


def view(state: GroupState, assignor: str, hosts: tuple[str, ...]) -> BrokerGroupView:
    members = tuple(member(host, index) for index, host in enumerate(hosts))
    return BrokerGroupView("uppercase", state, GroupProtocol.CLASSIC, assignor, members, 1, True)


def rebalance_seen_by_polling(
    assignor: str, before: tuple[str, ...], during: tuple[str, ...]
) -> list[RebalanceEvent]:
    """Stable, then rebalancing, then Stable again, with no member reports (Streams sends none)."""
    tracking = GroupTracking(since=0.0)
    events: list[RebalanceEvent] = []
    looks = ((GroupState.STABLE, before, 1.0), (GroupState.PREPARING_REBALANCE, during, 2.0))
    looks += ((GroupState.STABLE, during, 9.0),)
    for state, hosts, at in looks:
        snapshot = combine_observation(view(state, assignor, hosts), [], 2, at)
        found, tracking = detect_rebalances(tracking, snapshot, [], CONTEXT)
        events.extend(found)
    return events


def test_a_streams_rebalance_with_the_same_members_is_a_follow_up() -> None:
    events = rebalance_seen_by_polling("stream", ("a", "b"), ("a", "b"))
    assert [(event.cause, event.joined, event.left) for event in events] == [
        (RebalanceCause.STREAMS_FOLLOW_UP, (), ())
    ]


def test_the_same_rebalance_of_another_assignor_stays_a_state_change() -> None:
    events = rebalance_seen_by_polling("range", ("a", "b"), ("a", "b"))
    assert [event.cause for event in events] == [RebalanceCause.STATE_CHANGE]


def test_a_streams_rebalance_with_a_member_joining_is_that_join() -> None:
    events = rebalance_seen_by_polling("stream", ("a",), ("a", "b"))
    assert [(event.cause, event.joined) for event in events] == [
        (RebalanceCause.STATE_CHANGE, ("b",))
    ]
    assert events[0].cause is not RebalanceCause.STREAMS_FOLLOW_UP


@pytest.mark.parametrize(
    ("cause", "assignor", "joined", "left", "expected"),
    [
        (RebalanceCause.REJOIN, "stream", (), (), RebalanceCause.STREAMS_FOLLOW_UP),
        (RebalanceCause.STATE_CHANGE, "stream", (), (), RebalanceCause.STREAMS_FOLLOW_UP),
        (RebalanceCause.REJOIN, "cooperative-sticky", (), (), RebalanceCause.REJOIN),
        (RebalanceCause.REJOIN, None, (), (), RebalanceCause.REJOIN),
        (RebalanceCause.MEMBER_LEFT, "stream", (), ("b",), RebalanceCause.MEMBER_LEFT),
        (RebalanceCause.STATE_CHANGE, "stream", (), ("b",), RebalanceCause.STATE_CHANGE),
        (RebalanceCause.ENFORCED, "stream", (), (), RebalanceCause.ENFORCED),
    ],
)
def test_only_a_streams_rebalance_without_joins_or_leaves_is_relabelled(
    cause: RebalanceCause,
    assignor: str | None,
    joined: tuple[str, ...],
    left: tuple[str, ...],
    expected: RebalanceCause,
) -> None:
    assert explained_cause(cause, assignor, joined, left) is expected
