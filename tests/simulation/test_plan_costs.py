"""The arrival plans' costs on the coordinator models: the figures the planner chooses by."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancer.simulation import estimate_arrival_plans
from rebalancer.simulation.kip848_groups import _Group, _Member, run_kip848
from rebalancer.simulation.plan_costs import join_offsets_ms
from rebalancer.structs.plan_costs import ArrivalPlan, ArrivalQuestion, GroupKind, PlanCost


def question(
    group: GroupKind, *, joiners: int = 12, members: int = 0, spread_ms: float = 6000.0
) -> ArrivalQuestion:
    return ArrivalQuestion(
        group=group,
        joiners=joiners,
        members=members,
        partitions=2 * (joiners + members),
        initial_delay_ms=3000.0,
        heartbeat_ms=5000.0 if group is GroupKind.KIP848 else 3000.0,
        session_ms=45000.0,
        arrivals_ms=tuple(spread_ms * i / (joiners - 1) for i in range(joiners)),
        start_ms=1500.0,
        release_ms=1000.0,
    )


def by_plan(q: ArrivalQuestion) -> dict[ArrivalPlan, PlanCost]:
    return {cost.plan: cost for cost in estimate_arrival_plans(q)}


def test_a_lone_kip848_member_owns_everything_from_its_join() -> None:
    run = run_kip848(members=0, joins_ms=[2000.0], partitions=10, heartbeat_ms=5000.0, seed=1)
    assert run.unowned_ps == pytest.approx(20.0)  # 10 partitions for 2 s
    assert run.stop_the_world_ps == 0
    assert run.rebalances == 1
    assert run.stable_s == pytest.approx(2.0)


def test_a_kip848_joiner_takes_half_once_its_owner_has_revoked_them() -> None:
    run = run_kip848(members=1, joins_ms=[1000.0], partitions=10, heartbeat_ms=5000.0, seed=1)
    assert run.rebalances == 1
    # Five partitions move: unowned from the owner's revoking heartbeat to the joiner's next.
    assert 0 < run.stop_the_world_ps == run.unowned_ps <= 5 * 5.0


def test_a_kip848_joiner_takes_its_share_from_the_fullest_member_only() -> None:
    """Three members own 7 partitions (3, 2, 2); a fourth takes one from the member with 3,
    and the two with 2 keep theirs, as Kafka's uniform assignor moves as few as it can."""
    group = _Group(7)
    for name, owned in (("m1", {0, 1, 2}), ("m2", {3, 4}), ("m3", {5, 6})):
        group.members[name] = _Member(name, set(owned), set(owned))
    group.members["j"] = _Member("j")  # first by name: names must not decide who gives
    group.assign()
    targets = {name: member.target for name, member in group.members.items()}
    assert targets["m2"] == {3, 4} and targets["m3"] == {5, 6}
    assert len(targets["m1"]) == 2 and targets["m1"] < {0, 1, 2}
    assert len(targets["j"]) == 1


def test_a_kip848_scale_up_costs_about_the_same_opened_on_arrival_or_gathered() -> None:
    """Measured on Apache Kafka 4.4 (BENCHMARKS.md, scale-ups, N=24, 0-6 s): on arrival 57
    unowned partition-s and Stable after 12.1 s, gathered 61 and 18.9 s. Each moved partition
    waits for its new owner's next heartbeat either way; gathered, all of them wait for the last
    pod. (The bench's topic has 48 partitions: one each once scaled.)"""
    costs = by_plan(replace(question(GroupKind.KIP848, joiners=24, members=24), partitions=48))
    arrival, gathered = costs[ArrivalPlan.ON_ARRIVAL], costs[ArrivalPlan.GATHER]
    assert arrival.unowned_ps <= gathered.unowned_ps * 1.05
    assert arrival.stable_s < gathered.stable_s


def test_kip848_cold_start_gathered_leaves_partitions_unowned_longer() -> None:
    costs = by_plan(question(GroupKind.KIP848))
    assert costs[ArrivalPlan.ON_ARRIVAL].unowned_ps < costs[ArrivalPlan.GATHER].unowned_ps


@pytest.mark.parametrize("group", [GroupKind.EAGER, GroupKind.COOPERATIVE])
@pytest.mark.parametrize("spread_ms", [6000.0, 20000.0])
def test_a_classic_cold_start_gathered_costs_at_least_as_much(
    group: GroupKind, spread_ms: float
) -> None:
    """The initial delay, restarted by each join of an Empty group, already gathers the pods:
    holding the early ones at the gate only adds their wait."""
    costs = by_plan(question(group, spread_ms=spread_ms))
    arrival, gather = costs[ArrivalPlan.ON_ARRIVAL], costs[ArrivalPlan.GATHER]
    assert arrival.unowned_ps <= gather.unowned_ps
    assert arrival.stable_s <= gather.stable_s
    assert arrival.rebalances == gather.rebalances == 1


