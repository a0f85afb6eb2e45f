"""Summary of bench/rollouts.py's results files: per cell, medians and spreads, ratios, the model
check, the targets, and the plots.

    .venv/bin/python bench/rollouts_summary.py bench/rollouts-results.jsonl [more.jsonl ...] \\
        [--plots bench/rollouts]
    (the same as .venv/bin/python bench/rollouts.py --summarise [FILES])

Each line of a results file is one run (bench/rollouts.py says what is in it). Runs are grouped
by cell (scenario, N, partitions, assignor, jitter) and strategy, from however many files and
sittings. For each: the median and the spread (min-max) of the rebalances, the time to Stable
after the last pod was ready (and from t0), the unowned and the stop-the-world
partition-seconds; the ratios of the medians managed/naive and managed/tuned; and the coordinator
simulator's prediction for the same pod timelines beside the measured medians.

The model check compares medians: the rebalance count within +-1, and the time to Stable after
the last pod was ready within 20 % or TIME_RESOLUTION_S, whichever is more (the time from t0
would flatter the model: it includes the pods' own start times, which the replay is given). A
miss is flagged.

Plots, one PNG per figure family (PREFIX-rebalances.png, PREFIX-stable.png,
PREFIX-partition-seconds.png): one panel per N and assignor, a group of bars per scenario, one
bar per strategy (the median, whiskers min-max), the model's median as a black cross.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCENARIOS = ("cold-start", "statefulset-update", "deployment-update", "scale-up", "scale-down")
STRATEGIES = ("naive", "tuned", "managed")
COLOURS = {"naive": "#d62728", "tuned": "#1f77b4", "managed": "#2ca02c"}
COUNT_TOLERANCE = 1
TIME_TOLERANCE = 0.2
# Below this, a time difference is within what the bench resolves: it sees a pod Ready by
# polling the API every 0.25 s, behind the kubelet's status write.
TIME_RESOLUTION_S = 0.5

KIP848 = "consumer"  # the assignor value of KIP-848 cells (group.protocol=consumer)
CellKey = tuple[str, int, int, str, str]  # scenario, N, partitions, assignor, jitter
Line = dict[str, Any]


def cell_key(line: Line) -> CellKey:
    """A cell run with a heartbeat of its own (bench/rollouts.py --heartbeat-ms) is another
    cell: its assignor names the heartbeat too."""
    cell = line["cell"]
    assignor = cell["assignor"]
    if cell.get("heartbeat_ms") is not None:
        assignor += f" heartbeat {cell['heartbeat_ms']} ms"
    return (cell["scenario"], cell["pods"], cell["partitions"], assignor, cell["jitter"])


def cell_label(key: CellKey, short: bool = False) -> str:
    scenario, pods, partitions, assignor, jitter = key
    spread = "" if jitter == "0" else f" jitter {jitter}"
    if short:
        return f"{scenario}{spread}"
    return f"{scenario} N={pods} P={partitions} {assignor}{spread}"


def ordering(key: CellKey) -> tuple[Any, ...]:
    scenario, pods, partitions, assignor, jitter = key
    rank = SCENARIOS.index(scenario) if scenario in SCENARIOS else len(SCENARIOS)
    return (pods, assignor, rank, jitter, partitions)


# -- reading ------------------------------------------------------------------------------------


def load(paths: Sequence[Path]) -> list[Line]:
    lines: list[Line] = []
    for path in paths:
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            continue
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                # A sitting killed mid-write leaves half a line; the others still count.
                print(f"{path}:{number}: not JSON, skipped", file=sys.stderr)
                continue
            # Other benches' results (chaos, closed loop) match bench/*results*.jsonl too.
            if isinstance(line, dict) and {"cell", "strategy", "measured"} <= line.keys():
                lines.append(line)
    return lines


def grouped(lines: Sequence[Line]) -> dict[CellKey, dict[str, list[Line]]]:
    cells: dict[CellKey, dict[str, list[Line]]] = {}
    for line in lines:
        cells.setdefault(cell_key(line), {}).setdefault(line["strategy"], []).append(line)
    return dict(sorted(cells.items(), key=lambda item: ordering(item[0])))


# -- figures of one run -------------------------------------------------------------------------


def measured(name: str) -> Callable[[Line], float | None]:
    return lambda line: _number(line["measured"].get(name))


def sim_rebalances(line: Line) -> float | None:
    return _number(line.get("simulated", {}).get("rebalances"))


def sim_stable_after_ready(line: Line) -> float | None:
    """The model's time to Stable counted from the same moment as the measurement's."""
    stable = _number(line.get("simulated", {}).get("time_to_stable_s"))
    ready = _number(line["measured"].get("last_ready_s"))
    return None if stable is None or ready is None else stable - ready


def sim_stable_from_t0(line: Line) -> float | None:
    return _number(line.get("simulated", {}).get("time_to_stable_s"))


def sim_unowned(line: Line) -> float | None:
    return _number(line.get("simulated", {}).get("unowned_ps"))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    runs: int

    def text(self, digits: int = 1) -> str:
        middle = f"{self.median:.{digits}f}"
        if self.runs < 2 or self.low == self.high:
            return middle
        return f"{middle} [{self.low:.{digits}f}-{self.high:.{digits}f}]"


def spread(lines: Sequence[Line], figure: Callable[[Line], float | None]) -> Spread | None:
    values = [value for value in map(figure, lines) if value is not None]
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values))


def shown(value: Spread | None, digits: int = 1) -> str:
    return "-" if value is None else value.text(digits)


def ratio(numerator: Spread | None, denominator: Spread | None) -> str:
    if numerator is None or denominator is None:
        return "-"
    if denominator.median == 0:
        return "n/a" if numerator.median == 0 else "inf"
    return f"{numerator.median / denominator.median:.2f}"


# -- the model check ---------------------------------------------------------------------------


def model_check(lines: Sequence[Line]) -> tuple[str, bool]:
    """('ok' or what missed, whether anything missed) for one cell's strategy."""
    if lines and lines[0]["cell"]["assignor"] == KIP848 and spread(lines, sim_rebalances) is None:
        return "n/a (the KIP-848 model takes joins only)", False
    count, model_count = spread(lines, measured("rebalances")), spread(lines, sim_rebalances)
    time, model_time = (
        spread(lines, measured("stable_after_ready_s")),
        spread(lines, sim_stable_after_ready),
    )
    misses = []
    if count is None or model_count is None:
        misses.append("no model count")
    elif abs(count.median - model_count.median) > COUNT_TOLERANCE:
        misses.append(f"count off by {model_count.median - count.median:+g}")
    if time is None or model_time is None:
        misses.append("no model time")
    elif abs(model_time.median - time.median) > max(
        TIME_TOLERANCE * abs(time.median), TIME_RESOLUTION_S
    ):
        off = (model_time.median - time.median) / time.median if time.median else float("inf")
        misses.append(f"time off by {off:+.0%}")
    return ("ok" if not misses else "MISS: " + ", ".join(misses)), bool(misses)


