"""Bench of `rebalancer learn`: time and peak memory per history size, and quality of the choice.

For each size (records), a seeded set of synthetic fleets (rebalancer.learning.fleets) writes a
history as the operator does (JSON lines), and `rebalancer learn --master local[2]` runs on a copy
of it twice in a child process whose process tree (Python driver, JVM, Python workers) is sampled
for memory: the first run compacts the operator's files and learns, the second (as every later
scheduled run) reads the compacted history; both must recommend the same. Then, for the fleets
of the first size, the recommended settings are scored against each fleet's true behaviour on
held-out simulator seeds, next to the optimum of an exhaustive search (every delay in 250 ms
steps to 20 s and beyond, every batch size, sessions in 2 s steps) and Kafka's defaults (3000 ms,
all pods at once, 45 s session).

    .venv/bin/python bench/learning.py                      # 1e5, 1e6, 1e7
    .venv/bin/python bench/learning.py --sizes 100000       # quick
    .venv/bin/python bench/learning.py --sizes 100000 --standalone   # and on a standalone cluster

With --standalone, the first size also runs on a Spark standalone cluster started from pyspark's
own scripts on loopback (a master and two workers of 1 core and 1g each), as
tests/learning/test_learning_standalone.py does.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rebalancer.learning.fleets import (
    Fleet,
    days_for,
    make_fleets,
    true_profile,
    write_history,
)
from rebalancer.learning.scoring import (
    DEFAULT_DELAY_MS,
    DEFAULT_SESSION_MS,
    GroupProfile,
    departures_cost_per_day_s,
    session_candidates,
    startup_cost_s,
)
from rebalancer_lab.ports import free_port as _free_port

ROOT = Path(__file__).resolve().parent.parent
FLEETS_PER_SIZE = {100_000: 24, 1_000_000: 80, 10_000_000: 240}
HELD_OUT_SEED = 424242
EXHAUSTIVE_DELAYS = (*(float(ms) for ms in range(0, 20001, 250)), 25000.0, 30000.0)
EXHAUSTIVE_SESSIONS = tuple(float(ms) for ms in range(6000, 300001, 2000))
HELD_OUT_SAMPLES = 16


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except OSError:
            continue
    total = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        stack.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


@dataclass
class JobRun:
    size: int
    records: int
    fleets: int
    seconds: float
    peak_bytes: int
    summary: dict[str, Any]


def generate(size: int, directory: Path, seed: int) -> tuple[list[Fleet], int]:
    """The history as the operator leaves it (JSON lines, a file per fleet and day), kept
    between runs; each job reads a copy (`fresh_copy`), since a job compacts what it reads."""
    fleets = make_fleets(FLEETS_PER_SIZE.get(size, max(size // 40_000, 4)), seed=seed)
    history = directory / f"operator-history-{size}"
    marker = history / "_records"
    if marker.exists():
        log(f"{size:,}: reusing {history}")
        return fleets, int(marker.read_text())
    days = days_for(fleets, size)
    log(f"{size:,}: generating {len(fleets)} fleets x {days:.0f} days into {history}")
    started = time.perf_counter()
    records = write_history(str(history), fleets, days, seed=seed, as_written=True)
    marker.write_text(str(records))
    log(f"{size:,}: {records:,} records written in {time.perf_counter() - started:.0f} s")
    return fleets, records


def fresh_copy(size: int, directory: Path) -> None:
    """history-SIZE: a copy of the operator's uncompacted history for the job to compact."""
    target = directory / f"history-{size}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(directory / f"operator-history-{size}", target)


