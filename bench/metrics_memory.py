"""Memory and CPU the operator's per-group metrics cost, measured in this process.

    .venv/bin/python bench/metrics_memory.py [--groups 2000] [--repeats 3]

Each of GROUPS ConsumerGroups gets what a served group publishes over its life: an observation
(group state, members, generation, partitions, lag, rebalance times), a rebalance counted by
cause, a time to Stable, unowned partition-seconds, conditions, a rollout's phase and batches,
gate waits and an enforce outcome. Measured, per group: the Python heap those series hold
(tracemalloc, after a full collection), the time to publish one observation, and the time one
scrape of every series takes. The figures are medians over REPEATS rounds with their range.
Run it at two commits to compare: the module's functions are the operator's only way in.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
import uuid

from prometheus_client import generate_latest

from rebalancer import metrics
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.snapshots import GroupSnapshot


def snapshot(observed_at: float) -> GroupSnapshot:
    return GroupSnapshot(
        state="Stable",
        protocol="classic",
        assignor="cooperative-sticky",
        generation=7,
        members=3,
        member_details=(),
        assigned_partitions=12,
        total_partitions=12,
        lag=40,
        observed_at=observed_at,
    )


TRACKING = GroupTracking(since=0.0, generation=7, rebalances=5, last_rebalance_at=1.7e9)
CONDITIONS = (
    Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", "stable"),
    Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, "Observed", "ok"),
)
ROLLOUT = RolloutState(phase=RolloutPhase.IDLE)


def publish_life(namespace: str, name: str) -> None:
    """What one served group publishes once it has been observed and rolled out."""
    metrics.publish_snapshot(namespace, name, name, snapshot(time.time()), TRACKING)
    metrics.record_rebalance(namespace, name, name, "deploy")
    metrics.record_time_to_stable(namespace, name, name, 4.2)
    metrics.record_rebalance_records(namespace, name, name, ())
    metrics.publish_conditions(namespace, name, name, CONDITIONS)
    metrics.publish_rollout(namespace, name, name, ROLLOUT)
    metrics.record_gate_waits(namespace, name, name, (3.0,))
    metrics.record_enforcement(namespace, name, name, "enforced")


def one_round(groups: int) -> dict[str, float]:
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    names = [f"group-{index:05d}" for index in range(groups)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for name in names:
        publish_life(namespace, name)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    started = time.perf_counter()
    for name in names:
        metrics.publish_snapshot(namespace, name, name, snapshot(time.time()), TRACKING)
    publish = (time.perf_counter() - started) / groups
    started = time.perf_counter()
    size = len(generate_latest(metrics.REGISTRY))
    scrape = time.perf_counter() - started
    for name in names:
        metrics.forget_group(namespace, name)
    return {
        "bytes_per_group": held / groups,
        "publish_us": publish * 1e6,
        "scrape_ms_per_1000": scrape * 1e3 * 1000 / groups,
        "scrape_bytes_per_group": size / groups,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for turn in range(args.repeats):
        rounds.append(one_round(args.groups))
        print(f"round {turn + 1}/{args.repeats}: {rounds[-1]}", flush=True)
    print(f"\n{args.groups} groups, median (min to max) of {args.repeats} rounds")
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        print(
            f"  {key:24} {statistics.median(values):10.1f} ({min(values):.1f} to {max(values):.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