# -- tables -------------------------------------------------------------------------------------

HEADER = (
    "| strategy | runs | rebalances | Stable after last ready (s) | Stable from t0 (s) | "
    "unowned partition-s | stop-the-world partition-s | partitions moved | model: rebalances | "
    "model: Stable after ready (s) | model check |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def strategy_row(strategy: str, lines: Sequence[Line]) -> tuple[str, bool]:
    unsettled = sum(1 for line in lines if not line["measured"].get("settled", True))
    runs = f"{len(lines)}" + (f" ({unsettled} did not settle)" if unsettled else "")
    check, missed = model_check(lines)
    row = (
        f"| {strategy} | {runs} | {shown(spread(lines, measured('rebalances')), 0)} | "
        f"{shown(spread(lines, measured('stable_after_ready_s')))} | "
        f"{shown(spread(lines, measured('time_to_stable_s')))} | "
        f"{shown(spread(lines, measured('unowned_ps')))} | "
        f"{shown(spread(lines, measured('stop_the_world_ps')))} | "
        f"{shown(spread(lines, measured('partitions_moved')), 0)} | "
        f"{shown(spread(lines, sim_rebalances), 0)} | "
        f"{shown(spread(lines, sim_stable_after_ready))} | {check} |"
    )
    return row, missed


RATIO_FIGURES: tuple[tuple[str, str], ...] = (
    ("rebalances", "rebalances"),
    ("Stable after last ready", "stable_after_ready_s"),
    ("unowned partition-s", "unowned_ps"),
    ("stop-the-world partition-s", "stop_the_world_ps"),
    ("partitions moved", "partitions_moved"),
)


def ratio_line(strategies: dict[str, list[Line]]) -> str:
    parts = []
    for title, name in RATIO_FIGURES:
        of = {s: spread(lines, measured(name)) for s, lines in strategies.items()}
        parts.append(
            f"{title} {ratio(of.get('managed'), of.get('naive'))} / "
            f"{ratio(of.get('managed'), of.get('tuned'))}"
        )
    return "ratios of medians, managed/naive / managed/tuned: " + "; ".join(parts)


def cell_block(key: CellKey, strategies: dict[str, list[Line]]) -> tuple[list[str], int]:
    out = [f"### {cell_label(key)}", "", HEADER]
    misses = 0
    for strategy in sorted(strategies, key=_strategy_rank):
        row, missed = strategy_row(strategy, strategies[strategy])
        out.append(row)
        misses += missed
    out += ["", ratio_line(strategies)]
    out += [f"- target: {line}" for line in targets(key, strategies)]
    out += [f"- against tuned: {line}" for line in against_tuned(key, strategies)]
    out += [f"- {line}" for line in plans_taken(strategies.get("managed", []))]
    out += [f"- physical limit: {line}" for line in cold_start_limits(key, strategies)]
    return out, misses


# Managed must not lose to the best hand configuration: rebalances and unowned partition-seconds
# at most tuned's (the latter within UNOWNED_SHARE), time to Stable at most TIME_SHARE times
# tuned's plus TIME_SLACK_S.
UNOWNED_SHARE = 0.05
TIME_SHARE = 1.1
TIME_SLACK_S = 0.5


def against_tuned(key: CellKey, strategies: dict[str, list[Line]]) -> list[str]:
    managed, tuned = strategies.get("managed", []), strategies.get("tuned", [])
    if not managed or not tuned:
        return []
    ours = {name: spread(managed, measured(name)) for name in FIGURES}
    theirs = {name: spread(tuned, measured(name)) for name in FIGURES}
    out = []
    for name, title, bound in (
        ("rebalances", "rebalances", lambda t: t),
        ("unowned_ps", "unowned partition-s", lambda t: t * (1 + UNOWNED_SHARE)),
        ("time_to_stable_s", "Stable from t0 (s)", lambda t: t * TIME_SHARE + TIME_SLACK_S),
    ):
        mine, best = ours[name], theirs[name]
        if mine is None or best is None:
            continue
        limit = bound(best.median)
        text = f"managed {title} {mine.median:.1f} <= {limit:.1f} (tuned {best.median:.1f})"
        out.append(_verdict(text, mine.median <= limit))
    return out


FIGURES = ("rebalances", "unowned_ps", "time_to_stable_s")


def plans_taken(managed: Sequence[Line]) -> list[str]:
    """The arrival plans the operator chose in the managed runs, with their predicted costs."""
    chosen = [line["measured"] for line in managed if line["measured"].get("plan")]
    if not chosen:
        return []
    names = sorted({m["plan"] for m in chosen})
    costs = ", ".join(
        f"{m['plan']} {m.get('plan_cost')} vs {m.get('runner_up')} {m.get('runner_up_cost')}"
        for m in chosen
    )
    return [f"plan chosen: {' / '.join(names)} in {len(chosen)} of {len(managed)} runs "
            f"(predicted cost, chosen vs runner-up: {costs})"]  # fmt: skip


def cold_start_limits(key: CellKey, strategies: dict[str, list[Line]]) -> list[str]:
    """How far each strategy is from what the protocol allows a cold start: no member before the
    first pod's container starts (every partition unowned until then) and no Stable group before
    the slowest pod's container has started (its consumer's own start-up is not measured here,
    so it is counted in the distance)."""
    if key[0] != "cold-start":
        return []
    out = []
    partitions = key[2]
    for strategy in sorted(strategies, key=_strategy_rank):
        lines = strategies[strategy]
        first = spread(lines, measured("first_start_s"))
        slowest = spread(lines, measured("slowest_start_s"))
        stable = spread(lines, measured("time_to_stable_s"))
        unowned = spread(lines, measured("unowned_ps"))
        if None in (first, slowest, stable, unowned):
            continue
        assert first and slowest and stable and unowned
        least = partitions * first.median
        out.append(
            f"{strategy}: Stable {stable.median:.1f} s, {stable.median - slowest.median:+.1f} s "
            f"from the slowest pod's start ({slowest.median:.1f} s); unowned "
            f"{unowned.median:.0f} partition-s, {unowned.median / least:.1f}x the "
            f"{least:.0f} before the first pod's start"
            if least
            else ""
        )
    return [line for line in out if line]


def _strategy_rank(strategy: str) -> int:
    return STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES)


