"""`rebalancer simulate`: play a consumer-group scenario on the coordinator simulator."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from rebalancer.simulation import (
    TOPIC_NOTICES,
    Assignor,
    ConsumerSettings,
    CoordinatorSettings,
    Exponential,
    Normal,
    Scenario,
    SimulationResult,
    Staggered,
    StartTimes,
    Uniform,
    build_kafka_7126_scenario,
    join_window,
    plan_members,
    simulate,
)
from rebalancer.structs.brokers import BrokerProfile

DISTRIBUTIONS = ("fixed", "uniform", "exponential", "normal")
# "eager" is the classic default, round-robin under the eager protocol.
ASSIGNOR_CHOICES: dict[str, Assignor] = {
    "eager": "round-robin",
    "round-robin": "round-robin",
    "sticky": "sticky",
    "cooperative-sticky": "cooperative-sticky",
}
DEFAULT_MEMBERS = 6
KAFKA_7126_MEMBERS = 200


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a consumer group's rebalances on a model of the group coordinator",
        description=(
            "Play a scenario on the coordinator simulator (Apache Kafka's classic group "
            "coordinator, or Redpanda's) and print every rebalance, the time until the group "
            "is Stable with every member assigned, and the partition-seconds no member consumed. "
            "Durations are milliseconds, like the Kafka settings they stand for."
        ),
    )
    _add_start_arguments(parser)
    _add_consumer_arguments(parser)
    _add_latency_arguments(parser)
    _add_scenario_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the result as JSON instead of a table"
    )
    parser.set_defaults(command_module=sys.modules[__name__])


def _add_start_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for how many members start, and when."""
    parser.add_argument(
        "--members",
        type=int,
        default=None,
        help=f"consumers in the group (default {DEFAULT_MEMBERS}; {KAFKA_7126_MEMBERS} for "
        "--scenario kafka-7126)",
    )
    parser.add_argument(
        "--start-spread",
        type=float,
        default=0.0,
        metavar="MS",
        help="milliseconds over which the members start (default 0: all at once)",
    )
    parser.add_argument(
        "--distribution",
        choices=DISTRIBUTIONS,
        default="fixed",
        help="how starts fall within the spread: fixed = evenly spaced, uniform = anywhere, "
        "exponential = Poisson arrivals with mean gap spread/members, normal = around the middle "
        "with a standard deviation of a quarter spread (default fixed)",
    )


def _add_consumer_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the settings every member and the coordinator run with."""
    parser.add_argument(
        "--delay-ms",
        type=float,
        default=3000.0,
        help="group.initial.rebalance.delay.ms (KIP-134; default 3000)",
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=float,
        default=45000.0,
        help="session.timeout.ms of every member (default 45000)",
    )
    parser.add_argument(
        "--heartbeat-interval-ms",
        type=float,
        default=3000.0,
        help="heartbeat.interval.ms of every member (default 3000)",
    )
    parser.add_argument(
        "--max-poll-interval-ms",
        type=float,
        default=300000.0,
        help="max.poll.interval.ms, the rebalance timeout (default 300000)",
    )
    parser.add_argument(
        "--assignor",
        choices=tuple(ASSIGNOR_CHOICES),
        default="eager",
        help="partition.assignment.strategy: eager (round-robin), round-robin or sticky under the "
        "eager protocol, or cooperative-sticky (KIP-429) (default eager)",
    )
    parser.add_argument(
        "--static",
        action="store_true",
        help="give every member a group.instance.id (static membership, KIP-345)",
    )
    parser.add_argument(
        "--profile",
        choices=[profile.value for profile in BrokerProfile],
        default=BrokerProfile.APACHE_KAFKA.value,
        help="broker whose coordinator to model (default apache-kafka)",
    )


def _add_latency_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the partitions, the network and the random seed."""
    parser.add_argument(
        "--partitions", type=int, default=12, help="partitions the group consumes (default 12)"
    )
    parser.add_argument(
        "--join-latency-ms",
        type=float,
        default=100.0,
        help="from deciding to join until the coordinator holds the JoinGroup (default 100)",
    )
    parser.add_argument(
        "--sync-latency-ms",
        type=float,
        default=100.0,
        help="from the JoinGroup response until members hold their assignment (default 100)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed; same seed, same result (default 0)"
    )


