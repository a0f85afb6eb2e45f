"""What each arrival plan of a cold start or scale-up costs, on the coordinator models.

Classic groups are played on the discrete-event model of Kafka's GroupCoordinator (simulate);
KIP-848 groups on kip848_groups' model. Every plan is played on the same arrivals: ON_ARRIVAL
starts each consumer `start_ms` after its pod reaches its gate, GATHER starts them all
`start_ms` after the last one does; OPEN_AHEAD starts those at their gates by the last one's
expected arrival less the operator's open as GATHER would at that moment, and later ones as
ON_ARRIVAL does. A scale-up's group is formed first (all its members at once) and its cost
taken away, so only what the change adds is counted.

A scale-up's members heartbeat in step (each restarts its heartbeat when its rebalance
completes, and they complete together), so a rebalance the joiners start ends at the members'
next common heartbeat. Where the change falls between two of those is not known, and decides
whether a late joiner makes the rebalance or starts another: each seed plays the change at its
own point of the heartbeat interval, and the mean over them is the estimate.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence

from rebalancer.simulation.kip848_groups import run_kip848
from rebalancer.simulation.results import RunCost
from rebalancer.simulation.runs import simulate
from rebalancer.simulation.scenarios import (
    Assignor,
    ConsumerSettings,
    CoordinatorSettings,
    MemberPlan,
    Scenario,
)
from rebalancer.structs.plan_costs import ArrivalPlan, ArrivalQuestion, GroupKind, PlanCost

# Heartbeat phases and rejoin gaps are drawn from the seed: the mean of a few runs is the
# estimate, so one lucky draw does not decide.
SEEDS = (1, 2, 3)
# A scale-up is played at this many points of the members' heartbeat interval, each with
# every seed.
HEARTBEAT_PHASES = 8
# The members of a scale-up's group are formed this long before the change (long after
# their own formation has settled).
FORMED_BEFORE_MS = 120_000.0
_ASSIGNORS: dict[GroupKind, Assignor] = {
    GroupKind.EAGER: "round-robin",
    GroupKind.COOPERATIVE: "cooperative-sticky",
}


@functools.lru_cache(maxsize=256)
def estimate_arrival_plans(question: ArrivalQuestion) -> tuple[PlanCost, ...]:
    """Every arrival plan's expected cost for `question` (cached: a rollout asks once per plan,
    and fleets roll out alike)."""
    return tuple(_estimate(question, plan) for plan in ArrivalPlan)


def join_offsets_ms(question: ArrivalQuestion, plan: ArrivalPlan) -> tuple[float, ...]:
    """When each joiner's consumer sends its first join under `plan`, from the change."""
    if not question.arrivals_ms:
        return ()
    if plan is ArrivalPlan.GATHER:
        released = max(question.arrivals_ms) + question.release_ms
        return tuple(released + question.start_ms for _ in question.arrivals_ms)
    if plan is ArrivalPlan.OPEN_AHEAD:
        ahead = question.open_ahead_ms
        released = ahead + question.release_ms
        return tuple(
            (released if arrival <= ahead else arrival) + question.start_ms
            for arrival in question.arrivals_ms
        )
    return tuple(arrival + question.start_ms for arrival in question.arrivals_ms)


def _estimate(question: ArrivalQuestion, plan: ArrivalPlan) -> PlanCost:
    joins = join_offsets_ms(question, plan)
    if question.group is GroupKind.KIP848:
        runs = [_kip848(question, joins, seed) for seed in SEEDS]
    else:
        phases = HEARTBEAT_PHASES if question.members else 1
        runs = [
            _classic(question, joins, seed, phase=index / phases)
            for index in range(phases)
            for seed in SEEDS
        ]
    stable_s = statistics.fmean(run.stable_s for run in runs)
    return PlanCost(
        plan=plan,
        unowned_ps=round(statistics.fmean(run.unowned_ps for run in runs), 1),
        stop_the_world_ps=round(statistics.fmean(run.stop_the_world_ps for run in runs), 1),
        rebalances=round(statistics.median(run.rebalances for run in runs)),
        stable_s=round(stable_s, 2),
        waiting_ps=round(joiners_share(question) * stable_s, 1),
    )


def joiners_share(question: ArrivalQuestion) -> float:
    """How many of a scale-up's partitions its joiners take (a cold start's are all unowned,
    counted as such)."""
    if not question.members:
        return 0.0
    return question.partitions * question.joiners / (question.members + question.joiners)


def _kip848(question: ArrivalQuestion, joins: Sequence[float], seed: int) -> RunCost:
    return run_kip848(
        members=question.members,
        joins_ms=joins,
        partitions=question.partitions,
        heartbeat_ms=question.heartbeat_ms,
        seed=seed,
    )


def _classic(
    question: ArrivalQuestion, joins: Sequence[float], seed: int, *, phase: float = 0.0
) -> RunCost:
    """The classic coordinator's run of `joins`, as the change's own cost; a scale-up's change
    falls `phase` of a heartbeat interval later than the formed group's heartbeats."""
    consumer = ConsumerSettings(
        session_timeout_ms=question.session_ms,
        heartbeat_interval_ms=min(question.heartbeat_ms, question.session_ms / 3),
        assignor=_ASSIGNORS[question.group],
    )
    coordinator = CoordinatorSettings(initial_rebalance_delay_ms=question.initial_delay_ms)
    shift = FORMED_BEFORE_MS + phase * consumer.heartbeat_interval_ms if question.members else 0.0
    existing = tuple(
        MemberPlan(name=f"member-{index}", start_ms=0.0) for index in range(question.members)
    )
    joining = tuple(
        MemberPlan(name=f"joiner-{index}", start_ms=shift + offset)
        for index, offset in enumerate(joins)
    )

    def scenario(members: tuple[MemberPlan, ...]) -> Scenario:
        return Scenario(
            members=members,
            coordinator=coordinator,
            consumer=consumer,
            partitions=question.partitions,
            seed=seed,
        )

    result = simulate(scenario(existing + joining))
    first = min(joins, default=0.0)
    if question.members:
        before = simulate(scenario(existing))
        unowned = result.stop_the_world_partition_s - before.stop_the_world_partition_s
        rebalances = result.rebalance_count - before.rebalance_count
        formation = 0.0
    else:
        # The run counts from the first member's start; the wait before it is unowned too.
        unowned = result.stop_the_world_partition_s + question.partitions * first / 1000.0
        rebalances = result.rebalance_count
        # Rebalance times count from the run's time zero, the change.
        first_generation = result.rebalances[0].end_s if result.rebalances else 0.0
        formation = question.partitions * first_generation
    stable = result.time_to_stable_s
    stable_s = (stable + first / 1000.0) if stable is not None else float("inf")
    if question.members:
        stable_s = (result.end_s * 1000.0 - shift) / 1000.0
    return RunCost(
        unowned_ps=max(unowned, 0.0),
        stop_the_world_ps=max(unowned - formation, 0.0),
        rebalances=rebalances,
        stable_s=max(stable_s, 0.0),
    )