def overview(cells: dict[CellKey, dict[str, list[Line]]]) -> list[str]:
    """One line per cell: the medians side by side, for the publication's main table."""
    out = [
        "| cell | rebalances n / t / m | Stable after ready (s) n / t / m | "
        "unowned partition-s n / t / m | managed/naive | managed/tuned |",
        "|---|---|---|---|---|---|",
    ]
    out += [overview_row(key, strategies) for key, strategies in cells.items()]
    out.append("(n / t / m: naive, tuned, managed; ratios of medians: rebalances, Stable after")
    out.append("ready, unowned partition-s)")
    return out


def overview_row(key: CellKey, strategies: dict[str, list[Line]]) -> str:
    of = {
        name: {s: spread(lines, measured(name)) for s, lines in strategies.items()}
        for name in ("rebalances", "stable_after_ready_s", "unowned_ps")
    }

    def medians(name: str, digits: int) -> str:
        values = [of[name].get(strategy) for strategy in STRATEGIES]
        return " / ".join("-" if v is None else f"{v.median:.{digits}f}" for v in values)

    def ratios(other: str) -> str:
        return ", ".join(ratio(each.get("managed"), each.get(other)) for each in of.values())

    return (
        f"| {cell_label(key)} | {medians('rebalances', 0)} | "
        f"{medians('stable_after_ready_s', 1)} | {medians('unowned_ps', 0)} | "
        f"{ratios('naive')} | {ratios('tuned')} |"
    )


