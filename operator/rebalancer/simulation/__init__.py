"""The coordinator simulator: a discrete-event model of the classic group protocol's timing.

Pure (stdlib only, no I/O) and deterministic for a given `Scenario.seed`. It models Apache Kafka's
GroupCoordinator (KIP-134 initial delay with its sliding extension, sessions and heartbeats,
static membership, eager and cooperative assignors, pattern subscriptions and KAFKA-7126), which
Redpanda follows too. Sources are cited in each model's module docstring (kafka_groups,
group_models).

    from rebalancer.simulation import Scenario, Uniform, plan_members, simulate
    result = simulate(Scenario(members=plan_members(6), starts=Uniform(2000.0)))
    result.rebalance_count, result.time_to_stable_s

Public API: `simulate(scenario)`, `simulate_stagger(scenario, batch)` (a start-up released in
batches), `join_window(settings, profile, consumer)`, the scenario inputs
(`Scenario`, `MemberPlan`, `ConsumerSettings`, `CoordinatorSettings`, `Departure`,
`TopicCreation`, `plan_members`), the start-time distributions (`FixedOffsets`, `Staggered`,
`Uniform`, `Exponential`, `Normal`), the outputs (`SimulationResult`, `Rebalance`) and the preset
`build_kafka_7126_scenario`.
"""

from rebalancer.simulation.distributions import (
    Exponential,
    FixedOffsets,
    Normal,
    Staggered,
    StartTimes,
    Uniform,
)
from rebalancer.simulation.plan_costs import estimate_arrival_plans
from rebalancer.simulation.presets import build_kafka_7126_scenario
from rebalancer.simulation.results import Cause, Rebalance, SimulationResult
from rebalancer.simulation.runs import simulate, simulate_stagger
from rebalancer.simulation.scenarios import (
    ASSIGNORS,
    TOPIC_NOTICES,
    Assignor,
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    DepartureKind,
    MemberPlan,
    Scenario,
    TopicCreation,
    TopicNotice,
    plan_members,
)
from rebalancer.simulation.windows import join_window

__all__ = [
    "ASSIGNORS",
    "TOPIC_NOTICES",
    "Assignor",
    "Cause",
    "ConsumerSettings",
    "CoordinatorSettings",
    "Departure",
    "DepartureKind",
    "Exponential",
    "FixedOffsets",
    "MemberPlan",
    "Normal",
    "Rebalance",
    "Scenario",
    "SimulationResult",
    "Staggered",
    "StartTimes",
    "TopicCreation",
    "TopicNotice",
    "Uniform",
    "build_kafka_7126_scenario",
    "estimate_arrival_plans",
    "join_window",
    "plan_members",
    "simulate",
    "simulate_stagger",
]
