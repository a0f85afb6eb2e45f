"""A rolling update of a running group on the coordinator simulator, per batch size.

Pure (stdlib and the simulator). The operator applies one batch size (rollout.maxBatchSize) to
every rollout: to start-ups from zero, which rebalancer.learning.scoring scores, and to rolling
updates of a group that is consuming, scored here. In a rolling update the old members own
every partition until they go: a batch leaves, its replacements join after their restart gap,
and the next batch goes once the group is Stable again and has settled, as the operator's
stagger releases them. A batch of the whole group leaves every partition without an owner while
the new pods start; small batches cost a rebalance (or two, cooperatively) each.

The cost is the planner's (rebalancer.planning.rollout_choices): partition-seconds without an
owner from the update on, here divided by the group's partitions so that it reads as seconds of
the whole group standing still, comparable with the start-up objective's seconds.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    MemberPlan,
    Scenario,
    SimulationResult,
    simulate,
)
from rebalancer.structs.brokers import BrokerProfile

# The stagger waits this long after the group is Stable before the next batch
# (spec.policy.rollout.settleSeconds' default).
SETTLE_MS = 2000.0
# The update starts once the group has long been Stable.
UPDATE_AT_MS = 30000.0


@dataclass(frozen=True)
class RollingUpdate:
    """What one rolling update cost, counted from the update."""

    batch: int
    rebalances: int
    unowned_ps: float
    time_to_stable_s: float | None


@dataclass(frozen=True)
class RollingGroup:
    """The group as a rolling update sees it."""

    members: int
    partitions: int
    consumer: ConsumerSettings
    static: bool = False
    initial_delay_ms: float = 3000.0
    profile: BrokerProfile | None = None


def default_batch(members: int) -> int:
    """The operator's rolling-update batch without maxBatchSize: a quarter of the replicas."""
    return max(1, -(-members // 4))


def rolling_update(
    group: RollingGroup, batch: int, gaps_ms: Sequence[float], seed: int = 0
) -> RollingUpdate:
    """One rolling update in batches of `batch`; member i's replacement joins gaps_ms[i] after
    it leaves."""
    if len(gaps_ms) != group.members:
        raise ValueError("one restart gap per member")
    batch = max(1, min(batch, group.members))
    leaving: dict[int, float] = {}
    release = UPDATE_AT_MS
    result: SimulationResult | None = None
    for first in range(0, group.members, batch):
        last = min(first + batch, group.members)
        leaving.update({index: release for index in range(first, last)})
        result = simulate(_scenario(group, gaps_ms, leaving, seed))
        if result.time_to_stable_s is None:
            break
        release = max(release, result.time_to_stable_s * 1000.0) + SETTLE_MS
    assert result is not None  # members >= 1: the loop ran
    baseline = simulate(_scenario(group, gaps_ms, {}, seed))
    rebalances = sum(1 for r in result.rebalances if r.start_s * 1000.0 >= UPDATE_AT_MS)
    unowned = max(result.stop_the_world_partition_s - baseline.stop_the_world_partition_s, 0.0)
    stable = result.time_to_stable_s
    return RollingUpdate(
        batch, rebalances, unowned, None if stable is None else stable - UPDATE_AT_MS / 1000.0
    )


def _scenario(
    group: RollingGroup, gaps_ms: Sequence[float], leaving: dict[int, float], seed: int
) -> Scenario:
    members = tuple(
        MemberPlan(
            f"member-{index}",
            0.0,
            f"member-{index}" if group.static else None,
            group.consumer,
            (Departure(leaving[index], "leave", gaps_ms[index]),) if index in leaving else (),
        )
        for index in range(group.members)
    )
    coordinator = CoordinatorSettings(initial_rebalance_delay_ms=group.initial_delay_ms)
    if group.profile is None:
        return Scenario(
            members=members,
            coordinator=coordinator,
            consumer=group.consumer,
            partitions=group.partitions,
            seed=seed,
        )
    return Scenario(
        members=members,
        profile=group.profile,
        coordinator=coordinator,
        consumer=group.consumer,
        partitions=group.partitions,
        seed=seed,
    )


def mean_update(
    group: RollingGroup, batch: int, gap_samples: Sequence[Sequence[float]], seed: int = 0
) -> RollingUpdate:
    """The mean of one rolling update per sample of restart gaps (common random numbers: every
    batch size sees the same gaps)."""
    runs = [
        rolling_update(group, batch, gaps, seed * 7919 + sample)
        for sample, gaps in enumerate(gap_samples)
    ]
    stables = [run.time_to_stable_s for run in runs]
    settled = [stable for stable in stables if stable is not None]
    return RollingUpdate(
        batch,
        round(sum(run.rebalances for run in runs) / len(runs)),
        sum(run.unowned_ps for run in runs) / len(runs),
        sum(settled) / len(settled) if len(settled) == len(runs) else None,
    )


def gap_samples(
    quantiles: Sequence[float], shares: Sequence[float], members: int, samples: int, seed: int
) -> list[list[float]]:
    """`samples` lists of `members` restart gaps drawn from `quantiles` (kept at `shares`)."""
    if len(quantiles) != len(shares):
        raise ValueError("one share per quantile")
    drawn: list[list[float]] = []
    for sample in range(samples):
        rng = random.Random(hash((seed, sample, members, "rolling")) & 0xFFFFFFFF)
        drawn.append([quantile_at(quantiles, shares, rng.random()) for _ in range(members)])
    return drawn


def quantile_at(quantiles: Sequence[float], shares: Sequence[float], share: float) -> float:
    """The value at cumulative `share`, interpolated; the ends hold beyond the kept shares."""
    if not quantiles:
        return 0.0
    if len(quantiles) == 1:
        return quantiles[0]
    share = min(max(share, shares[0]), shares[-1])
    high = min(max(bisect.bisect_left(shares, share), 1), len(shares) - 1)
    low = high - 1
    weight = (share - shares[low]) / (shares[high] - shares[low])
    return quantiles[low] * (1 - weight) + quantiles[high] * weight
