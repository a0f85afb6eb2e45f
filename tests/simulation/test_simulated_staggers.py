"""simulate_stagger: a start-up released in batches, each once the group has settled, in one run.

The run must be the one `simulate` plays when every member's start is known up front, which
tests/stagger_replays.py finds with `simulate` alone."""

from __future__ import annotations

import math
import random

import pytest
from tests.stagger_replays import replayed

from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    FixedOffsets,
    Scenario,
    Staggered,
    plan_members,
    simulate,
    simulate_stagger,
)


def random_scenario(rng: random.Random) -> tuple[Scenario, int]:
    members = rng.randint(2, 14)
    batch = rng.randint(1, members)
    consumer = ConsumerSettings(
        assignor=rng.choice(["round-robin", "sticky", "cooperative-sticky"]),
        processing_ms=rng.choice([0.0, 300.0, 2000.0, 8000.0]),
    )
    offsets = [rng.uniform(0.0, 5000.0) for _ in range(members)]
    origin = min(offsets[:batch])
    offsets[:batch] = [offset - origin for offset in offsets[:batch]]
    scenario = Scenario(
        members=plan_members(members, static=rng.random() < 0.4),
        starts=FixedOffsets(tuple(offsets)),
        coordinator=CoordinatorSettings(
            initial_rebalance_delay_ms=rng.choice([0.0, 500.0, 3000.0, 10000.0])
        ),
        consumer=consumer,
        partitions=rng.choice([3, 12, 48]),
        seed=rng.randint(0, 10**6),
    )
    return scenario, batch


@pytest.mark.parametrize("seed", range(4))
def test_a_stagger_is_the_run_with_every_start_known_up_front(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        scenario, batch = random_scenario(rng)
        staggered = simulate_stagger(scenario, batch)
        replay = replayed(scenario, batch)
        assert staggered.time_to_stable_s is not None
        assert replay.time_to_stable_s is not None
        # The same run: the release time is computed once as a sum, once as a difference.
        assert math.isclose(staggered.time_to_stable_s, replay.time_to_stable_s, rel_tol=1e-12)
        assert math.isclose(
            staggered.stop_the_world_partition_s,
            replay.stop_the_world_partition_s,
            rel_tol=1e-9,
            abs_tol=1e-9,
        )
        assert [(r.generation, r.cause, r.members) for r in staggered.rebalances] == [
            (r.generation, r.cause, r.members) for r in replay.rebalances
        ]
        assert staggered.revocations == replay.revocations


def test_one_batch_is_the_plain_run_and_each_later_batch_rebalances_again() -> None:
    offsets = FixedOffsets(tuple(100.0 * index for index in range(6)))
    scenario = Scenario(members=plan_members(6), starts=offsets, partitions=12)
    assert simulate_stagger(scenario, 6) == simulate(scenario)
    in_threes = simulate_stagger(scenario, 3)
    assert in_threes.time_to_stable_s is not None
    assert in_threes.time_to_stable_s > simulate(scenario).time_to_stable_s  # type: ignore[operator]
    # The second batch joins a group that has formed: its own rebalance, of all six.
    assert len(in_threes.rebalances[-1].members) == 6
    assert all(len(r.members) <= 3 for r in in_threes.rebalances[:-1])


def test_a_batch_that_never_settles_holds_the_rest_back() -> None:
    # The horizon ends the run while the first batch is still waiting out the initial delay.
    scenario = Scenario(
        members=plan_members(4),
        starts=FixedOffsets((0.0, 0.0, 0.0, 0.0)),
        coordinator=CoordinatorSettings(initial_rebalance_delay_ms=3000.0),
        horizon_ms=2000.0,
    )
    result = simulate_stagger(scenario, 2)
    assert result.time_to_stable_s is None
    assert result.rebalances == ()


def test_a_stagger_takes_fixed_offsets_and_a_positive_batch() -> None:
    with pytest.raises(ValueError, match="FixedOffsets"):
        simulate_stagger(Scenario(members=plan_members(2), starts=Staggered(100.0)), 1)
    with pytest.raises(ValueError, match="batch must be positive"):
        simulate_stagger(Scenario(members=plan_members(2), starts=FixedOffsets((0.0, 0.0))), 0)