# -- the targets the operator is held to ---------------------------------------------------


def targets(key: CellKey, strategies: dict[str, list[Line]]) -> list[str]:
    managed = strategies.get("managed")
    if not managed:
        return []
    if key[3] == KIP848:
        return _kip848_targets(managed, strategies.get("naive", []))
    scenario = key[0]
    count = spread(managed, measured("rebalances"))
    out: list[str] = []
    if count is None:
        return out
    if scenario == "cold-start":
        out.append(_verdict(f"managed {count.median:g} rebalance(s), exactly 1", count.median == 1))
        out += _cold_start_time(managed)
    elif scenario == "statefulset-update":
        out.append(_verdict(f"managed {count.median:g} rebalance(s), 0", count.median == 0))
    elif scenario == "scale-up":
        # The protocol's minimum for members joining a Stable group: one rebalance eager; two
        # cooperative (the first revokes what moves, the second assigns it).
        least = 2 if key[3] == "cooperative-sticky" else 1
        text = f"managed {count.median:g} rebalance(s), the protocol's minimum {least}"
        out.append(_verdict(text, count.median <= least))
    elif scenario == "deployment-update":
        batches = spread(managed, measured("batches"))
        if batches is not None:
            ok = count.median <= batches.median
            text = f"managed {count.median:g} rebalance(s) in {batches.median:g} batches, <= 1 each"
            out.append(_verdict(text, ok))
    naive = spread(strategies.get("naive", []), measured("stop_the_world_ps"))
    ours = spread(managed, measured("stop_the_world_ps"))
    if naive is not None and ours is not None:
        text = f"managed stop-the-world {ours.median:.1f} <= naive's {naive.median:.1f} / 10"
        out.append(_verdict(text, ours.median <= naive.median / 10))
    return out


