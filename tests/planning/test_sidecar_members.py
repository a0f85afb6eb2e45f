"""Sidecars are members on the broker but not the application's: the snapshot leaves them out."""

from __future__ import annotations

from rebalancer.planning.observing import combine_observation
from rebalancer.structs.brokers import (
    BrokerGroupView,
    BrokerMember,
    GroupProtocol,
    GroupState,
    TopicPartition,
)


def member(name: str, *partitions: TopicPartition) -> BrokerMember:
    return BrokerMember(f"{name}-id", name, f"/10.0.0.{len(name)}", None, partitions)


def test_sidecars_listed_by_the_broker_are_not_counted_as_members() -> None:
    members = (
        member("orders-0", TopicPartition("orders", 0), TopicPartition("orders", 1)),
        member("orders-1", TopicPartition("orders", 2), TopicPartition("orders", 3)),
        member("orders-0-sidecar", TopicPartition("__rebalancer.orders", 0)),
        member("orders-1-sidecar", TopicPartition("__rebalancer.orders.flip", 0)),
    )
    view = BrokerGroupView(
        "orders", GroupState.STABLE, GroupProtocol.CLASSIC, "cooperative-sticky", members, 1, True
    )
    snapshot = combine_observation(view, [], 4, now=1.0)
    assert snapshot.members == 2
    assert sorted(m.member_id for m in snapshot.member_details) == ["orders-0-id", "orders-1-id"]
    assert snapshot.assigned_partitions == 4
    assert snapshot.settled
