"""KIP-134: how a new group forms with and without group.initial.rebalance.delay.ms."""

from __future__ import annotations

import pytest

from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    FixedOffsets,
    MemberPlan,
    Scenario,
    Staggered,
    Uniform,
    plan_members,
    simulate,
)

NO_DELAY = CoordinatorSettings(initial_rebalance_delay_ms=0.0)


@pytest.mark.parametrize(
    ("members", "spacing_ms"),
    [(2, 200.0), (2, 1000.0), (4, 500.0), (10, 300.0), (10, 2000.0)],
)
def test_without_delay_a_new_group_rebalances_at_least_twice(
    members: int, spacing_ms: float
) -> None:
    result = simulate(
        Scenario(members=plan_members(members), starts=Staggered(spacing_ms), coordinator=NO_DELAY)
    )
    assert result.rebalance_count >= 2
    first, *_ = result.rebalances
    assert first.cause == "initial-join"
    assert first.members == ("member-0",)
    assert len(result.rebalances[-1].members) == members


@pytest.mark.parametrize(
    ("members", "spread_ms", "seed"),
    [(2, 500.0, 0), (6, 2000.0, 1), (20, 2900.0, 2), (50, 2500.0, 3)],
)
def test_with_the_default_delay_members_starting_within_it_form_one_generation(
    members: int, spread_ms: float, seed: int
) -> None:
    result = simulate(Scenario(members=plan_members(members), starts=Uniform(spread_ms), seed=seed))
    assert result.rebalance_count == 1
    (only,) = result.rebalances
    assert only.cause == "initial-join"
    assert only.completed
    assert len(only.members) == members


@pytest.mark.parametrize(
    ("offsets_ms", "rebalances", "first_end_s"),
    [
        # Joins at 0.1 s + offset; the delay runs in 3 s steps from the first join (0.1 s), and a
        # step in which someone joined buys one more step.
        ((0.0,), 1, 3.2),
        ((0.0, 2500.0, 5000.0, 7500.0), 1, 12.2),
        ((0.0, 1000.0, 3500.0), 1, 9.2),
        ((0.0, 3500.0), 2, 3.2),
        ((0.0, 1000.0, 6500.0), 2, 6.2),
    ],
)
def test_each_join_in_a_delay_step_extends_the_window_by_one_step(
    offsets_ms: tuple[float, ...], rebalances: int, first_end_s: float
) -> None:
    result = simulate(
        Scenario(members=plan_members(len(offsets_ms)), starts=FixedOffsets(offsets_ms))
    )
    assert result.rebalance_count == rebalances
    assert result.rebalances[0].end_s == pytest.approx(first_end_s)


def test_the_sliding_window_is_capped_by_the_rebalance_timeout() -> None:
    # Joins every 2.4 s keep extending the delay; max.poll.interval.ms = 10 s caps it at 10 s.
    capped = ConsumerSettings(max_poll_interval_ms=10_000.0, session_timeout_ms=10_000.0)
    result = simulate(Scenario(members=plan_members(8, consumer=capped), starts=Staggered(2400.0)))
    first = result.rebalances[0]
    assert first.start_s == pytest.approx(0.1)
    assert first.end_s == pytest.approx(0.1 + 10.0 + 0.1)  # cap, then the SyncGroup
    assert first.members == tuple(f"member-{index}" for index in range(5))
    assert result.rebalance_count > 1
    assert {rebalance.cause for rebalance in result.rebalances[1:]} == {"member-join"}

    uncapped = simulate(Scenario(members=plan_members(8), starts=Staggered(2400.0)))
    assert uncapped.rebalance_count == 1


def test_the_delay_costs_its_length_in_unconsumed_partitions() -> None:
    # The trade-off KIP-134 accepts: nothing is consumed until the first generation forms.
    result = simulate(Scenario(members=plan_members(1), partitions=10))
    assert result.time_to_stable_s == pytest.approx(3.2)
    assert result.stop_the_world_partition_s == pytest.approx(10 * 3.2)


def test_a_group_that_became_empty_again_gets_one_delay_step_without_sliding() -> None:
    # Kafka 2.x-3.x's Scala coordinator lets the delay slide only at generation 0; a group that
    # every member left (a full restart) waits one step of the delay and no more.
    offsets = (0.0, 2_500.0, 5_000.0)
    fresh = simulate(Scenario(members=plan_members(3), starts=FixedOffsets(offsets)))
    assert fresh.rebalance_count == 1

    restarted = simulate(
        Scenario(
            members=tuple(
                MemberPlan(
                    name=f"member-{index}",
                    start_ms=0.0,
                    departures=(Departure(20_000.0, "leave", restart_after_ms=10_000.0 + offset),),
                )
                for index, offset in enumerate(offsets)
            )
        )
    )
    causes = [rebalance.cause for rebalance in restarted.rebalances]
    assert causes == ["initial-join", "member-leave", "initial-join", "member-join"]
    assert restarted.rebalances[1].members == ()  # the group went Empty
    assert restarted.rebalances[2].members == ("member-0", "member-1")