def _kip848_targets(managed: Sequence[Line], naive: Sequence[Line]) -> list[str]:
    """KIP-848 has no join window to batch into: what pacing can still buy is fewer partitions
    moved and less time without an owner than naive."""
    out = []
    for title, name in (("partitions moved", "partitions_moved"), ("unowned", "unowned_ps")):
        ours, theirs = spread(managed, measured(name)), spread(naive, measured(name))
        if ours is not None and theirs is not None:
            text = f"managed {title} {ours.median:.1f} <= naive's {theirs.median:.1f}"
            out.append(_verdict(text, ours.median <= theirs.median))
    return out


def _cold_start_time(managed: Sequence[Line]) -> list[str]:
    stable = spread(managed, measured("time_to_stable_s"))
    slowest = spread(managed, measured("slowest_start_s"))
    window = spread(managed, measured("join_window_s"))
    if stable is None or slowest is None or window is None:
        return []
    bound = slowest.median + window.median + 1.0
    text = (
        f"managed Stable {stable.median:.1f} s from t0 <= slowest pod's start "
        f"{slowest.median:.1f} s + {window.median:g} s join window + 1 s = {bound:.1f} s"
    )
    return [_verdict(text, stable.median <= bound)]


def _verdict(text: str, ok: bool) -> str:
    return f"{text}: {'met' if ok else 'NOT met'}"


# -- plots -------------------------------------------------------------------------------------

FAMILIES: tuple[tuple[str, str, str, Callable[[Line], float | None], bool], ...] = (
    ("rebalances", "rebalances (generations)", "rebalances", sim_rebalances, False),
    (
        "stable",
        "time to Stable after the last pod is ready (s)",
        "stable_after_ready_s",
        sim_stable_after_ready,
        False,
    ),
    (
        # A rolling update's wall time: what "at most tuned's" and "1.2x naive's" are about.
        "wall",
        "time to Stable from the change or start, t0 (s)",
        "time_to_stable_s",
        sim_stable_from_t0,
        False,
    ),
    (
        "partition-seconds",
        "unowned partition-seconds from t0 (symlog)",
        "unowned_ps",
        sim_unowned,
        True,
    ),
)


