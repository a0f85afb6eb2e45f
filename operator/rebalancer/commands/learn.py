"""`rebalancer learn`: learn the initial delay, batch sizes and session timeouts from history."""

from __future__ import annotations

import argparse
import math
import sys
import time

from rebalancer.commands.extras import missing_extra_message

DEFAULT_MASTER = "local[*]"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "learn",
        help="recommend delay, batch size and session timeout from the rebalance history (Spark)",
        description=(
            "Read the rebalance history (docs/history.md), estimate each group's start-up "
            "spreads, rebalance cost and departures, score candidate settings on the coordinator "
            "simulator, and write recommendations (recommendations.json for the operator, "
            "Parquet, and a markdown + PNG report). The previous recommendations are replaced "
            "only when the whole run succeeds."
        ),
    )
    _add_location_arguments(parser)
    _add_scoring_arguments(parser)
    parser.set_defaults(command_module=sys.modules[__name__])


def _add_location_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for where the history is read, the output written and Spark run."""
    parser.add_argument(
        "--history",
        required=True,
        help="history root: a directory, a URL Spark reads itself (s3a://, hdfs://, gs://, "
        "abfs://: listed and read by the executors) or another fsspec URL (read in the driver)",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="where recommendations go: a directory or fsspec URL",
    )
    parser.add_argument(
        "--master",
        default=DEFAULT_MASTER,
        help=f"Spark master: local[N], spark://HOST:PORT, k8s://https://... (default "
        f"{DEFAULT_MASTER}); executors need this package installed",
    )
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting, repeatable (for example spark.executor.instances=4)",
    )


def _add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the scoring and the history kept."""
    parser.add_argument(
        "--samples",
        type=int,
        default=16,
        help="simulated start-ups per candidate (default 16; more is steadier and slower)",
    )
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument(
        "--scoring-partitions",
        type=int,
        default=None,
        help="Spark tasks that score candidates (default: 4 per core, or 1 per 8 groups)",
    )
    parser.add_argument(
        "--task-restore-ms",
        type=float,
        default=None,
        help="for streams groups: ms from a moved task's new owner's heartbeat until it processes "
        "the task (restoring its store, creating the task; default: 6000, measured on the example "
        "application, since the history records no hand-overs)",
    )
    parser.add_argument(
        "--keep-runs", type=int, default=5, help="past runs kept under OUTPUT/runs (default 5)"
    )
    parser.add_argument(
        "--no-compact",
        dest="compact",
        action="store_false",
        help="read the history as it is, without first compacting each partition's files into "
        "one Parquet file (for a history this job may not write to)",
    )


def parse_conf(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    parsed: list[tuple[str, str]] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: use KEY=VALUE")
        parsed.append((key.strip(), value))
    return tuple(parsed)


def check_numbers(args: argparse.Namespace) -> None:
    """Refuse numeric flags out of range (ValueError naming the flag and the fix)."""
    if args.samples < 1:
        raise ValueError("--samples must be at least 1")
    restore = args.task_restore_ms
    if restore is not None and not (restore >= 0 and math.isfinite(restore)):
        raise ValueError(
            f"--task-restore-ms {restore}: a hand-over takes a finite 0 ms or more; "
            "set it to the ms a moved task takes to be processed again by its new owner"
        )


def run(args: argparse.Namespace) -> int:
    missing = missing_extra_message("learn", "learning")
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    # Checked before Spark starts: a bad master or URL would otherwise fail inside the JVM.
    from rebalancer.learning.locations import location_problem, master_problem

    try:
        conf = parse_conf(args.conf)
        check_numbers(args)
        for problem in (
            master_problem(args.master),
            location_problem("--history", args.history, spark_reads=True),
            location_problem("--output", args.output, spark_reads=False),
        ):
            if problem is not None:
                raise ValueError(problem)
    except ValueError as error:
        print(f"rebalancer learn: {error}", file=sys.stderr)
        return 2
    # Spark is heavy to import, and not in the base install: only this subcommand pays for it.
    from rebalancer.learning.jobs import LearnOptions, learn

    options = LearnOptions(
        history=args.history,
        output=args.output,
        master=args.master,
        driver_memory=args.driver_memory,
        conf=conf,
        samples=args.samples,
        seed=args.seed,
        scoring_partitions=args.scoring_partitions,
        keep_runs=args.keep_runs,
        compact=args.compact,
        task_restore_ms=args.task_restore_ms,
    )
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"{time.perf_counter() - started:7.1f}s {line}", flush=True)

    try:
        result = learn(options, progress=progress)
    except Exception as error:  # whatever broke, the previous recommendations stay in place
        print(
            f"rebalancer learn: failed: {type(error).__name__}: {str(error)[:500]}; the previous "
            f"recommendations under {args.output} are left in place",
            file=sys.stderr,
        )
        return 1
    for message in result.messages:
        print(f"rebalancer learn: {message}", file=sys.stderr)
    if result.output is not None:
        print(f"recommendations: {result.output.location}/recommendations.json")
        print(f"report:          {result.output.location}/report.md")
    return 0