def test_an_eager_scale_up_on_arrival_stops_the_world_per_join() -> None:
    costs = by_plan(question(GroupKind.EAGER, members=12))
    arrival, gather = costs[ArrivalPlan.ON_ARRIVAL], costs[ArrivalPlan.GATHER]
    assert gather.rebalances < arrival.rebalances
    assert gather.stop_the_world_ps < arrival.stop_the_world_ps


def test_estimates_are_repeatable() -> None:
    q = question(GroupKind.COOPERATIVE, members=6)
    assert estimate_arrival_plans(q) == estimate_arrival_plans.__wrapped__(q)


def test_a_late_joiner_of_an_eager_group_stops_the_world_after_the_first_generation() -> None:
    """Joins 20 s apart: the first generation forms alone, the second join revokes everything."""
    q = replace(
        question(GroupKind.EAGER, joiners=2),
        arrivals_ms=(3500.0, 23500.0),  # joins at 5 s and 25 s
    )
    arrival = by_plan(q)[ArrivalPlan.ON_ARRIVAL]
    assert arrival.rebalances == 2
    # Nothing owned before the first generation (about 5 s + the 3 s delay), then the whole
    # topic stopped while the second rebalance runs.
    assert arrival.unowned_ps >= q.partitions * 8.0
    assert 0 < arrival.stop_the_world_ps < arrival.unowned_ps - q.partitions * 7.0


@pytest.mark.parametrize("group", [GroupKind.EAGER, GroupKind.COOPERATIVE])
def test_a_gathered_classic_scale_up_is_stable_later_than_one_opened_on_arrival(
    group: GroupKind,
) -> None:
    """Measured on Apache Kafka 4.4 (BENCHMARKS.md, scale-ups, N=24, 0-6 s): gathered, Stable
    after 9.8 s (eager) and 12.8 s (cooperative); on arrival (tuned), 6.8 s and 10.1 s. The
    members heartbeat in step, and where the change falls between two of their heartbeats
    decides whether late joiners make a rebalance; played at one point only, the model put the
    gathered plan first."""
    costs = by_plan(question(group, joiners=24, members=24))
    assert costs[ArrivalPlan.GATHER].stable_s > costs[ArrivalPlan.ON_ARRIVAL].stable_s


def test_a_scale_up_counts_the_partitions_its_joiners_take_while_they_wait() -> None:
    q = question(GroupKind.COOPERATIVE, joiners=12, members=36)  # 96 partitions, 24 move
    for cost in estimate_arrival_plans(q):
        assert cost.waiting_ps == pytest.approx(24 * cost.stable_s, rel=0.01)
    for cost in estimate_arrival_plans(question(GroupKind.COOPERATIVE)):
        assert cost.waiting_ps == 0  # a cold start's partitions are unowned, counted as such


def test_opened_ahead_the_early_pods_join_as_the_last_ones_arrive() -> None:
    """The last pod expected at 6 s and an open of 1 s: the pods there by 5 s are opened
    together (joining at 5 + 1 + 1.5 s), later ones as they come (arrival + 1.5 s)."""
    q = replace(
        question(GroupKind.EAGER, joiners=6, members=6),
        arrivals_ms=(0.0, 500.0, 1000.0, 5500.0, 5800.0, 6000.0),
    )
    assert q.open_ahead_ms == 5000.0
    joins = join_offsets_ms(q, ArrivalPlan.OPEN_AHEAD)
    assert joins == (7500.0, 7500.0, 7500.0, 7000.0, 7300.0, 7500.0)
    assert join_offsets_ms(q, ArrivalPlan.GATHER) == (8500.0,) * 6


def test_an_eager_scale_up_opened_ahead_makes_one_rebalance_sooner_than_gathered() -> None:
    costs = by_plan(question(GroupKind.EAGER, joiners=24, members=24))
    ahead, gather = costs[ArrivalPlan.OPEN_AHEAD], costs[ArrivalPlan.GATHER]
    assert ahead.rebalances == gather.rebalances == 1
    assert ahead.stable_s < gather.stable_s - 1.0
    assert ahead.stop_the_world_ps <= gather.stop_the_world_ps * 1.1
