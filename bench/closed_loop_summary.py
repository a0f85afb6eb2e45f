"""Before and after, side by side, for bench/closed_loop.py's results: per scenario the median and
spread (min-max) of each figure, the ratio of the medians after/before, and a verdict.

    .venv/bin/python bench/closed_loop_summary.py bench/closed-loop-results.jsonl [--loop ID] \\
        [--plot bench/closed-loop.png]

Each line of the results file is one measured event of one loop (`loop` names it): a cold start
or a rolling update, `phase` "before" (the operator's defaults) or "after" (the learned
recommendation applied). Without --loop the newest loop in the file is summarised.

A figure is "better" after when its median fell, "worse" when it rose, "same" when it did not
move by more than what the bench resolves (TOLERANCE: a rebalance count must move by a whole
rebalance, a time or partition-second figure by 10 % of the larger median and by more than
the absolute slack of its kind). The learned settings win when no figure is worse in any
scenario and at least one is better. A recommendation that changed nothing in spec.policy
(besides turning learning on) neither wins nor loses: before and after ran the same settings,
and what moved is run-to-run spread.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollouts_summary import Spread, spread

Line = dict[str, Any]
SCENARIOS = ("cold-start", "rolling-update")
PHASES = ("before", "after")
# (key in a line's "measured", label, digits, absolute slack below which a move is noise)
FIGURES = (
    ("rebalances", "rebalances", 0, 0.5),
    ("time_to_stable_s", "time to Stable (s)", 1, 1.0),
    ("unowned_ps", "unowned partition-s", 0, 10.0),
)
RELATIVE_TOLERANCE = 0.10
COLOURS = {"before": "#7f7f7f", "after": "#2ca02c"}


@dataclass(frozen=True)
class Comparison:
    scenario: str
    figure: str
    label: str
    digits: int
    before: Spread | None
    after: Spread | None

    @property
    def ratio(self) -> float | None:
        """after/before of the medians; None without both; inf when only after is above 0."""
        if self.before is None or self.after is None:
            return None
        if self.before.median == 0:
            return 1.0 if self.after.median == 0 else float("inf")
        return self.after.median / self.before.median

    @property
    def verdict(self) -> str:
        """better, worse, same, or '-' when a side has no runs."""
        if self.before is None or self.after is None:
            return "-"
        slack = next(s for key, _, _, s in FIGURES if key == self.figure)
        difference = self.after.median - self.before.median
        bound = max(slack, RELATIVE_TOLERANCE * max(self.before.median, self.after.median))
        if abs(difference) <= bound:
            return "same"
        return "better" if difference < 0 else "worse"

    @property
    def change(self) -> str:
        """The move of the median, as the report states it ('+3.2 s (+18 %)')."""
        if self.before is None or self.after is None:
            return "-"
        difference = self.after.median - self.before.median
        absolute = f"{difference:+.{self.digits}f}"
        if self.before.median == 0:
            return absolute
        return f"{absolute} ({100 * difference / self.before.median:+.0f} %)"


REBALANCE_EVENTS = ("assigned", "revoked", "lost")


def rebalances_in(reports: Sequence[tuple[float, str, int]], t0: float, end: float) -> int:
    """New generations the members reported in [t0, end], from (time, event, generation).

    A generation is new when it differs from the last one reported before t0, not when it is
    above every one ever reported: a group that went Empty may be dropped by the broker and
    start again at generation 1 (the lab's groups commit no offsets), and the highest
    generation of an earlier life of the group would hide every rebalance of the next.
    """
    last = None
    seen: set[int] = set()
    for at, event, generation in sorted(reports, key=lambda item: item[0]):
        if event not in REBALANCE_EVENTS:
            continue
        if at < t0:
            last = generation
        elif at <= end and generation != last:
            seen.add(generation)
    return len(seen)


def measured(name: str, source: str = "measured") -> Any:
    """A figure of a line: what the bench measured, or ("simulated") the model's replay."""

    def figure(line: Line) -> float | None:
        value = (line.get(source) or {}).get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    return figure


def compare(lines: Sequence[Line], source: str = "measured") -> list[Comparison]:
    """Every (scenario, figure) of the loop's lines, before against after; `source`
    "simulated" compares the model's replays of the same pod timelines instead."""
    rows = []
    for scenario in SCENARIOS:
        of = {
            phase: [
                line
                for line in lines
                if line.get("scenario") == scenario and line.get("phase") == phase
            ]
            for phase in PHASES
        }
        for key, label, digits, _ in FIGURES:
            rows.append(
                Comparison(
                    scenario,
                    key,
                    label,
                    digits,
                    spread(of["before"], measured(key, source)),
                    spread(of["after"], measured(key, source)),
                )
            )
    return rows


def _shown(value: Spread | None, digits: int) -> str:
    if value is None:
        return "-"
    middle = f"{value.median:.{digits}f}"
    if value.runs < 2:
        return f"{middle} (n=1)"
    return f"{middle} [{value.low:.{digits}f}-{value.high:.{digits}f}] (n={value.runs})"


def _ratio_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value == float("inf"):
        return "inf"
    return f"{value:.2f}x"


def table(rows: Sequence[Comparison]) -> str:
    """The side-by-side table: one line per scenario and figure."""
    header = ("scenario", "figure", "before: median [min-max]", "after: median [min-max]",
              "after/before", "change", "verdict")  # fmt: skip
    body = [
        (
            row.scenario,
            row.label,
            _shown(row.before, row.digits),
            _shown(row.after, row.digits),
            _ratio_text(row.ratio),
            row.change,
            row.verdict,
        )
        for row in rows
    ]
    widths = [max(len(str(cells[i])) for cells in [header, *body]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(cell).ljust(width) for cell, width in zip(cells, widths, strict=True))

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(cells) for cells in body)]).rstrip()


