"""Scale runs side by side: how each cost grows with the number of groups.

    .venv/bin/python bench/scale_compare.py RUN.json [RUN.json ...] [--png PATH]

Each RUN.json is what bench/scale.py wrote beside its plot. Prints one row per figure and a
column per run (sorted by groups), the growth from the smallest run to the largest beside the
growth in groups, and draws each figure against the number of groups (log scale), with its
target where the target scales with the groups.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

Run = Mapping[str, Any]


def _churn(key: str) -> Callable[[Run], float | None]:
    return lambda run: (run.get("churn") or {}).get(key)


def _takeover(key: str) -> Callable[[Run], float | None]:
    return lambda run: (run.get("takeover") or {}).get(key)


# (figure, how to read it from a run, its target from the run: None where there is none)
FIGURES: tuple[tuple[str, Callable[[Run], float | None], Callable[[Run], float] | None], ...] = (
    ("groups created per second", lambda r: r["groups"] / r["created_in_s"], None),
    (
        "all with status after the last creation (s)",
        lambda r: r["all_status_after_last_s"],
        lambda r: 120.0,
    ),
    ("creation to status p50 (s)", lambda r: r["latency_s"].get("50"), None),
    ("creation to status p99 (s)", lambda r: r["latency_s"].get("99"), lambda r: 60.0),
    ("API requests per reconcile", lambda r: r["requests_per_reconcile"], None),
    (
        "soak API requests/s",
        lambda r: r["soak_requests_per_s"],
        lambda r: 0.02 * r["groups"] / r["interval_seconds"],
    ),
    (
        "soak Kafka requests per interval",
        lambda r: r["soak_kafka_requests_per_interval"],
        # The lab's one broker is every group's coordinator.
        lambda r: r["groups"] / 50 + 1,
    ),
    ("RSS per replica, largest (MB)", lambda r: r["rss_mb_largest_replica"], lambda r: 500.0),
    ("operators' CPU in the soak (cores)", lambda r: r.get("soak_cpu_share"), None),
    ("churn: API requests/s", _churn("requests_per_s"), None),
    ("churn: API requests per change", _churn("api_requests_per_change"), None),
    ("killed replica's groups served again, p50 (s)", _takeover("p50_s"), None),
    ("killed replica's groups served again, max (s)", _takeover("max_s"), lambda r: 15.0),
)


def figure_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per figure: its value in each run (None where the run did not measure it), its
    target in each, and the growth from the smallest run to the largest (None without both)."""
    ordered = sorted(runs, key=lambda run: run["groups"])
    rows = []
    for name, read, target in FIGURES:
        values = [_read(read, run) for run in ordered]
        first, last = values[0], values[-1]
        rows.append(
            {
                "figure": name,
                "values": values,
                "targets": [None if target is None else target(run) for run in ordered],
                "growth": None if not first or last is None else last / first,
            }
        )
    return rows


def _read(read: Callable[[Run], float | None], run: Run) -> float | None:
    try:
        value = read(run)
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return None if value is None else float(value)


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def table(runs: Sequence[Run]) -> str:
    ordered = sorted(runs, key=lambda run: run["groups"])
    groups = [run["groups"] for run in ordered]
    head = [
        "figure",
        *(
            f"{g:,} groups, {r.get('replicas', 1)} replica(s)"
            for g, r in zip(groups, ordered, strict=True)
        ),
        "growth",
        "target (largest)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append(
        "| groups | "
        + " | ".join(f"{g:,}" for g in groups)
        + f" | {groups[-1] / groups[0]:.1f}x | |"
    )
    for row in figure_rows(runs):
        growth = "-" if row["growth"] is None else f"{row['growth']:.2f}x"
        target = row["targets"][-1]
        cells = " | ".join(_cell(v) for v in row["values"])
        lines.append(f"| {row['figure']} | {cells} | {growth} | {_cell(target)} |")
    return "\n".join(lines)


def plot(runs: Sequence[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(runs, key=lambda run: run["groups"])
    groups = [run["groups"] for run in ordered]
    rows = [row for row in figure_rows(runs) if any(v is not None for v in row["values"])]
    columns = 4
    lines = -(-len(rows) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4 * columns, 3 * lines), squeeze=False)
    for ax, row in zip(axes.flat, rows, strict=False):
        points = [(g, v) for g, v in zip(groups, row["values"], strict=True) if v is not None]
        ax.plot([g for g, _ in points], [v for _, v in points], marker="o")
        limits = [(g, t) for g, t in zip(groups, row["targets"], strict=True) if t is not None]
        if limits:
            ax.plot([g for g, _ in limits], [t for _, t in limits], "r--", label="target")
            ax.legend(fontsize=7)
        ax.set_xscale("log")
        ax.set_xticks(groups, [f"{g:,}" for g in groups])
        ax.set_title(row["figure"], fontsize=9)
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    fig.suptitle("Scale: each cost against the number of ConsumerGroups")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="JSON files of bench/scale.py")
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args()
    runs = [json.loads(path.read_text()) for path in args.runs]
    print(table(runs))
    if args.png is not None:
        plot(runs, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
