"""A group's generation from its broker's own describe, for groups whose members send no
reports: a KIP-848 group's epoch, a classic group's from its members' subscriptions (KIP-792),
and the rebalances counted from it however short they were."""

from __future__ import annotations

from rebalancer.planning.observing import broker_generation, combine_observation
from rebalancer.planning.rebalances import EventContext, GroupTracking, detect_rebalances
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)
from rebalancer.structs.snapshots import GroupSnapshot, Source

CONTEXT = EventContext("default", "counts", "counts", "k:9092")


def member(name: str, joined_from: int | None) -> BrokerMember:
    owned = (TopicPartition("words", int(name[-1])),)
    return BrokerMember(f"{name}-id", name, f"/10.0.0.{name[-1]}", name, owned, None, joined_from)


def classic(state: GroupState, *joined_from: int | None) -> BrokerGroupView:
    members = tuple(member(f"app-{n}", g) for n, g in enumerate(joined_from))
    return BrokerGroupView("counts", state, GroupProtocol.CLASSIC, "stream", members, 1, True)


def look(view: BrokerGroupView, at: float) -> GroupSnapshot:
    return combine_observation(view, [], 4, at)


def test_a_classic_group_is_one_past_the_generation_its_members_joined_from() -> None:
    # Two members were in generation 6 and rejoined; the third joined afresh.
    assert broker_generation(classic(GroupState.STABLE, 6, -1, 6)) == 7
    assert broker_generation(classic(GroupState.COMPLETING_REBALANCE, 6, 6)) == 7
    # Mid-join some members still name the generation before: not known yet.
    assert broker_generation(classic(GroupState.PREPARING_REBALANCE, 7, 6)) is None
    # Every member joined afresh, or the client does not say: nothing names it.
    assert broker_generation(classic(GroupState.STABLE, -1, -1)) is None
    assert broker_generation(classic(GroupState.STABLE, None, None)) is None


def test_a_kip_848_group_is_its_epoch() -> None:
    view = BrokerGroupView(
        "g", GroupState.STABLE, GroupProtocol.CONSUMER, "uniform", (), 1, True, 9
    )
    snapshot = look(view, 1.0)
    assert (snapshot.generation, snapshot.sources["generation"]) == (9, Source.BROKER)


def test_each_classic_generation_between_two_looks_is_one_rebalance() -> None:
    tracking = GroupTracking(since=0.0)
    events, tracking = detect_rebalances(
        tracking, look(classic(GroupState.STABLE, 2, 2), 1), [], CONTEXT
    )
    assert events == [] and tracking.generation == 3  # the first look: the baseline
    # Two short rebalances between looks, the group Stable at both: the broker state never
    # showed them, the generation does.
    later = look(classic(GroupState.STABLE, 4, 4, -1), 11)
    events, tracking = detect_rebalances(tracking, later, [], CONTEXT)
    assert [(e.previous_generation, e.generation, e.source) for e in events] == [
        (3, 4, "broker"),
        (4, 5, "broker"),
    ]
    assert events[0].joined == ("app-2",) and events[1].joined == ()
    assert tracking.rebalances == 2 and tracking.generation == 5
    # The same generation again: no rebalance, even through a state the broker showed.
    events, tracking = detect_rebalances(
        tracking, look(classic(GroupState.STABLE, 4, 4, -1), 21), [], CONTEXT
    )
    assert events == [] and tracking.rebalances == 2


def test_a_rebalance_seen_while_the_generation_was_unknown_is_not_counted_twice() -> None:
    tracking = GroupTracking(since=0.0)
    _, tracking = detect_rebalances(
        tracking, look(classic(GroupState.STABLE, 2, 2), 1), [], CONTEXT
    )
    moving = look(classic(GroupState.PREPARING_REBALANCE, 3, 2), 3)
    events, tracking = detect_rebalances(tracking, moving, [], CONTEXT)
    assert events == [] and tracking.suspected is not None
    done = look(classic(GroupState.STABLE, 3, 3), 20)
    events, tracking = detect_rebalances(tracking, done, [], CONTEXT)
    # The rise 3 -> 4 is that rebalance: counted once, from the generation.
    assert [(e.previous_generation, e.generation) for e in events] == [(3, 4)]
    assert tracking.suspected is None and tracking.rebalances == 1
