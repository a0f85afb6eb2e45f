"""The human-readable report of a learning run: markdown, and a PNG of the same choices."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from rebalancer.learning.choosing import ClusterChoice, GroupChoice
from rebalancer.learning.scoring import DEFAULT_DELAY_MS

TOP_GROUPS = 40


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render_markdown(
    summary: Mapping[str, Any],
    clusters: Sequence[ClusterChoice],
    choices: Sequence[GroupChoice],
    spreads: Sequence[Mapping[str, Any]],
) -> str:
    lines = [
        f"# Rebalancer recommendations, run {summary['runId']}",
        "",
        f"History `{summary['history']}`: {summary['records']:,} records in {summary['files']} "
        f"files ({len(summary['skippedFiles'])} skipped), generated {summary['generatedAt']}.",
        "",
        "Costs are seconds per day of time to Stable plus stop-the-world time (partition-seconds "
        "over the group's partitions), by the coordinator simulator, for the start-ups and "
        "departures the history shows. A group with rolling updates in its history counts its "
        "start-ups and rolling updates by the planner's cost instead: partition-seconds without "
        "an owner, over the group's partitions. Default: 3000 ms delay, all pods at once for a "
        "start-up and a quarter for a rolling update, 45 s session.",
        "",
    ]
    if summary["messages"]:
        lines += ["## Messages", ""] + [f"- {message}" for message in summary["messages"]] + [""]
    lines += _cluster_table(clusters)
    lines += _own_delay_table(choices)
    lines += _group_table(choices)
    lines += _spread_table(spreads)
    return "\n".join(lines) + "\n"


def _cluster_table(clusters: Sequence[ClusterChoice]) -> list[str]:
    lines = [
        "## Initial delay per cluster",
        "",
        "| cluster | groups | current ms | recommended ms | cost/day at default | cost/day |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for cluster in clusters:
        curve = dict(cluster.curve)
        at_default = curve.get(DEFAULT_DELAY_MS)
        chosen = curve.get(cluster.delay_ms) if cluster.delay_ms is not None else None
        lines.append(
            f"| {cluster.cluster} | {cluster.groups} | {_ms(cluster.current_delay_ms)} | "
            f"{_ms(cluster.delay_ms)} | {_ms(at_default)} | {_ms(chosen)} |"
        )
    return lines


def _own_delay_table(choices: Sequence[GroupChoice]) -> list[str]:
    """Streams groups, whose delay is their own; nothing when there are none."""
    own = sorted(
        (choice for choice in choices if choice.delay_scope == "group"),
        key=lambda choice: (choice.facts.namespace, choice.facts.name),
    )
    if not own:
        return []
    lines = [
        "",
        "## Initial delay per streams group",
        "",
        "A streams group (KIP-1071) does not wait the broker's delay: its delay is per group, "
        "its own `streams.initial.rebalance.delay.ms`, chosen from its own start-ups and applied "
        "as `spec.policy.groupConfigs.streams.initialRebalanceDelayMs`. Its cluster's delay "
        "above leaves it out.",
        "",
        "| group | cluster | current ms | recommended ms (per group) |",
        "|---|---|---:|---:|",
    ]
    for choice in own[:TOP_GROUPS]:
        facts = choice.facts
        lines.append(
            f"| {facts.namespace}/{facts.name} | {facts.cluster} | "
            f"{_ms(facts.current_delay_ms)} | {_ms(choice.delay_ms)} |"
        )
    return lines


def _group_table(choices: Sequence[GroupChoice]) -> list[str]:
    """The TOP_GROUPS groups with most to gain."""
    ranked = sorted(choices, key=lambda choice: -choice.improvement)
    lines = [
        "",
        f"## Groups (the {min(TOP_GROUPS, len(ranked))} with most to gain of {len(ranked)})",
        "",
        "| group | members | batch | session ms | cost/day default | cost/day | saved |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for choice in ranked[:TOP_GROUPS]:
        facts = choice.facts
        lines.append(
            f"| {facts.namespace}/{facts.name} | {facts.members} | "
            f"{choice.batch_size if choice.batch_size is not None else '-'} | "
            f"{_ms(choice.session_timeout_ms)} | {choice.default_cost_per_day_s:,.1f} | "
            f"{choice.cost_per_day_s:,.1f} | {choice.improvement:.0%} |"
        )
    return lines


def _spread_table(spreads: Sequence[Mapping[str, Any]]) -> list[str]:
    """The first 40 join spreads by group and batch size; nothing without spreads."""
    if not spreads:
        return []
    lines = [
        "",
        "## Join spreads per batch size (first 40)",
        "",
        "| group | batch members | batches | p50 spread ms | p90 spread ms |",
        "|---|---:|---:|---:|---:|",
    ]
    ordered = sorted(spreads, key=lambda row: (row["namespace"], row["name"], row["batch_members"]))
    for row in ordered[:40]:
        lines.append(
            f"| {row['namespace']}/{row['name']} | {row['batch_members']} | {row['batches']} | "
            f"{row['spread_p50_ms']:,.0f} | {row['spread_p90_ms']:,.0f} |"
        )
    return lines


def render_png(clusters: Sequence[ClusterChoice], choices: Sequence[GroupChoice]) -> bytes:
    """Left: each cluster's cost against the delay; right: default vs recommended per group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for cluster in clusters:
        if not cluster.curve:
            continue
        delays = [delay / 1000 for delay, _ in cluster.curve]
        costs = [cost for _, cost in cluster.curve]
        (line,) = left.plot(delays, costs, marker=".", label=cluster.cluster)
        if cluster.delay_ms is not None:
            chosen = dict(cluster.curve)[cluster.delay_ms]
            left.scatter(
                [cluster.delay_ms / 1000], [chosen], color=line.get_color(), s=80, zorder=3
            )
    left.axvline(DEFAULT_DELAY_MS / 1000, color="grey", linestyle="--", label="Kafka default")
    # The interesting delays are the short ones; a linear axis to 30 s would squash them.
    left.set_xscale("symlog", linthresh=1.0)
    left.set_xlim(left=0)
    left.set_xlabel("group.initial.rebalance.delay.ms (s)")
    left.set_ylabel("start-up cost per day (s)")
    left.set_title("Cluster start-up cost by initial delay (dot: chosen)")
    if clusters:
        left.legend(fontsize="small")
    ranked = sorted(choices, key=lambda choice: -choice.default_cost_per_day_s)[:20]
    labels = [choice.facts.name for choice in ranked]
    positions = range(len(ranked))
    right.barh(
        [p + 0.2 for p in positions],
        [c.default_cost_per_day_s for c in ranked],
        height=0.4,
        label="default",
    )
    right.barh(
        [p - 0.2 for p in positions],
        [c.cost_per_day_s for c in ranked],
        height=0.4,
        label="learned",
    )
    right.set_yticks(list(positions), labels, fontsize="small")
    right.invert_yaxis()
    right.set_xlabel("cost per day (s)")
    right.set_title("Groups: default settings vs learned (20 costliest)")
    if ranked:
        right.legend()
    else:
        right.text(0.5, 0.5, "no groups in the history", ha="center", transform=right.transAxes)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()
