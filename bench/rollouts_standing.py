"""Where managed stands against tuned and naive in every cell measured: the table at the top of
BENCHMARKS.md, and its plot.

    .venv/bin/python bench/rollouts_standing.py bench/*results*.jsonl \\
        [--png bench/rollouts-standing.png]

For each cell (scenario, N, partitions, assignor, jitter) and strategy it keeps the newest
sitting only (the runs of the commit measured last), so a cell measured again after a change
stands with its new figures. It prints one row per cell: the medians of managed beside tuned's
and naive's, the ratios managed/tuned and managed/naive, whether managed is within tuned's
rebalances, unowned partition-seconds (+5 %) and time to Stable (1.1x + 0.5 s), and for cold
starts how far managed is from the protocol's limit (bench/rollouts_summary.cold_start_limits).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollouts_summary import (
    TIME_SHARE,
    TIME_SLACK_S,
    UNOWNED_SHARE,
    CellKey,
    Line,
    cell_label,
    grouped,
    load,
    measured,
    spread,
)

FIGURES = (("rebalances", 0), ("time_to_stable_s", 1), ("unowned_ps", 0))
# Managed runs whose gate held only the join (bench/rollouts.py --gate-holds Join) stand in
# rows of their own: that gate needs consumers that wait for its file.
JOIN_HELD = "managed-join"
JOIN_HELD_LABEL = " [gate holds the join]"


def split_join_held(lines: Sequence[Line]) -> list[Line]:
    """Managed runs behind a join-holding gate under a strategy of their own."""
    out = []
    for line in lines:
        holds = (line.get("setup") or {}).get("gate_holds", "Pod")
        held = line["strategy"] == "managed" and holds == "Join"
        out.append({**line, "strategy": JOIN_HELD} if held else line)
    return out


Row = tuple[str, CellKey, dict[str, list[Line]]]


def rows(cells: dict[CellKey, dict[str, list[Line]]]) -> list[Row]:
    """One row per cell and kind of managed gate: its label, key, and strategies' runs (each
    strategy's newest sitting; naive and tuned from managed's own where they ran there)."""
    kept = newest_sittings(cells)
    out: list[Row] = []
    for key, strategies in kept.items():
        for name, label in (("managed", ""), (JOIN_HELD, JOIN_HELD_LABEL)):
            if name in strategies:
                chosen = {**beside(cells, kept, key, strategies[name]), "managed": strategies[name]}
                out.append((cell_label(key) + label, key, chosen))
    return out


def newest_sittings(
    cells: dict[CellKey, dict[str, list[Line]]],
) -> dict[CellKey, dict[str, list[Line]]]:
    """Each cell's strategies with the runs of their newest commit only; naive and tuned from
    the commit managed was measured at when they ran beside it there (the machine's load then
    hit them alike), else their own newest."""
    kept: dict[CellKey, dict[str, list[Line]]] = {}
    for key, strategies in cells.items():
        kept[key] = {}
        for strategy, lines in strategies.items():
            newest = max(lines, key=lambda line: line["date"])["commit"]
            kept[key][strategy] = [line for line in lines if line["commit"] == newest]
    return kept


def beside(
    cells: dict[CellKey, dict[str, list[Line]]],
    kept: dict[CellKey, dict[str, list[Line]]],
    key: CellKey,
    managed: Sequence[Line],
) -> dict[str, list[Line]]:
    """naive's and tuned's runs for a row of `managed`: those of managed's own sitting if any."""
    commits = {line["commit"] for line in managed}
    out: dict[str, list[Line]] = {}
    for strategy in ("naive", "tuned"):
        same = [line for line in cells[key].get(strategy, []) if line["commit"] in commits]
        out[strategy] = same or kept[key].get(strategy, [])
    return out


def median(lines: Sequence[Line], name: str) -> float | None:
    found = spread(lines, measured(name))
    return None if found is None else found.median


def within_tuned(managed: Sequence[Line], tuned: Sequence[Line]) -> dict[str, bool | None]:
    bounds = {
        "rebalances": lambda t: t,
        "unowned_ps": lambda t: t * (1 + UNOWNED_SHARE),
        "time_to_stable_s": lambda t: t * TIME_SHARE + TIME_SLACK_S,
    }
    verdicts: dict[str, bool | None] = {}
    for name, bound in bounds.items():
        ours, theirs = median(managed, name), median(tuned, name)
        verdicts[name] = None if ours is None or theirs is None else ours <= bound(theirs) + 1e-9
    return verdicts


