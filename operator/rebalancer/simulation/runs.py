"""Running a scenario: build the members, pick the broker's coordinator model, play the events."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from rebalancer.simulation.consumers import Consumer
from rebalancer.simulation.distributions import FixedOffsets, sample_start_times
from rebalancer.simulation.group_models import GroupModel
from rebalancer.simulation.kafka_groups import KafkaGroupModel
from rebalancer.simulation.results import SimulationResult
from rebalancer.simulation.scenarios import Scenario

# Generator states just after seeding, by seed: restoring one costs less than seeding, and the
# scoring job runs thousands of scenarios on a few seeds. Bounded; any entry may be dropped.
_SEEDED: dict[tuple[type, object], tuple[Any, ...]] = {}
_SEEDED_LIMIT = 256


def seeded_random(seed: int) -> random.Random:
    """A generator in the state `random.Random(seed)` starts in."""
    key = (type(seed), seed)  # 1 == 1.0, but an int and a float seed differently
    state = _SEEDED.get(key)
    if state is None:
        rng = random.Random(seed)
        if len(_SEEDED) >= _SEEDED_LIMIT:
            _SEEDED.clear()
        _SEEDED[key] = rng.getstate()
        return rng
    rng = random.Random.__new__(random.Random)
    rng.setstate(state)
    return rng


def simulate(scenario: Scenario) -> SimulationResult:
    """Play `scenario` on its broker profile; the same scenario always gives the same result."""
    return model_of(scenario).run()


def model_of(scenario: Scenario) -> GroupModel:
    """A run of `scenario` not yet started: its generator seeded, its members built."""
    rng = seeded_random(scenario.seed)
    consumers = build_consumers(scenario, rng)
    # Redpanda follows Kafka's coordinator, initial delay included; it only makes the delay a
    # dynamic setting, which matters to the operator, not to the timing.
    return KafkaGroupModel(scenario, consumers, rng)


def simulate_stagger(scenario: Scenario, batch: int) -> SimulationResult:
    """`scenario`'s members released `batch` at a time in member order, as the operator's
    stagger does: the first batch at 0 ms, each next one when the group has settled (every
    released member Stable in the latest generation, nothing happening since). Each member
    starts its FixedOffsets offset after its batch's release.

    One run, where simulating each batch's prefix of the fleet from the start would replay the
    earlier batches once per later one. A batch after which the group never settles holds the
    rest back for good: the result then has no time to Stable."""
    if not isinstance(scenario.starts, FixedOffsets):
        raise ValueError("a staggered start-up takes FixedOffsets (each relative to its batch)")
    if batch <= 0:
        raise ValueError("batch must be positive")
    model = model_of(scenario)
    consumers = model.consumers
    model.start_members(consumers[:batch])
    model.schedule_topic_creation()
    result = model.play()
    for first in range(batch, len(consumers), batch):
        settled_at_ms = model.ledger.settled_at_ms
        if settled_at_ms is None:
            return dataclasses.replace(result, time_to_stable_s=None)
        model.release(consumers[first : first + batch], settled_at_ms)
        result = model.play()
    return result


def build_consumers(scenario: Scenario, rng: random.Random) -> list[Consumer]:
    """One Consumer per plan; its random draws (starts, refresh phases) come first, in order."""
    sampled = sample_start_times(scenario.starts, len(scenario.members), rng)
    consumers: list[Consumer] = []
    for index, plan in enumerate(scenario.members):
        settings = plan.consumer or scenario.consumer
        name = plan.name or f"member-{index}"
        start_ms = sampled[index] if plan.start_ms is None else plan.start_ms
        metadata_phase_ms = rng.uniform(0.0, settings.metadata_max_age_ms)
        # In field order: keywords would cost as much again as the construction.
        consumers.append(
            Consumer(
                index,
                name,
                settings,
                plan.instance_id,
                start_ms,
                plan.departures,
                metadata_phase_ms,
            )
        )
    names = [consumer.name for consumer in consumers]
    if len(set(names)) != len(names):
        raise ValueError("member names must be unique")
    return consumers
