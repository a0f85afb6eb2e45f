"""The coordinator model against Apache Kafka: the same start-up scenarios on the broker and on
`rebalancer.simulation`, side by side.

    .venv/bin/python bench/coordinator.py [--repeats 3] [--png bench/coordinator.png]

A broker of its own (`rebalancer_lab.broker.KafkaBroker`, group.initial.rebalance.delay.ms 3000)
and real confluent-kafka consumers (classic protocol, cooperative-sticky, session 6 s, heartbeat
2 s), each started at its scenario's offset. The broker's group coordinator logs every
"Preparing to rebalance group G" and "Stabilized group G generation N"; the figures come from
those lines: rebalances (generations) and the time from the first JoinGroup to the last
Stabilized. The model plays the same offsets with the same settings. Target: count within 1,
time within 20 %.
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    FixedOffsets,
    Scenario,
    plan_members,
    simulate,
)
from rebalancer_lab.broker import KafkaBroker

PARTITIONS = 8
SESSION_MS = 6000
HEARTBEAT_MS = 2000
DELAY_MS = 3000
QUIET_S = 10.0  # no new generation for this long: the group has settled
SCENARIOS: dict[str, tuple[float, ...]] = {
    "1 consumer": (0.0,),
    "4 consumers, 1 s apart": (0.0, 1.0, 2.0, 3.0),
    "4 consumers, 4 s apart": (0.0, 4.0, 8.0, 12.0),
    "8 consumers at once": (0.0,) * 8,
    "12 consumers over 6 s": tuple(i * 6.0 / 11 for i in range(12)),
}
_LINE = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:,]+)\] INFO .*?(?P<what>Preparing to rebalance|Stabilized) group "
    r"(?P<group>\S+)"
)


@dataclass(frozen=True)
class Outcome:
    rebalances: int
    stable_s: float


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def run_on_kafka(broker: KafkaBroker, topic: str, offsets: tuple[float, ...]) -> Outcome:
    group = f"coord-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()

    def member(offset: float) -> None:
        time.sleep(offset)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": "cooperative-sticky",
                "log_level": "0",
            }
        )
        consumer.subscribe([topic])
        while not stop.is_set():
            consumer.poll(0.2)
        consumer.close()

    threads = [threading.Thread(target=member, args=(offset,)) for offset in offsets]
    for thread in threads:
        thread.start()
    time.sleep(max(offsets) + DELAY_MS / 1000.0)
    deadline = time.time() + 180.0
    while True:
        lines = coordinator_lines(broker.log_path, group)
        last = lines[-1][0] if lines else 0.0
        settled = bool(lines) and lines[-1][1] == "Stabilized"
        if settled and time.time() - last > QUIET_S:
            break
        if time.time() > deadline:
            stop.set()
            raise RuntimeError(f"group {group} did not settle within 180 s: {lines}")
        time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    stabilized = [at for at, what in lines if what == "Stabilized"]
    first = next(at for at, what in lines if what == "Preparing to rebalance")
    return Outcome(len(stabilized), stabilized[-1] - first)


def coordinator_lines(log: Path, group: str) -> list[tuple[float, str]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if match and match["group"] == group:
            moment = datetime.datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f")
            found.append((moment.timestamp(), match["what"]))
    return found


def run_on_model(offsets: tuple[float, ...]) -> Outcome:
    result = simulate(
        Scenario(
            members=plan_members(len(offsets)),
            starts=FixedOffsets(tuple(offset * 1000.0 for offset in offsets)),
            coordinator=CoordinatorSettings(initial_rebalance_delay_ms=DELAY_MS),
            consumer=ConsumerSettings(
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                assignor="cooperative-sticky",
            ),
            partitions=PARTITIONS,
        )
    )
    first_join = min(r.start_s for r in result.rebalances)
    last_stable = max(r.end_s for r in result.rebalances if r.completed)
    return Outcome(result.rebalance_count, last_stable - first_join)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    with KafkaBroker(log_dir=tempfile.mkdtemp(prefix="bench-coordinator-")) as broker:
        say(f"Apache Kafka {broker.version} at {broker.bootstrap}, log {broker.log_path}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": "0"})
        topic = f"coordinator-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(timeout=30)
        for name, offsets in SCENARIOS.items():
            runs = []
            for repeat in range(args.repeats):
                runs.append(run_on_kafka(broker, topic, offsets))
                say(f"{name}, run {repeat + 1}: {runs[-1]}")
            model = run_on_model(offsets)
            rows.append((name, runs, model))
    print()
    print(
        "| scenario | Kafka rebalances (median, range) | model | Kafka first join to Stable "
        "(median, range) | model | within target |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs, model in rows:
        counts = [run.rebalances for run in runs]
        times = [run.stable_s for run in runs]
        count, seconds = statistics.median(counts), statistics.median(times)
        ok = abs(count - model.rebalances) <= 1 and abs(model.stable_s - seconds) <= 0.2 * seconds
        print(
            f"| {name} | {count:g} ({min(counts)} to {max(counts)}) | {model.rebalances} | "
            f"{seconds:.1f} s ({min(times):.1f} to {max(times):.1f}) | {model.stable_s:.1f} s | "
            f"{'yes' if ok else 'no'} |"
        )
    if args.png is not None:
        plot(rows, args.png)
    return 0


def plot(rows: list[tuple[str, list[Outcome], Outcome]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 4.5))
    names = [name for name, _, _ in rows]
    for index, (_, runs, model) in enumerate(rows):
        times = [run.stable_s for run in runs]
        axis.scatter([index - 0.1] * len(times), times, color="#1f77b4", s=20)
        axis.scatter([index + 0.1], [model.stable_s], color="#ff7f0e", marker="D", s=30)
    axis.set_xticks(range(len(names)), names, rotation=15, ha="right")
    axis.set_ylabel("first JoinGroup to Stable (s)")
    axis.set_title("Apache Kafka 4.4 (dots, each run) against the coordinator model (diamonds)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    say(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