def run_job(
    size: int,
    records: int,
    fleets: int,
    directory: Path,
    master: str = "local[2]",
    extra: Sequence[str] = (),
    label: str = "local",
) -> JobRun:
    output = directory / f"recommendations-{size}-{label}"
    command = [
        str(Path(sys.executable).parent / "rebalancer"),
        "learn",
        "--history",
        str(directory / f"history-{size}"),
        "--output",
        str(output),
        "--master",
        master,
        "--driver-memory",
        "2g",
        *extra,
    ]
    log(f"{size:,}: {' '.join(command[1:])}")
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.5):
            peak = max(peak, tree_rss_bytes(process.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert process.stdout is not None
    for line in process.stdout:
        if "learn [" in line or "tasks" in line or "learn:" in line or "compact" in line:
            log(f"{size:,}:   {line.strip()}")
    code = process.wait()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"rebalancer learn failed for {size:,} (exit {code})")
    summary = json.loads((output / "recommendations.json").read_text())
    log(f"{size:,}: {seconds:.1f} s, peak {peak / 2**20:,.0f} MiB")
    return JobRun(size, records, fleets, seconds, peak, summary)


@contextlib.contextmanager
def standalone_cluster(directory: Path) -> Iterator[str]:
    """A Spark standalone master and two 1-core/1g workers on loopback; yields the master URL."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    env["SPARK_DAEMON_MEMORY"] = "256m"
    port, web = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    commands = [
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(web)],
    ] + [
        [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
         "--port", str(_free_port()), "--webui-port", str(_free_port()), "--cores", "1",
         "--memory", "1g", "--work-dir", str(directory / f"spark-worker-{index}")]
        for index in range(2)
    ]  # fmt: skip
    processes = []
    try:
        for command in commands:
            processes.append(
                subprocess.Popen(
                    command,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{web}/json/", timeout=5) as reply:
                    state = json.load(reply)
                if sum(worker["state"] == "ALIVE" for worker in state["workers"]) == 2:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the standalone cluster did not start in 90 s")
            time.sleep(0.5)
        yield url
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            process.wait()


# ---- quality: the recommendation against the exhaustive optimum, on held-out seeds ----------


def evaluate_group(profile: GroupProfile) -> dict[str, Any]:
    """Held-out costs of every delay x batch (start-ups) and every session (departures)."""
    startup: dict[tuple[float, int], float] = {}
    for delay in EXHAUSTIVE_DELAYS:
        for batch in range(1, profile.members + 1):
            startup[(delay, batch)] = startup_cost_s(
                profile, delay, batch, HELD_OUT_SAMPLES, HELD_OUT_SEED
            )
    sessions = session_candidates(profile.heartbeat_interval_ms, EXHAUSTIVE_SESSIONS)
    if DEFAULT_SESSION_MS not in sessions:
        sessions = (*sessions, DEFAULT_SESSION_MS)
    departure = {
        session: departures_cost_per_day_s(profile, session, HELD_OUT_SEED) for session in sessions
    }
    return {"startup": startup, "departure": departure}


def _startup_at(table: dict[tuple[float, int], float], delay: float, batch: int) -> float:
    if (delay, batch) in table:
        return table[(delay, batch)]
    raise KeyError((delay, batch))


def quality(fleets: Sequence[Fleet], summary: dict[str, Any], workers: int) -> list[dict[str, Any]]:
    profiles = [true_profile(fleet) for fleet in fleets]
    log(f"quality: exhaustive search for {len(profiles)} held-out fleets ({workers} processes)")
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        tables = []
        for index, table in enumerate(pool.map(evaluate_group, profiles)):
            tables.append(table)
            if (index + 1) % 4 == 0 or index + 1 == len(profiles):
                log(f"quality:   {index + 1}/{len(profiles)} fleets searched")
    log(f"quality: searched in {time.perf_counter() - started:.0f} s")
    results: list[dict[str, Any]] = []
    for cluster in sorted({fleet.cluster for fleet in fleets}):
        members = [
            (fleet, profile, table)
            for fleet, profile, table in zip(fleets, profiles, tables, strict=True)
            if fleet.cluster == cluster
        ]

        def startup_total(delay: float, choose_batch: Any, members: list[Any] = members) -> float:
            return sum(
                profile.rollouts_per_day
                * _startup_at(table["startup"], delay, choose_batch(fleet, table, delay))
                for fleet, profile, table in members
            )

        def best_batch(fleet: Fleet, table: dict[str, Any], delay: float) -> int:
            return min(
                range(1, fleet.members + 1),
                key=lambda size: float(table["startup"][(delay, size)]),
            )

        optimum_delay = min(EXHAUSTIVE_DELAYS, key=lambda delay: startup_total(delay, best_batch))
        optimum_startup = startup_total(optimum_delay, best_batch)
        optimum_departures = sum(min(table["departure"].values()) for _, _, table in members)
        default_startup = startup_total(DEFAULT_DELAY_MS, lambda fleet, _t, _d: fleet.members)
        default_departures = sum(table["departure"][DEFAULT_SESSION_MS] for _, _, table in members)

        recommended = summary["clusters"].get(cluster, {}).get("initialRebalanceDelayMs")
        rec_startup = 0.0
        rec_departures = 0.0
        for fleet, profile, table in members:
            entry = summary["groups"].get(f"{fleet.namespace}/{fleet.name}", {})
            delay = entry.get("initialRebalanceDelayMs") or recommended or DEFAULT_DELAY_MS
            batch = entry.get("batchSize") or fleet.members
            if (delay, batch) not in table["startup"]:
                table["startup"][(delay, batch)] = startup_cost_s(
                    profile, delay, batch, HELD_OUT_SAMPLES, HELD_OUT_SEED
                )
            rec_startup += profile.rollouts_per_day * table["startup"][(delay, batch)]
            session = entry.get("sessionTimeoutMs") or DEFAULT_SESSION_MS
            if session not in table["departure"]:
                table["departure"][session] = departures_cost_per_day_s(
                    profile, session, HELD_OUT_SEED
                )
            rec_departures += table["departure"][session]
        results.append(
            {
                "cluster": cluster,
                "groups": len(members),
                "optimum_delay_ms": optimum_delay,
                "recommended_delay_ms": recommended,
                "optimum": optimum_startup + optimum_departures,
                "recommended": rec_startup + rec_departures,
                "default": default_startup + default_departures,
                "optimum_startup": optimum_startup,
                "recommended_startup": rec_startup,
                "default_startup": default_startup,
            }
        )
    return results


def plot(
    runs: Sequence[JobRun],
    results: Sequence[dict[str, Any]],
    path: Path,
    standalone: JobRun | None = None,
    compacting: Sequence[JobRun] = (),
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.8))
    sizes = [run.records for run in runs]
    left.loglog(sizes, [run.seconds for run in runs], marker="o", label="compacted history")
    if compacting:
        left.loglog(
            [run.records for run in compacting],
            [run.seconds for run in compacting],
            marker="^",
            label="first run (compacts the operator's files)",
        )
    if runs:
        base = runs[0]
        left.loglog(
            sizes,
            [base.seconds * size / base.records for size in sizes],
            linestyle="--",
            color="grey",
            label="linear from the smallest",
        )
    if standalone is not None:
        left.loglog(
            [standalone.records],
            [standalone.seconds],
            marker="s",
            linestyle="none",
            label="standalone cluster, 2 workers x 1 core",
        )
    left.set_xlabel("history records")
    left.set_ylabel("job wall time (s)")
    left.set_title("rebalancer learn, local[2]")
    left.legend()
    middle.semilogx(sizes, [run.peak_bytes / 2**30 for run in runs], marker="o", label="compacted")
    if compacting:
        middle.semilogx(
            [run.records for run in compacting],
            [run.peak_bytes / 2**30 for run in compacting],
            marker="^",
            label="first run",
        )
    middle.legend()
    middle.set_xlabel("history records")
    middle.set_ylabel("peak RSS of driver + JVM + workers (GiB)")
    middle.set_title("Peak memory")
    names = [result["cluster"].split(".")[0] for result in results]
    positions = range(len(results))
    right.bar(
        [p - 0.2 for p in positions],
        [r["recommended"] / r["optimum"] for r in results],
        width=0.4,
        label="learned / optimum",
    )
    right.bar(
        [p + 0.2 for p in positions],
        [r["default"] / r["optimum"] for r in results],
        width=0.4,
        label="Kafka defaults / optimum",
    )
    right.axhline(1.1, color="red", linestyle="--", label="+10 %")
    right.set_xticks(list(positions), names)
    right.set_ylabel("daily cost relative to the exhaustive optimum")
    right.set_title("Held-out fleets")
    right.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def reused_quality(
    fleets: Sequence[Fleet], summary: dict[str, Any], path: Path
) -> list[dict[str, Any]]:
    """The quality figures recorded in `path`, once this run's recommendations are shown to cost
    exactly what the recorded ones did (the optimum and the defaults do not depend on them)."""
    previous: list[dict[str, Any]] = json.loads(path.read_text())["quality"]
    for result in previous:
        cluster = result["cluster"]
        recommended = summary["clusters"].get(cluster, {}).get("initialRebalanceDelayMs")
        total = startup = 0.0
        for fleet in fleets:
            if fleet.cluster != cluster:
                continue
            profile = true_profile(fleet)
            entry = summary["groups"].get(f"{fleet.namespace}/{fleet.name}", {})
            delay = entry.get("initialRebalanceDelayMs") or recommended or DEFAULT_DELAY_MS
            batch = entry.get("batchSize") or fleet.members
            cost = profile.rollouts_per_day * startup_cost_s(
                profile, delay, batch, HELD_OUT_SAMPLES, HELD_OUT_SEED
            )
            session = entry.get("sessionTimeoutMs") or DEFAULT_SESSION_MS
            startup += cost
            total += cost + departures_cost_per_day_s(profile, session, HELD_OUT_SEED)
        same = math.isclose(total, result["recommended"], rel_tol=1e-9) and math.isclose(
            startup, result["recommended_startup"], rel_tol=1e-9
        )
        if recommended != result["recommended_delay_ms"] or not same:
            raise SystemExit(f"--reuse-quality: {cluster}'s recommendations changed; rerun without")
    log("quality: recorded figures reused (this run's recommendations cost exactly the same)")
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--directory", default="/tmp/rebalancer-bench-learning")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plot", default=str(ROOT / "bench" / "learning.png"))
    parser.add_argument("--json", default=str(ROOT / "bench" / "learning.json"))
    parser.add_argument(
        "--reuse-quality",
        action="store_true",
        help="keep the quality figures of --json if the first size recommends the same",
    )
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="also run the first size on a standalone cluster (two 1-core workers)",
    )
    args = parser.parse_args(argv)
    directory = Path(args.directory)
    directory.mkdir(parents=True, exist_ok=True)
    sizes = [int(float(size)) for size in args.sizes.split(",")]
    runs: list[JobRun] = []
    first_fleets: list[Fleet] = []
    compacting: list[JobRun] = []
    for size in sizes:
        fleets, records = generate(size, directory, args.seed)
        if not first_fleets:
            first_fleets = fleets
        fresh_copy(size, directory)
        # The first run after the operator wrote: it compacts, then learns. The runs after it
        # (every scheduled run, which finds one file per day and namespace plus what the
        # operator wrote since) are what `runs` measures.
        compacting.append(run_job(size, records, len(fleets), directory, label="compacting"))
        runs.append(run_job(size, records, len(fleets), directory))
        if runs[-1].summary["groups"] != compacting[-1].summary["groups"]:
            raise SystemExit(f"{size:,}: the compacted history recommends otherwise")
    standalone: JobRun | None = None
    if args.standalone:
        with standalone_cluster(directory) as url:
            standalone = run_job(
                sizes[0],
                runs[0].records,
                runs[0].fleets,
                directory,
                master=url,
                extra=("--conf", "spark.executor.memory=512m"),
                label="standalone",
            )
        same = (
            standalone.summary["clusters"] == runs[0].summary["clusters"]
            and standalone.summary["groups"] == runs[0].summary["groups"]
        )
        log(f"standalone: recommendations {'equal' if same else 'DIFFER from'} local mode's")
    print()
    print(
        f"{'records':>12} {'fleets':>7} {'seconds':>9} {'peak MiB':>9} {'records/s':>11}"
        f" {'first run s':>12} {'first MiB':>10}"
    )
    for run, first in zip(runs, compacting, strict=True):
        print(
            f"{run.records:>12,} {run.fleets:>7} {run.seconds:>9.1f} "
            f"{run.peak_bytes / 2**20:>9,.0f} {run.records / run.seconds:>11,.0f}"
            f" {first.seconds:>12.1f} {first.peak_bytes / 2**20:>10,.0f}"
        )
    for previous, current in itertools.pairwise(runs):
        print(
            f"{previous.records:,} -> {current.records:,}: "
            f"records x{current.records / previous.records:.1f}, "
            f"time x{current.seconds / previous.seconds:.2f}, "
            f"memory x{current.peak_bytes / max(previous.peak_bytes, 1):.2f}"
        )
    if args.reuse_quality:
        results = reused_quality(first_fleets, runs[0].summary, Path(args.json))
    else:
        results = quality(first_fleets, runs[0].summary, args.workers)
    print()
    print(
        f"{'cluster':<24} {'opt ms':>7} {'rec ms':>7} {'optimum':>9} {'learned':>9} {'default':>9}"
        f" {'learned/opt':>11} {'default/opt':>11}"
    )
    for result in results:
        print(
            f"{result['cluster']:<24} {result['optimum_delay_ms']:>7.0f} "
            f"{result['recommended_delay_ms'] or 0:>7.0f} {result['optimum']:>9.1f} "
            f"{result['recommended']:>9.1f} {result['default']:>9.1f} "
            f"{result['recommended'] / result['optimum']:>11.3f} "
            f"{result['default'] / result['optimum']:>11.3f}"
        )
    within = all(r["recommended"] <= 1.10 * r["optimum"] for r in results)
    better = all(
        r["recommended"] < r["default"] for r in results if r["default"] > 1.0001 * r["optimum"]
    )
    print()
    print(f"learned within 10% of the optimum on every cluster: {'yes' if within else 'NO'}")
    verdict = "yes" if better else "NO"
    print(f"learned strictly better than the defaults where they are not optimal: {verdict}")
    plot(runs, results, Path(args.plot), standalone, compacting)
    Path(args.json).write_text(
        json.dumps(
            {
                "runs": [
                    {
                        "records": run.records,
                        "fleets": run.fleets,
                        "seconds": run.seconds,
                        "peak_bytes": run.peak_bytes,
                        "first_run_seconds": first.seconds,
                        "first_run_peak_bytes": first.peak_bytes,
                    }
                    for run, first in zip(runs, compacting, strict=True)
                ],
                "standalone": None
                if standalone is None
                else {
                    "records": standalone.records,
                    "seconds": standalone.seconds,
                    "peak_bytes_driver": standalone.peak_bytes,
                    "workers": 2,
                    "cores_per_worker": 1,
                },
                "quality": results,
            },
            indent=2,
        )
    )
    print(f"plot: {args.plot}\njson: {args.json}")
    return 0 if within and better else 1


if __name__ == "__main__":
    raise SystemExit(main())