@dataclass(frozen=True)
class Verdict:
    wins: bool
    better: tuple[Comparison, ...]
    worse: tuple[Comparison, ...]
    applied: bool = True  # the recommendation changed the fleet's spec.policy

    def text(self) -> str:
        def named(rows: Sequence[Comparison]) -> str:
            return "; ".join(
                f"{row.scenario} {row.label} {row.change} ({_ratio_text(row.ratio)})"
                for row in rows
            )

        if not self.applied:
            moved = self.better + self.worse
            spread = f" (moved: {named(moved)})" if moved else ""
            return (
                "nothing applied: the recommendation left spec.policy as it was, so before and "
                f"after ran the same settings and any difference is run-to-run spread{spread}"
            )
        if self.wins:
            return f"the learned settings WIN on Kafka: better on {named(self.better)}"
        if self.worse:
            better = f"; better on {named(self.better)}" if self.better else ""
            return f"the learned settings LOSE on Kafka: worse on {named(self.worse)}{better}"
        return "no difference: no figure moved beyond what the bench resolves"


def verdict(rows: Sequence[Comparison], applied: bool = True) -> Verdict:
    """`applied`: whether the recommendation changed spec.policy at all (a loop whose
    recommendation changed nothing has nothing to win or lose)."""
    better = tuple(row for row in rows if row.verdict == "better")
    worse = tuple(row for row in rows if row.verdict == "worse")
    return Verdict(applied and bool(better) and not worse, better, worse, applied)


def policy_changes(lines: Sequence[Line]) -> list[str] | None:
    """What applying the recommendation changed in spec.policy, besides turning learning on;
    None when the lines do not say (no recommendation recorded)."""
    for line in lines:
        applied = (line.get("recommendation") or {}).get("applied")
        if isinstance(applied, dict):
            moves = changed(applied.get("policy_before"), applied.get("policy_after"))
            return [move for move in moves if not move.startswith("learning.")]
    return None


def loops(lines: Sequence[Line]) -> list[str]:
    """The loops of a results file, oldest first."""
    seen: dict[str, None] = {}
    for line in lines:
        if isinstance(line.get("loop"), str):
            seen.setdefault(line["loop"], None)
    return list(seen)


def load(path: Path) -> list[Line]:
    return [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text]


def plot(
    rows: Sequence[Comparison],
    lines: Sequence[Line],
    path: Path,
    title: str,
    scenarios: Sequence[str] = SCENARIOS,
) -> Path | None:
    """One panel per figure: per scenario a bar before and after (median, whiskers min-max),
    every run as a dot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    figure, axes = plt.subplots(1, len(FIGURES), figsize=(4.2 * len(FIGURES), 4.2))
    width = 0.38
    for axis, (key, label, _, _) in zip(axes, FIGURES, strict=True):
        for offset, phase in enumerate(PHASES):
            xs, heights, low, high = [], [], [], []
            for index, scenario in enumerate(scenarios):
                row = next(r for r in rows if r.scenario == scenario and r.figure == key)
                value = row.before if phase == "before" else row.after
                x = index + (offset - 0.5) * width
                xs.append(x)
                heights.append(0.0 if value is None else value.median)
                low.append(0.0 if value is None else value.median - value.low)
                high.append(0.0 if value is None else value.high - value.median)
                runs = [
                    measured(key)(line)
                    for line in lines
                    if line.get("scenario") == scenario and line.get("phase") == phase
                ]
                dots = [v for v in runs if v is not None]
                axis.scatter([x] * len(dots), dots, s=10, color="black", zorder=3)
            axis.bar(xs, heights, width, yerr=[low, high], capsize=3, label=phase,
                     color=COLOURS[phase])  # fmt: skip
        axis.set_xticks(range(len(scenarios)), scenarios)
        axis.set_title(label)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend()
    figure.suptitle(f"{title}\nmedian, whiskers min-max, dots: runs")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def report(lines: Sequence[Line]) -> str:
    """The table and the verdict of one loop's lines, and the model's replay beside them."""
    rows = compare(lines)
    model = table(compare(lines, "simulated"))
    moves = policy_changes(lines)
    return (
        f"{table(rows)}\n\n{verdict(rows, moves is None or bool(moves)).text()}\n\n"
        f"The coordinator model's replay of the same pod timelines:\n{model}"
    )


def changed(before: Any, after: Any, path: str = "") -> list[str]:
    """What differs between two JSON documents, one 'path: old -> new' per leaf."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after)):
            found += changed(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return found
    return [] if before == after else [f"{path}: {before} -> {after}"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--loop", default=None, help="the loop to summarise (default: newest)")
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here")
    args = parser.parse_args(argv)
    lines = load(args.results)
    known = loops(lines)
    if not known:
        print(f"no loop in {args.results}")
        return 1
    loop = args.loop or known[-1]
    chosen = [line for line in lines if line.get("loop") == loop]
    print(f"loop {loop}: {len(chosen)} measured event(s)")
    print(report(chosen))
    if args.plot is not None:
        plot(compare(chosen), chosen, args.plot, f"closed loop {loop}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
