"""What a new group costs the API server, before and after, from bench/scale.py runs: API
requests and PATCHes (of the object, of its status) per new group, the change handlers' runs,
creation to first status (p99) and the take-over, run by run, as a JSON and a plot.

    .venv/bin/python bench/scale_writes_ab.py --old A1.json A2.json --new B1.json B2.json \\
        --labels "old (ec8db71)" "new (f9edf09)" --png bench/scale-writes-ab.png \\
        --json bench/scale-writes-ab.json
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
    groups = result["groups"]
    requests = result["operator_requests_during_reconcile"]
    runs = result["kopf_runs_during_reconcile"]
    takeover = result.get("takeover") or {}
    return {
        "requests_per_reconcile": result["requests_per_reconcile"],
        "patch_object_per_group": round(requests.get("PATCH consumergroups", 0) / groups, 2),
        "patch_status_per_group": round(requests.get("PATCH consumergroups/status", 0) / groups, 2),
        "validate_runs": runs.get("handler validate", 0),
        "settings_runs": runs.get("handler settings_changed", 0),
        "created_in_s": result["created_in_s"],
        "all_status_after_last_s": result["all_status_after_last_s"],
        "latency_s": result["latency_s"],
        "takeover": {k: takeover.get(k) for k in ("groups", "p50_s", "max_s")},
    }


def plot(sides: dict[str, list[dict[str, Any]]], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for place, (runs, color) in enumerate(
        zip(sides.values(), ("tab:gray", "tab:blue"), strict=True)
    ):
        xs = [place] * len(runs)
        axes[0].scatter(xs, [r["requests_per_reconcile"] for r in runs], color=color)
        axes[1].scatter(xs, [r["latency_s"]["99"] for r in runs], color=color)
        axes[2].scatter(xs, [r["patch_object_per_group"] for r in runs], color=color)
        axes[2].scatter(xs, [r["patch_status_per_group"] for r in runs], color=color, marker="x")
    titles = (
        "API requests per new group",
        "creation to first status, p99 (s)",
        "PATCHes per new group (o object, x status)",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xticks(range(len(sides)), list(sides))
        ax.set_title(title, fontsize=9)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", nargs="+", type=Path, required=True)
    parser.add_argument("--new", nargs="+", type=Path, required=True)
    parser.add_argument("--labels", nargs=2, default=("old", "new"))
    parser.add_argument("--png", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sides = {
        label: [run_figures(json.loads(path.read_text())) for path in paths]
        for label, paths in zip(args.labels, (args.old, args.new), strict=True)
    }
    for label, runs in sides.items():
        for run in runs:
            print(label, json.dumps(run))
    if args.json:
        args.json.write_text(json.dumps(sides, indent=1) + "\n")
    if args.png:
        plot(sides, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