def limit_distance(key: CellKey, managed: Sequence[Line]) -> str:
    """A cold start: managed's Stable past the slowest pod's start, and its unowned
    partition-seconds over those no member could have owned (before the first pod's start)."""
    if key[0] != "cold-start":
        return ""
    stable, slowest = median(managed, "time_to_stable_s"), median(managed, "slowest_start_s")
    unowned, first = median(managed, "unowned_ps"), median(managed, "first_start_s")
    if None in (stable, slowest, unowned, first):
        return ""
    assert stable is not None and slowest is not None and unowned is not None and first is not None
    text = f"+{stable - slowest:.1f} s"
    if first > 0:
        text += f", {unowned / (key[2] * first):.1f}x"
    return text


def row(label: str, key: CellKey, strategies: dict[str, list[Line]]) -> str:
    managed = strategies.get("managed", [])
    tuned, naive = strategies.get("tuned", []), strategies.get("naive", [])
    cells = []
    for name, digits in FIGURES:
        values = [median(lines, name) for lines in (naive, tuned, managed)]
        cells.append(" / ".join("-" if v is None else f"{v:.{digits}f}" for v in values))
    ratios = []
    for other in (tuned, naive):
        parts = []
        for name, _ in FIGURES:
            ours, theirs = median(managed, name), median(other, name)
            parts.append("-" if ours is None or not theirs else f"{ours / theirs:.2f}")
        ratios.append(", ".join(parts))
    verdicts = within_tuned(managed, tuned)
    misses = [name for name, ok in verdicts.items() if ok is False]
    verdict = (
        "yes"
        if not misses and all(ok is not None for ok in verdicts.values())
        else ("no: " + ", ".join(_short(name) for name in misses) if misses else "-")
    )
    sitting = max((line["date"][:10] for line in managed), default="-")
    return (
        f"| {label} | {cells[0]} | {cells[1]} | {cells[2]} | {ratios[0]} | "
        f"{ratios[1]} | {verdict} | {limit_distance(key, managed) or '-'} | {sitting} |"
    )


def _short(name: str) -> str:
    return {"rebalances": "rebalances", "unowned_ps": "unowned", "time_to_stable_s": "time"}[name]


def table(cells: dict[CellKey, dict[str, list[Line]]]) -> list[str]:
    out = [
        "| cell | rebalances n / t / m | Stable from t0 (s) n / t / m | unowned partition-s "
        "n / t / m | managed/tuned | managed/naive | managed within tuned | cold start: from the "
        "limit | managed measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    out += [row(label, key, strategies) for label, key, strategies in rows(cells)]
    return out


def plot(cells: dict[CellKey, dict[str, list[Line]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown_rows = [row for row in rows(cells) if "tuned" in row[2]]
    figure, axis = plt.subplots(figsize=(11, 0.32 * len(shown_rows) + 1.6))
    offsets = {"rebalances": -0.27, "time_to_stable_s": 0.0, "unowned_ps": 0.27}
    colours = {"rebalances": "#9467bd", "time_to_stable_s": "#ff7f0e", "unowned_ps": "#17becf"}
    titles = {"rebalances": "rebalances", "time_to_stable_s": "time to Stable",
              "unowned_ps": "unowned partition-s"}  # fmt: skip
    for name, offset in offsets.items():
        values: list[Any] = []
        for _, _, strategies in shown_rows:
            ours = median(strategies["managed"], name)
            theirs = median(strategies["tuned"], name)
            values.append(ours / theirs if ours is not None and theirs else float("nan"))
        shown = [min(value, 3.0) for value in values]
        axis.barh([i + offset for i in range(len(shown_rows))], shown, height=0.26,
                  color=colours[name], label=titles[name])  # fmt: skip
    axis.axvline(1.0, color="black", linewidth=1)
    axis.set_yticks(range(len(shown_rows)))
    axis.set_yticklabels([label for label, _, _ in shown_rows], fontsize=7)
    axis.invert_yaxis()
    axis.set_xlabel("managed / tuned (medians; 1 = the best hand configuration; capped at 3)")
    axis.set_title("Managed against the best hand configuration, every cell measured")
    axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="results files (JSON lines)")
    parser.add_argument("--png", type=Path, default=None, help="write the plot here")
    args = parser.parse_args(argv)
    lines = split_join_held(load(args.results))
    if not lines:
        print("no runs", file=sys.stderr)
        return 1
    cells = grouped(lines)
    print("\n".join(table(cells)))
    if args.png is not None:
        plot(cells, args.png)
        print(f"plot written to {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
