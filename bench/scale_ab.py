"""Two versions of the operator from bench/scale.py runs, side by side: RSS above idle per
replica and CPU at rest, run by run, as a table, a JSON and a plot.

    .venv/bin/python bench/scale_ab.py --old A1.json A2.json --new B1.json B2.json \\
        --labels "old (6ac4214)" "new (15b0ddc)" --png bench/scale-metrics-ab.png \\
        --json bench/scale-metrics-ab.json

Run the two versions alternately on the same machine (the older one from a git worktree, its
replicas started with PYTHONPATH=<worktree>/operator), so that drift of the machine falls on
both sides.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def run_figures(result: dict[str, Any]) -> dict[str, Any]:
    """One run: per replica RSS above idle after the reconcile, and the replicas' CPU at rest."""
    replicas = list(result["replicas_detail"].values())
    return {
        "rss_above_idle_mb": [
            round(r["rss_mb"]["after_reconcile"] - r["rss_mb"]["idle"], 1) for r in replicas
        ],
        "rss_after_reconcile_mb": [r["rss_mb"]["after_reconcile"] for r in replicas],
        "cpu_at_rest_cores": round(sum(r["cpu_share_soak"] or 0.0 for r in replicas), 3),
        "all_status_after_last_s": result["all_status_after_last_s"],
        "soak_kafka_requests_per_interval": result["soak_kafka_requests_per_interval"],
        "shard_moves_during_reconcile": result["shard_moves_during_reconcile"],
    }


def plot(sides: dict[str, list[dict[str, Any]]], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    colors = ("tab:gray", "tab:blue")
    for place, runs in enumerate(sides.values()):
        for turn, run in enumerate(runs):
            x = place + 0.08 * (turn - (len(runs) - 1) / 2)
            rss = run["rss_above_idle_mb"]
            axes[0].scatter([x] * len(rss), rss, color=colors[place % 2])
            axes[1].scatter([x], [run["cpu_at_rest_cores"]], color=colors[place % 2])
    for ax, title in zip(
        axes, ("RSS above idle, per replica (MB)", "CPU at rest, all replicas (cores)"), strict=True
    ):
        ax.set_xticks(range(len(sides)), list(sides))
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs="+", required=True, type=Path)
    parser.add_argument("--new", nargs="+", required=True, type=Path)
    parser.add_argument("--labels", nargs=2, default=("old", "new"))
    parser.add_argument("--png", type=Path, default=Path("bench/scale-ab.png"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sides = {
        label: [run_figures(json.loads(path.read_text())) for path in paths]
        for label, paths in zip(args.labels, (args.old, args.new), strict=True)
    }
    for label, runs in sides.items():
        for turn, run in enumerate(runs, 1):
            print(
                f"{label} run {turn}: RSS above idle {run['rss_above_idle_mb']} MB, CPU at rest "
                f"{run['cpu_at_rest_cores']} cores, all status {run['all_status_after_last_s']} s "
                f"after the last creation, shard moves {run['shard_moves_during_reconcile']}"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(sides, indent=1) + "\n")
    plot(sides, args.png)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
