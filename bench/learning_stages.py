"""Where the learning job's estimation spends its time: each estimate alone, then all together.

Caches a history's events as `rebalancer learn` does (rebalancer.learning.estimation), then
collects each estimate by itself (the listed number of passes; the first pays for the JVM's
warm-up), then all of them in one query as the job runs them, and prints seconds for each.

    .venv/bin/python bench/learning_stages.py \
        --history /tmp/rebalancer-bench-learning/history-10000000

The history is one bench/learning.py wrote (and compacted, as its first run does).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from pyspark.sql import DataFrame

from rebalancer.learning import estimation
from rebalancer.learning.inputs import find_inputs
from rebalancer.learning.jobs import (
    LearnOptions,
    build_session,
    configure_estimation,
    read_history_frame,
    shuffle_partitions,
)


def timed(label: str, work: Callable[[], object]) -> None:
    began = time.perf_counter()
    work()
    print(f"{label:40s} {time.perf_counter() - began:7.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--history", required=True, help="a history directory (compacted)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--passes", type=int, default=2, help="passes over the estimates")
    args = parser.parse_args()
    spark = build_session(
        LearnOptions(history=args.history, output="", master=args.master, driver_memory="2g")
    )
    inputs = find_inputs(args.history)
    configure_estimation(spark, inputs)
    shuffle = shuffle_partitions(spark)
    print(f"{inputs.rows:,} records in {len(inputs.files):,} files", flush=True)
    history = read_history_frame(spark, inputs)
    events: list[DataFrame] = []
    timed(
        "cache the events",
        lambda: events.append(
            estimation.history_events(history, shuffle, keys_unique=inputs.keys_unique)
        ),
    )
    cached = events[0]
    per_batch = estimation.batch_joins(cached)
    estimates: dict[str, Callable[[], DataFrame]] = {
        "group overall": lambda: estimation.group_overall(cached),
        "start-up latencies": lambda: estimation.startup_latencies(cached),
        "join offsets": lambda: estimation.join_offsets(per_batch),
        "start-ups outside rollouts": lambda: estimation.bursts(per_batch),
        "join spreads": lambda: estimation.join_spreads(per_batch),
        "rebalance cost": lambda: estimation.rebalance_costs(cached),
        "departures": lambda: estimation.departures(cached),
    }
    for number in range(1, args.passes + 1):
        for name, build in estimates.items():
            timed(f"pass {number}: {name}", lambda build=build: build().collect())
    whole = estimation.estimate(history, shuffle, keys_unique=inputs.keys_unique)
    timed(
        "all in one query (events cached)",
        lambda: (whole.profiles.collect(), whole.spreads.collect()),
    )
    spark.stop()


if __name__ == "__main__":
    main()
