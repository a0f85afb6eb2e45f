"""Start-time distributions and the simulator's determinism for a given seed."""

from __future__ import annotations

import random

import pytest

from rebalancer.simulation import (
    ConsumerSettings,
    Exponential,
    FixedOffsets,
    Normal,
    Scenario,
    Staggered,
    StartTimes,
    Uniform,
    plan_members,
    simulate,
)
from rebalancer.simulation.distributions import sample_start_times
from rebalancer.structs.brokers import BrokerProfile

RANDOM_STARTS: list[StartTimes] = [Uniform(5_000.0), Exponential(800.0), Normal(3_000.0, 1_500.0)]


@pytest.mark.parametrize(
    ("starts", "expected"),
    [
        (FixedOffsets((0.0, 250.0, 4_000.0)), (0.0, 250.0, 4_000.0)),
        (Staggered(1_000.0), (0.0, 1_000.0, 2_000.0)),
        (Staggered(), (0.0, 0.0, 0.0)),
    ],
)
def test_fixed_start_times(starts: StartTimes, expected: tuple[float, ...]) -> None:
    assert sample_start_times(starts, 3, random.Random(0)) == expected


@pytest.mark.parametrize("starts", RANDOM_STARTS)
def test_random_start_times_follow_the_seed(starts: StartTimes) -> None:
    drawn = sample_start_times(starts, 50, random.Random(7))
    assert drawn == sample_start_times(starts, 50, random.Random(7))
    assert drawn != sample_start_times(starts, 50, random.Random(8))
    assert all(offset >= 0 for offset in drawn)


def test_shapes_of_the_random_distributions() -> None:
    uniform = sample_start_times(Uniform(5_000.0), 500, random.Random(1))
    assert max(uniform) <= 5_000.0
    arrivals = sample_start_times(Exponential(800.0), 500, random.Random(1))
    assert arrivals[0] == 0.0
    assert list(arrivals) == sorted(arrivals)
    assert 600.0 < arrivals[-1] / 499 < 1_000.0  # mean gap
    clustered = sample_start_times(Normal(3_000.0, 500.0), 500, random.Random(1))
    assert 2_900.0 < sum(clustered) / 500 < 3_100.0


@pytest.mark.parametrize(
    ("starts", "count"),
    [(FixedOffsets((0.0,)), 2), (Staggered(-1.0), 2), (Uniform(-5.0), 1), (Exponential(0.0), 2)],
)
def test_bad_start_times_are_refused(starts: StartTimes, count: int) -> None:
    with pytest.raises(ValueError):
        sample_start_times(starts, count, random.Random(0))


@pytest.mark.parametrize("profile", list(BrokerProfile))
@pytest.mark.parametrize("starts", RANDOM_STARTS)
def test_same_scenario_same_result(profile: BrokerProfile, starts: StartTimes) -> None:
    consumer = ConsumerSettings(session_timeout_ms=10_000.0, assignor="cooperative-sticky")
    scenario = Scenario(
        members=plan_members(12, consumer=consumer),
        starts=starts,
        profile=profile,
        consumer=consumer,
        seed=42,
    )
    assert simulate(scenario) == simulate(scenario)


def test_the_seed_changes_random_starts() -> None:
    def first_rebalance_end(seed: int) -> float:
        scenario = Scenario(members=plan_members(12), starts=Uniform(20_000.0), seed=seed)
        return simulate(scenario).rebalances[0].end_s

    assert len({first_rebalance_end(seed) for seed in range(5)}) > 1
