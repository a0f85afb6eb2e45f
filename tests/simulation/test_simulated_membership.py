"""Sessions, clean leaves and static membership (KIP-345) on Apache Kafka's coordinator."""

from __future__ import annotations

import pytest

from rebalancer.simulation import (
    ConsumerSettings,
    Departure,
    DepartureKind,
    MemberPlan,
    Scenario,
    plan_members,
    simulate,
)

SESSION_MS = 10_000.0
CONSUMER = ConsumerSettings(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=3_000.0)
STOP_MS = 30_000.0


def group_where_one_member(departure: Departure, *, static: bool, members: int = 3) -> Scenario:
    plans = list(plan_members(members, static=static, consumer=CONSUMER))
    plans[1] = MemberPlan(
        name=plans[1].name,
        instance_id=plans[1].instance_id,
        consumer=CONSUMER,
        departures=(departure,),
    )
    return Scenario(members=tuple(plans))


@pytest.mark.parametrize(
    ("restart_after_ms", "causes"),
    [
        (1_000.0, ("initial-join",)),
        (5_000.0, ("initial-join",)),
        # The group was Stable at 6.2 s and heartbeats every 3 s: the last one before the stop
        # at 30 s went out at 27.2 s, so the session ends at 37.2 s, not 40 s.
        (6_000.0, ("initial-join",)),
        (9_000.0, ("initial-join", "session-expiry")),  # back during that rebalance
        (15_000.0, ("initial-join", "session-expiry", "member-join")),
        (60_000.0, ("initial-join", "session-expiry", "member-join")),
    ],
)
def test_a_static_member_restarting_within_its_session_causes_no_rebalance(
    restart_after_ms: float, causes: tuple[str, ...]
) -> None:
    for kind in ("leave", "crash"):  # static members send no LeaveGroup either way
        departure = Departure(STOP_MS, kind, restart_after_ms=restart_after_ms)
        result = simulate(group_where_one_member(departure, static=True))
        assert tuple(rebalance.cause for rebalance in result.rebalances) == causes


def test_a_static_member_resumes_its_own_partitions() -> None:
    departure = Departure(STOP_MS, "crash", restart_after_ms=5_000.0)
    result = simulate(group_where_one_member(departure, static=True))
    assert sum(result.revocations.values()) == 0
    # Only its own 4 partitions stopped, for the gap plus the rejoin.
    startup = 12 * 6.2
    assert result.stop_the_world_partition_s == pytest.approx(startup + 4 * 5.2)


@pytest.mark.parametrize("restart_after_ms", [500.0, 5_000.0])
def test_a_dynamic_member_restart_always_rebalances(restart_after_ms: float) -> None:
    departure = Departure(STOP_MS, "leave", restart_after_ms=restart_after_ms)
    result = simulate(group_where_one_member(departure, static=False))
    assert [rebalance.cause for rebalance in result.rebalances] == [
        "initial-join",
        "member-leave",
        "member-join",
    ]


@pytest.mark.parametrize(
    ("kind", "cause", "earliest_s", "latest_s"),
    [
        # A crash is noticed when the session expires: session after the last heartbeat.
        (
            "crash",
            "session-expiry",
            (STOP_MS + SESSION_MS - 3_000.0) / 1000,
            (STOP_MS + SESSION_MS) / 1000,
        ),
        # A clean close sends LeaveGroup: the rebalance starts at once.
        ("leave", "member-leave", STOP_MS / 1000, STOP_MS / 1000),
    ],
)
def test_departures_rebalance_when_the_coordinator_learns_of_them(
    kind: DepartureKind, cause: str, earliest_s: float, latest_s: float
) -> None:
    result = simulate(group_where_one_member(Departure(STOP_MS, kind), static=False))
    assert [rebalance.cause for rebalance in result.rebalances] == ["initial-join", cause]
    second = result.rebalances[1]
    assert earliest_s <= second.start_s <= latest_s
    assert second.members == ("member-0", "member-2")
    assert second.completed


def test_a_crashed_members_partitions_stop_until_its_session_expires() -> None:
    crashed = simulate(group_where_one_member(Departure(STOP_MS, "crash"), static=False))
    left = simulate(group_where_one_member(Departure(STOP_MS, "leave"), static=False))
    # 4 partitions idle for most of a session timeout make the difference.
    difference = crashed.stop_the_world_partition_s - left.stop_the_world_partition_s
    assert 4 * 6.0 < difference < 4 * 10.5
