"""Eager versus cooperative rebalancing (KIP-429) and the assignors behind them."""

from __future__ import annotations

import pytest

from rebalancer.simulation import (
    Assignor,
    ConsumerSettings,
    Departure,
    MemberPlan,
    Scenario,
    SimulationResult,
    simulate,
)
from rebalancer.simulation.assignors import assign_partitions

EMPTY: frozenset[int] = frozenset()


@pytest.mark.parametrize(
    ("assignor", "previous", "granted", "withheld"),
    [
        (
            "round-robin",
            {},
            {"a": {0, 2, 4}, "b": {1, 3, 5}},
            set(),
        ),
        # sticky: b keeps what it had; a takes the rest.
        (
            "sticky",
            {"b": frozenset({0, 1, 2})},
            {"a": {3, 4, 5}, "b": {0, 1, 2}},
            set(),
        ),
        # a newcomer under sticky takes one partition from each of the others.
        (
            "sticky",
            {"a": frozenset({0, 1, 2}), "b": frozenset({3, 4, 5})},
            {"a": {0, 1}, "b": {3, 4}, "c": {2, 5}},
            set(),
        ),
        # cooperative: the same target, but moved partitions are withheld this round.
        (
            "cooperative-sticky",
            {"a": frozenset({0, 1, 2}), "b": frozenset({3, 4, 5})},
            {"a": {0, 1}, "b": {3, 4}, "c": set()},
            {2, 5},
        ),
        # ... while partitions nobody owns (a member left) are handed out at once.
        (
            "cooperative-sticky",
            {"a": frozenset({0, 1, 2})},
            {"a": {0, 1, 2}, "c": {3, 4, 5}},
            set(),
        ),
    ],
)
def test_assignors(
    assignor: Assignor,
    previous: dict[str, frozenset[int]],
    granted: dict[str, set[int]],
    withheld: set[int],
) -> None:
    assignment = assign_partitions(sorted(granted), list(range(6)), assignor, previous)
    assert {member: set(parts) for member, parts in assignment.granted.items()} == granted
    assert assignment.withheld == withheld


def scale_event(assignor: Assignor, *, leave: bool) -> SimulationResult:
    """30 members on 300 partitions; at 31 s one more joins (or member-00 leaves cleanly)."""
    consumer = ConsumerSettings(assignor=assignor)
    plans = [
        MemberPlan(
            name=f"member-{index:02d}",
            start_ms=0.0,
            consumer=consumer,
            departures=(Departure(31_000.0, "leave"),) if leave and index == 0 else (),
        )
        for index in range(30)
    ]
    if not leave:
        plans.append(MemberPlan(name="member-30", start_ms=31_000.0, consumer=consumer))
    return simulate(Scenario(members=tuple(plans), partitions=300))


@pytest.mark.parametrize("leave", [False, True])
def test_cooperative_stops_only_moved_partitions(leave: bool) -> None:
    eager = scale_event("round-robin", leave=leave)
    cooperative = scale_event("cooperative-sticky", leave=leave)
    assert cooperative.stop_the_world_partition_s < eager.stop_the_world_partition_s
    # Eager: every remaining member gives everything back.
    assert sum(eager.revocations.values()) == (290 if leave else 300)
    if leave:
        # The leaver's partitions were nobody else's: no one revokes, no second rebalance.
        assert sum(cooperative.revocations.values()) == 0
        assert [r.cause for r in cooperative.rebalances] == ["initial-join", "member-leave"]
    else:
        # One partition in 31 moves to the newcomer; only those are revoked, in a first
        # rebalance, and handed over in a second.
        assert sum(cooperative.revocations.values()) == 300 // 31
        assert [r.cause for r in cooperative.rebalances] == [
            "initial-join",
            "member-join",
            "cooperative-follow-up",
        ]
        assert [r.cause for r in eager.rebalances] == ["initial-join", "member-join"]


def test_sticky_under_the_eager_protocol_still_stops_the_world() -> None:
    sticky = scale_event("sticky", leave=False)
    round_robin = scale_event("round-robin", leave=False)
    assert sum(sticky.revocations.values()) == sum(round_robin.revocations.values()) == 300
