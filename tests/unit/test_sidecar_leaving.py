"""When a stopping sidecar leaves the group: after the group formed again, or at its deadline.

A pod's application member and sidecar get SIGTERM together; so that the sidecar's leave does
not fall into the rebalance its application member's leave started (docs/enforcing.md, "Taking
the sidecar out"), the sidecar leaves only once the group has formed a generation after its stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from rebalancer.sidecar import membership
from rebalancer.sidecar.membership import GroupMember, LeavePlan
from rebalancer.sidecar.settings import MAX_LEAVE_WAIT_SECONDS, default_leave_wait, load_settings
from rebalancer.structs.kafka_properties import SettingsError

BASE = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "KAFKA_GROUP_ID": "orders",
    "KAFKA_SESSION_TIMEOUT_MS": "6000",
    "KAFKA_HEARTBEAT_INTERVAL_MS": "2000",
    "REBALANCER_SIDECAR_TOKEN_FILE": "/var/run/token",
    "POD_NAME": "orders-0",
}


@pytest.mark.parametrize(
    ("assigned", "now", "due"),
    [
        (7, 100.0, False),  # still the generation of the stop, well before the deadline
        (8, 100.0, True),  # the group formed again after the stop
        (7, 108.0, True),  # the deadline
        (-1, 107.9, False),
    ],
)
def test_a_plan_is_due_at_a_newer_assignment_or_at_its_deadline(
    assigned: int, now: float, due: bool
) -> None:
    assert LeavePlan(generation=7, deadline=108.0).due(assigned, now) is due


def test_a_member_not_in_the_group_yet_has_nothing_to_wait_for() -> None:
    assert LeavePlan(generation=-1, deadline=10.0).waits is False
    assert LeavePlan(generation=0, deadline=10.0).waits is True


def test_the_default_wait_is_a_session_and_a_heartbeat_within_the_grace_period() -> None:
    assert load_settings(env=BASE).leave_wait_seconds == 8.0
    # librdkafka's defaults (45 s session, 3 s heartbeat) would outlast a 30 s grace period.
    assert default_leave_wait({}) == MAX_LEAVE_WAIT_SECONDS == 20.0
    assert default_leave_wait({"session.timeout.ms": "nonsense"}) == MAX_LEAVE_WAIT_SECONDS


def test_nothing_to_wait_for_when_the_sidecar_sends_no_leave_or_no_leader_can_stall() -> None:
    static = load_settings(env={**BASE, "KAFKA_GROUP_INSTANCE_ID": "orders-0"})
    assert static.leave_wait_seconds == 0.0
    kip_848 = load_settings(env={**BASE, "KAFKA_GROUP_PROTOCOL": "consumer"})
    assert kip_848.leave_wait_seconds == 0.0


def test_the_wait_can_be_set_and_must_be_a_number_of_seconds() -> None:
    env = {**BASE, "REBALANCER_SIDECAR_LEAVE_WAIT_S": "3.5"}
    assert load_settings(env=env).leave_wait_seconds == 3.5
    none = load_settings(env={**BASE, "REBALANCER_SIDECAR_LEAVE_WAIT_S": "0"})
    assert none.leave_wait_seconds == 0
    with pytest.raises(SettingsError, match="leave wait"):
        load_settings(env={**BASE, "REBALANCER_SIDECAR_LEAVE_WAIT_S": "-1"})
    with pytest.raises(SettingsError, match="leave wait"):
        load_settings(env={**BASE, "REBALANCER_SIDECAR_LEAVE_WAIT_S": "soon"})


class FakeConsumer:
    """Enough of confluent_kafka.Consumer for GroupMember: the test says when the group forms."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.generation = -1
        self.on_assign: Any = None
        self.pending: list[int] = []
        self.closed_at: float | None = None
        self.assigned_at: dict[int, float] = {}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.on_assign = callbacks["on_assign"]

    def poll(self, timeout: float) -> None:
        time.sleep(0.02)
        if self.pending:
            self.generation = self.pending.pop(0)
            self.on_assign(self, [])
            self.assigned_at[self.generation] = time.monotonic()

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


def test_a_stopping_member_leaves_once_the_group_formed_again(
    joined: tuple[GroupMember, FakeConsumer],
) -> None:
    member, consumer = joined
    stopper = threading.Thread(target=member.stop, kwargs={"leave_wait": 10.0})
    asked = time.monotonic()
    stopper.start()
    time.sleep(0.3)
    assert consumer.closed_at is None, "left before the group formed again"
    consumer.pending.append(4)  # the application member's leave, absorbed
    stopper.join(5)
    assert consumer.closed_at is not None
    assert consumer.closed_at >= consumer.assigned_at[4]
    assert consumer.closed_at - asked < 2.0, "waited for the deadline instead"


def test_a_stopping_member_leaves_at_the_deadline_when_nothing_rebalances(
    joined: tuple[GroupMember, FakeConsumer],
) -> None:
    member, consumer = joined
    asked = time.monotonic()
    member.stop(leave_wait=0.5)
    assert consumer.closed_at is not None
    assert 0.5 <= consumer.closed_at - asked < 2.0


def test_without_a_wait_a_stopping_member_leaves_at_once(
    joined: tuple[GroupMember, FakeConsumer],
) -> None:
    member, consumer = joined
    asked = time.monotonic()
    member.stop()
    assert consumer.closed_at is not None and consumer.closed_at - asked < 0.5
