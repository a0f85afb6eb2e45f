"""A stopping sidecar leaves the group at once, as any consumer closes.

A pod's application member and sidecar get SIGTERM together and both leave; Apache Kafka's
coordinator picks a new leader among the members that rejoined when the leader leaves during a
rebalance, so nothing is gained by staying (docs/enforcing.md, "Taking the sidecar out").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from rebalancer.sidecar import membership
from rebalancer.sidecar.membership import GroupMember
from rebalancer.sidecar.settings import load_settings

BASE = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "KAFKA_GROUP_ID": "orders",
    "REBALANCER_SIDECAR_TOKEN_FILE": "/var/run/token",
    "POD_NAME": "orders-0",
}


class FakeConsumer:
    """Enough of confluent_kafka.Consumer for GroupMember: the test says when the group forms."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.generation = -1
        self.on_assign: Any = None
        self.pending: list[int] = []
        self.closed_at: float | None = None

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.on_assign = callbacks["on_assign"]

    def poll(self, timeout: float) -> None:
        time.sleep(0.02)
        if self.pending:
            self.generation = self.pending.pop(0)
            self.on_assign(self, [])

    def incremental_assign(self, partitions: list[Any]) -> None:
        pass

    def memberid(self) -> str:
        return "orders-0-sidecar-1"

    def consumer_group_metadata(self) -> int:
        return self.generation

    def close(self) -> None:
        self.closed_at = time.monotonic()


@pytest.fixture
def joined(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[GroupMember, FakeConsumer]]:
    monkeypatch.setattr(membership, "Consumer", FakeConsumer)
    monkeypatch.setattr(
        membership, "parse_group_metadata", lambda number: SimpleNamespace(generation=number)
    )
    member = GroupMember(
        {"group.id": "orders", "partition.assignment.strategy": "cooperative-sticky"},
        "__rebalancer.orders",
        "__rebalancer.orders.flip",
    )
    member.start()
    consumer = member._consumer
    consumer.pending.append(3)
    deadline = time.monotonic() + 5
    while member.view().generation != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert member.view().generation == 3
    yield member, consumer
    member.stop(timeout=2)


def test_a_stopping_member_leaves_at_once(
    joined: tuple[GroupMember, FakeConsumer], caplog: pytest.LogCaptureFixture
) -> None:
    member, consumer = joined
    asked = time.monotonic()
    with caplog.at_level(logging.INFO, logger=membership.__name__):
        member.stop()
    assert consumer.closed_at is not None and consumer.closed_at - asked < 0.5
    assert "left the group (generation 3)" in caplog.text


def test_the_variables_of_the_former_leave_wait_are_not_read() -> None:
    # Pods rendered before may still carry them; they must not fail the sidecar's start.
    env = {**BASE, "REBALANCER_SIDECAR_LEAVE_WAIT_S": "soon", "REBALANCER_SIDECAR_GRACE_S": "-1"}
    assert load_settings(env=env) == load_settings(env=BASE)
