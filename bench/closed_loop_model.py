"""A rolling update of a consuming group on the coordinator model, per batch size: what the
closed loop's learned batch size does to a fleet that is already running, as the learning job
does not score it.

    .venv/bin/python bench/closed_loop_model.py --pods 24 --learned 24

A batch size scored on start-ups from zero alone (rebalancer.learning.scoring: "the first
batch meets an Empty group") says nothing of rolling updates, where the operator applies it
(spec.policy.rollout.updateBatchSize). In a rolling update the old pods own every partition until
they go: a batch of the whole group leaves all of them without an owner while the new pods
start, where smaller batches leave the rest of the group to take them over. This plays that
rolling update on the same model (Apache Kafka profile, the lab's 3 s initial delay, dynamic
members): N members consuming, then batch after batch leaving and coming back as new members
after a restart gap (RESTART_OVERHEAD_MS plus the pod's start jitter), each next batch once the
group has settled, as the operator's stagger releases them.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rebalancer.learning import rolling_updates
from rebalancer.learning.rolling_updates import RollingGroup
from rebalancer.simulation import ConsumerSettings
from rebalancer.structs.brokers import BrokerProfile

# bench/rollouts.py's RESTART_OVERHEAD_S: from SIGTERM to the new consumer's JoinGroup, besides
# the jitter, on the lab.
RESTART_OVERHEAD_MS = 4000.0


@dataclass(frozen=True)
class Update:
    batch: int
    rebalances: float
    unowned_ps: float
    time_to_stable_s: float | None


def batch_sizes(pods: int) -> tuple[int, ...]:
    """The learning job's candidates: the whole group, halves, thirds, quarters."""
    return tuple(sorted({max(1, math.ceil(pods / parts)) for parts in (1, 2, 3, 4)}, reverse=True))


def rolling_update(
    pods: int,
    partitions: int,
    batch: int,
    jitter_bound_ms: float,
    seed: int,
    assignor: str = "cooperative-sticky",
) -> tuple[int, float, float | None]:
    """(rebalances, unowned partition-s, time to Stable from the update) of one run."""
    settings = ConsumerSettings(
        session_timeout_ms=45000,
        heartbeat_interval_ms=3000,
        assignor=assignor,  # type: ignore[arg-type]
        processing_ms=0.0,
    )
    rng = random.Random(seed)
    gaps = [RESTART_OVERHEAD_MS + rng.uniform(0, jitter_bound_ms) for _ in range(pods)]
    group = RollingGroup(pods, partitions, settings, profile=BrokerProfile.APACHE_KAFKA)
    update = rolling_updates.rolling_update(group, batch, gaps)
    return update.rebalances, update.unowned_ps, update.time_to_stable_s


def updates(
    pods: int, partitions: int, jitter_bound_ms: float, runs: int = 5
) -> list[Update]:  # fmt: skip
    """Medians of `runs` seeded runs per batch size."""
    found = []
    for batch in batch_sizes(pods):
        done = [
            rolling_update(pods, partitions, batch, jitter_bound_ms, seed) for seed in range(runs)
        ]
        stables = [s for _, _, s in done if s is not None]
        found.append(
            Update(
                batch,
                statistics.median(r for r, _, _ in done),
                statistics.median(u for _, u, _ in done),
                statistics.median(stables) if stables else None,
            )
        )
    return found


def table(found: Sequence[Update], pods: int, learned: int | None) -> str:
    default = max(1, math.ceil(pods / 4))  # the operator's rolling updates without maxBatchSize
    lines = [f"{'batch':>6}  {'rebalances':>10}  {'unowned p-s':>11}  {'Stable (s)':>10}  "]
    for update in found:
        marks = []
        if update.batch == default:
            marks.append("operator's default (a quarter)")
        if update.batch == learned:
            marks.append("learned")
        stable = "-" if update.time_to_stable_s is None else f"{update.time_to_stable_s:.1f}"
        lines.append(
            f"{update.batch:>6}  {update.rebalances:>10.0f}  {update.unowned_ps:>11.0f}  "
            f"{stable:>10}  {', '.join(marks)}"
        )
    return "\n".join(line.rstrip() for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=24)
    parser.add_argument("--partitions", type=int, default=None, help="default 2N")
    parser.add_argument("--jitter-bound-ms", type=float, default=6000.0)
    parser.add_argument("--learned", type=int, default=None, help="the learned batch size")
    args = parser.parse_args(argv)
    partitions = args.partitions or 2 * args.pods
    found = updates(args.pods, partitions, args.jitter_bound_ms)
    print(f"A rolling update of N={args.pods}, P={partitions} on the coordinator model:")
    print(table(found, args.pods, args.learned))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