def _add_scenario_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for a published situation played instead of a start-up."""
    parser.add_argument(
        "--scenario",
        choices=("kafka-7126",),
        default=None,
        help="a published situation instead of a start-up: kafka-7126 = pattern-subscribed "
        "consumers and one new topic (uses --members, --topic-notice, --profile, --seed)",
    )
    parser.add_argument(
        "--topic-notice",
        choices=TOPIC_NOTICES,
        default="pre-fix",
        help="for kafka-7126: pre-fix clients, the client fix, or an operator-enforced "
        "rebalance at topic creation (default pre-fix)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        scenario = build_scenario(args)
    except ValueError as error:
        print(f"rebalancer simulate: {error}", file=sys.stderr)
        return 2
    result = simulate(scenario)
    if args.json:
        print(json.dumps(describe(scenario, result), indent=2))
    else:
        print(render_table(scenario, result))
    return 0


def build_scenario(args: argparse.Namespace) -> Scenario:
    profile = BrokerProfile(args.profile)
    if args.scenario == "kafka-7126":
        members = args.members or KAFKA_7126_MEMBERS
        preset = build_kafka_7126_scenario(args.topic_notice, members=members, seed=args.seed)
        return dataclasses.replace(preset, profile=profile)
    members = DEFAULT_MEMBERS if args.members is None else args.members
    if members < 1:
        raise ValueError("--members must be at least 1")
    consumer = ConsumerSettings(
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        max_poll_interval_ms=args.max_poll_interval_ms,
        assignor=ASSIGNOR_CHOICES[args.assignor],
    )
    return Scenario(
        members=plan_members(members, static=args.static, consumer=consumer),
        starts=pick_start_times(args.distribution, args.start_spread, members),
        profile=profile,
        coordinator=CoordinatorSettings(
            initial_rebalance_delay_ms=args.delay_ms,
            join_latency_ms=args.join_latency_ms,
            sync_latency_ms=args.sync_latency_ms,
        ),
        consumer=consumer,
        partitions=args.partitions,
        seed=args.seed,
    )


def pick_start_times(distribution: str, spread_ms: float, members: int) -> StartTimes:
    if spread_ms < 0:
        raise ValueError("--start-spread must not be negative")
    gap = spread_ms / max(members - 1, 1)
    if distribution == "uniform":
        return Uniform(spread_ms)
    if distribution == "exponential":
        return Exponential(gap) if gap > 0 else Staggered(0.0)
    if distribution == "normal":
        return Normal(spread_ms / 2, spread_ms / 4)
    return Staggered(gap)


def describe(scenario: Scenario, result: SimulationResult) -> dict[str, Any]:
    """The result as plain JSON-ready data."""
    return {
        "profile": scenario.profile.value,
        "members": len(scenario.members),
        "partitions": scenario.partitions,
        "seed": scenario.seed,
        "join_window_s": join_window(scenario.coordinator, scenario.profile, scenario.consumer),
        "rebalance_count": result.rebalance_count,
        "time_to_stable_s": result.time_to_stable_s,
        "stop_the_world_partition_s": result.stop_the_world_partition_s,
        "revocations": dict(result.revocations),
        "end_s": result.end_s,
        "rebalances": [
            {
                "generation": rebalance.generation,
                "cause": rebalance.cause,
                "start_s": rebalance.start_s,
                "end_s": rebalance.end_s,
                "completed": rebalance.completed,
                "members": list(rebalance.members),
            }
            for rebalance in result.rebalances
        ],
    }


def render_table(scenario: Scenario, result: SimulationResult) -> str:
    lines = [
        f"{scenario.profile.value}: {len(scenario.members)} members, "
        f"{scenario.partitions} partitions, seed {scenario.seed}",
        "",
        f"{'gen':>5}  {'cause':<22} {'start s':>9} {'end s':>9} {'took s':>8} "
        f"{'members':>7}  stable",
    ]
    for rebalance in result.rebalances:
        lines.append(
            f"{rebalance.generation:>5}  {rebalance.cause:<22} {rebalance.start_s:>9.3f} "
            f"{rebalance.end_s:>9.3f} {rebalance.duration_s:>8.3f} "
            f"{len(rebalance.members):>7}  {'yes' if rebalance.completed else 'no'}"
        )
    stable = "never" if result.time_to_stable_s is None else f"{result.time_to_stable_s:.3f} s"
    lines += [
        "",
        f"rebalances:      {result.rebalance_count}",
        f"time to Stable:  {stable} (first start to last Stable with every member assigned)",
        f"stop-the-world:  {result.stop_the_world_partition_s:.1f} partition-seconds",
        f"revocations:     {sum(result.revocations.values())} partitions",
    ]
    return "\n".join(lines)