def plot_all(cells: dict[CellKey, dict[str, list[Line]]], prefix: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots", file=sys.stderr)
        return []
    written = []
    for family, title, name, model, symlog in FAMILIES:
        path = prefix.with_name(f"{prefix.name}-{family}.png")
        figure = plot_family(plt, cells, title, measured(name), model, symlog)
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def plot_family(
    plt: Any,
    cells: dict[CellKey, dict[str, list[Line]]],
    title: str,
    figure_of: Callable[[Line], float | None],
    model: Callable[[Line], float | None],
    symlog: bool,
) -> Any:
    panels = sorted({(key[1], key[3]) for key in cells})
    rows = sorted({pods for pods, _ in panels})
    columns = sorted({assignor for _, assignor in panels})
    width = max(9.0, 7.5 * len(columns))
    figure, axes = plt.subplots(
        len(rows), len(columns), figsize=(width, 4.4 * len(rows) + 0.8), squeeze=False
    )
    for row, pods in enumerate(rows):
        for column, assignor in enumerate(columns):
            axis = axes[row][column]
            if (pods, assignor) not in panels:
                axis.set_visible(False)  # not measured (yet)
                continue
            panel = {key: of for key, of in cells.items() if (key[1], key[3]) == (pods, assignor)}
            draw_panel(axis, panel, figure_of, model, symlog)
            axis.set_title(f"N={pods}, {assignor}", fontsize=10)
    # One legend below the panels, where it covers no bar.
    first = axes[rows.index(panels[0][0])][columns.index(panels[0][1])]
    handles, labels = first.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9)
    figure.suptitle(f"Consumer-group rollouts on Apache Kafka: {title}\nmedian, whiskers min-max")
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    return figure


def draw_panel(
    axis: Any,
    panel: dict[CellKey, dict[str, list[Line]]],
    figure_of: Callable[[Line], float | None],
    model: Callable[[Line], float | None],
    symlog: bool,
) -> None:
    keys = list(panel)
    width = 0.8 / len(STRATEGIES)
    modelled = False
    for offset, strategy in enumerate(STRATEGIES):
        xs = [index + (offset - (len(STRATEGIES) - 1) / 2) * width for index in range(len(keys))]
        values = [spread(panel[key].get(strategy, []), figure_of) for key in keys]
        heights = [0.0 if v is None else v.median for v in values]
        whiskers = [
            [0.0 if v is None else v.median - v.low for v in values],
            [0.0 if v is None else v.high - v.median for v in values],
        ]
        axis.bar(xs, heights, width, yerr=whiskers, capsize=3, label=strategy,
                 color=COLOURS[strategy])  # fmt: skip
        predicted = [spread(panel[key].get(strategy, []), model) for key in keys]
        points = [(x, p.median) for x, p in zip(xs, predicted, strict=True) if p is not None]
        if points:
            axis.scatter(*zip(*points, strict=True), marker="x", color="black", zorder=3,
                         label=None if modelled else "Kafka model")  # fmt: skip
            modelled = True
    labels = [cell_label(key, short=True).replace(" jitter ", "\n") for key in keys]
    axis.set_xticks(range(len(keys)), labels, fontsize=8)
    if symlog:
        axis.set_yscale("symlog", linthresh=1)
    axis.grid(axis="y", alpha=0.3)


# -- entry points ---------------------------------------------------------------------------


def summarise(paths: Sequence[Path], plots: Path | None) -> int:
    lines = load(paths)
    if not lines:
        print("no runs in " + ", ".join(str(path) for path in paths))
        return 1
    cells = grouped(lines)
    sittings = sorted({(line["date"][:10], line["commit"][:10]) for line in lines})
    print(f"{len(lines)} run(s) in {len(cells)} cell(s) from " + ", ".join(map(str, paths)))
    print("dates and commits: " + ", ".join(f"{day} {commit}" for day, commit in sittings))
    misses = 0
    for key, strategies in cells.items():
        block, missed = cell_block(key, strategies)
        print()
        print("\n".join(block))
        misses += missed
    print()
    print("\n".join(overview(cells)))
    print()
    print(f"model check: {misses} strateg(ies) of {sum(map(len, cells.values()))} missed")
    if plots is not None:
        for path in plot_all(cells, plots):
            print(f"plot written to {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="results files (JSON lines)")
    parser.add_argument(
        "--plots",
        default=str(Path(__file__).with_name("rollouts")),
        help="plot path prefix ('' for none)",
    )
    args = parser.parse_args(argv)
    return summarise(args.results, Path(args.plots) if args.plots else None)


if __name__ == "__main__":
    raise SystemExit(main())
