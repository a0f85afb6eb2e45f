"""Running a scenario: build the members, pick the broker's coordinator model, play the events."""

from __future__ import annotations

import random

from rebalancer.simulation.consumers import Consumer
from rebalancer.simulation.distributions import sample_start_times
from rebalancer.simulation.group_models import GroupModel
from rebalancer.simulation.kafka_groups import KafkaGroupModel
from rebalancer.simulation.results import SimulationResult
from rebalancer.simulation.scenarios import Scenario


def simulate(scenario: Scenario) -> SimulationResult:
    """Play `scenario` on its broker profile; the same scenario always gives the same result."""
    rng = random.Random(scenario.seed)
    consumers = build_consumers(scenario, rng)
    # Redpanda follows Kafka's coordinator, initial delay included; it only makes the delay a
    # dynamic setting, which matters to the operator, not to the timing.
    model: GroupModel = KafkaGroupModel(scenario, consumers, rng)
    return model.run()


def build_consumers(scenario: Scenario, rng: random.Random) -> list[Consumer]:
    """One Consumer per plan; its random draws (starts, refresh phases) come first, in order."""
    sampled = sample_start_times(scenario.starts, len(scenario.members), rng)
    consumers: list[Consumer] = []
    for index, plan in enumerate(scenario.members):
        settings = plan.consumer or scenario.consumer
        consumers.append(
            Consumer(
                index=index,
                name=plan.name or f"member-{index}",
                settings=settings,
                instance_id=plan.instance_id,
                start_ms=sampled[index] if plan.start_ms is None else plan.start_ms,
                departures=plan.departures,
                metadata_phase_ms=rng.uniform(0.0, settings.metadata_max_age_ms),
            )
        )
    names = [consumer.name for consumer in consumers]
    if len(set(names)) != len(names):
        raise ValueError("member names must be unique")
    return consumers
