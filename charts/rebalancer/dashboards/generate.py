"""Write the Grafana dashboard of the operator's metrics to rebalancer.json next to this file.

Run with `.venv/bin/python charts/rebalancer/dashboards/generate.py` after changing a panel or a
metric; tests/deploy/chart/test_dashboard.py fails while the committed JSON differs from this
output.
The state codes come from rebalancer.metrics so the panel cannot drift from the exporter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    dashboard,
    prometheus,
    stat,
    statetimeline,
    timeseries,
)
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    GridPos,
    ValueMap,
    ValueMappingResult,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from rebalancer.metrics import GROUP_STATES, ROLLOUT_PHASES

OUTPUT = Path(__file__).with_name("rebalancer.json")
UID = "rebalancer-groups"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
GROUP = 'namespace=~"$namespace", consumergroup=~"$consumergroup", group_id=~"$group_id"'
BY_GROUP = "namespace, consumergroup, group_id"
# Process series carry no group label: these keep the operator's only (its job and instance).
OPERATOR = "and on (job, instance) rebalancer_operator_info"
LEGEND = "{{namespace}}/{{consumergroup}}"
STATE_COLORS = {
    "Stable": "green",
    "PreparingRebalance": "orange",
    "CompletingRebalance": "yellow",
    "Assigning": "orange",
    "Reconciling": "yellow",
    "Empty": "blue",
    "Dead": "red",
    "Unknown": "text",
}


def query(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


def state_code_expr() -> str:
    """One series per group whose value is the state's position in GROUP_STATES, plus one.

    A state timeline then shows one row per group, coloured by state, instead of one row per
    (group, state) pair.
    """
    terms = [
        f'{code} * max by ({BY_GROUP}) (rebalancer_group_state{{{GROUP}, state="{state}"}})'
        for code, state in enumerate(GROUP_STATES, start=1)
    ]
    return "\n+ ".join(terms)


def state_mappings() -> list[Any]:
    options = {
        str(code): ValueMappingResult(text=state, color=STATE_COLORS.get(state, "text"), index=i)
        for i, (code, state) in enumerate(enumerate(GROUP_STATES, start=1))
    }
    return [ValueMap(options=options)]


PHASE_COLORS = {
    "Idle": "text",
    "Planning": "blue",
    "BatchOpening": "yellow",
    "BatchJoining": "orange",
    "BatchSettling": "yellow",
    "Completed": "green",
    "Failed": "red",
    "Paused": "purple",
}


def phase_code_expr() -> str:
    """One series per group whose value is the rollout phase's position in ROLLOUT_PHASES, plus
    one, as state_code_expr does for the group state."""
    terms = [
        f'{code} * max by ({BY_GROUP}) (rebalancer_rollout_phase{{{GROUP}, phase="{phase}"}})'
        for code, phase in enumerate(ROLLOUT_PHASES, start=1)
    ]
    return "\n+ ".join(terms)


def phase_mappings() -> list[Any]:
    options = {
        str(code): ValueMappingResult(text=phase, color=PHASE_COLORS.get(phase, "text"), index=i)
        for i, (code, phase) in enumerate(enumerate(ROLLOUT_PHASES, start=1))
    }
    return [ValueMap(options=options)]


def quantile_expr(quantile: float, metric: str, window: str) -> str:
    return (
        f"histogram_quantile({quantile}, sum by ({BY_GROUP}, le) "
        f"(rate({metric}_bucket{{{GROUP}}}[{window}])))"
    )


def place(x: int, y: int, w: int, h: int) -> GridPos:
    return GridPos(h=h, w=w, x=x, y=y)


def group_timeseries(
    title: str, description: str, expr: str, unit: str, pos: GridPos
) -> timeseries.Panel:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .with_target(query(expr, LEGEND))
        .unit(unit)
        .min(0)
        .grid_pos(pos)
    )


def variables() -> list[Any]:
    all_option = VariableOption(selected=True, text="All", value="$__all")
    return [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dashboard.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query("label_values(rebalancer_group_members, namespace)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(all_option),
        dashboard.QueryVariable("consumergroup")
        .label("ConsumerGroup")
        .datasource(DATASOURCE)
        .query('label_values(rebalancer_group_members{namespace=~"$namespace"}, consumergroup)')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(all_option),
        dashboard.QueryVariable("group_id")
        .label("Kafka group")
        .datasource(DATASOURCE)
        .query(
            "label_values(rebalancer_group_members"
            '{namespace=~"$namespace", consumergroup=~"$consumergroup"}, group_id)'
        )
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(all_option),
    ]


def build() -> dashboard.Dashboard:
    board = (
        dashboard.Dashboard("Rebalancer: consumer groups")
        .uid(UID)
        .description(
            "Kafka consumer groups observed by Rebalancer: rebalances and their causes, time to "
            "Stable and partitions without an owner, rollouts, join gates and enforced "
            "rebalances, members, generation, state, assignment, lag, and the operator's own "
            "health."
        )
        .tags(["kafka", "rebalancer"])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .time("now-6h", "now")
        .refresh("30s")
    )
    for variable in variables():
        board = board.with_variable(variable)

    board = board.with_row(dashboard.Row("Rebalances").grid_pos(place(0, 0, 24, 1)))
    board = board.with_panel(
        timeseries.Panel()
        .title("Rebalances by cause")
        .description(
            "Rebalances detected in each interval, by group and cause (member joined or left, "
            "rejoin, state change). Bursts usually line up with deploys, scale-ups and new topics."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                "sum by (namespace, consumergroup, cause) "
                f"(increase(rebalancer_rebalances_total{{{GROUP}}}[$__rate_interval]))",
                LEGEND + " {{cause}}",
            )
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .fill_opacity(80)
        .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        .unit("short")
        .min(0)
        .grid_pos(place(0, 1, 16, 8))
    )
    board = board.with_panel(
        stat.Panel()
        .title("Rebalances in range")
        .description("Rebalances per group over the dashboard's time range.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                "sum by (namespace, consumergroup) "
                f"(increase(rebalancer_rebalances_total{{{GROUP}}}[$__range]))",
                LEGEND,
            ).instant()
        )
        .unit("short")
        .decimals(0)
        .graph_mode(common.BigValueGraphMode.NONE)
        .grid_pos(place(16, 1, 8, 4))
    )
    board = board.with_panel(
        stat.Panel()
        .title("Time since last rebalance")
        .description("Time since the last rebalance recorded for each group.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"time() - rebalancer_group_last_rebalance_timestamp_seconds{{{GROUP}}}",
                LEGEND,
            ).instant()
        )
        .unit("s")
        .graph_mode(common.BigValueGraphMode.NONE)
        .grid_pos(place(16, 5, 8, 4))
    )

    board = board.with_row(dashboard.Row("Rebalance cost").grid_pos(place(0, 9, 24, 1)))
    board = board.with_panel(
        timeseries.Panel()
        .title("Time to Stable")
        .description(
            "Per rebalance, from the first observation of the group rebalancing until the first "
            "observation of it Stable with every partition assigned: median and 95th "
            "percentile over the hour before each point."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                quantile_expr(0.5, "rebalancer_rebalance_time_to_stable_seconds", "1h"),
                LEGEND + " p50",
                "A",
            )
        )
        .with_target(
            query(
                quantile_expr(0.95, "rebalancer_rebalance_time_to_stable_seconds", "1h"),
                LEGEND + " p95",
                "B",
            )
        )
        .unit("s")
        .min(0)
        .grid_pos(place(0, 10, 12, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Partitions without an owner")
        .description(
            "Partition-seconds without an owner per second: the average number of partitions "
            "nobody consumed because of rebalances (member reports time each release and "
            "assignment)."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"sum by ({BY_GROUP}) "
                f"(rate(rebalancer_unowned_partition_seconds_total{{{GROUP}}}[$__rate_interval]))",
                LEGEND,
            )
        )
        .unit("short")
        .min(0)
        .grid_pos(place(12, 10, 8, 8))
    )
    board = board.with_panel(
        stat.Panel()
        .title("Unowned partition-seconds in range")
        .description("Partition-seconds without an owner per group over the time range.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"sum by ({BY_GROUP}) "
                f"(increase(rebalancer_unowned_partition_seconds_total{{{GROUP}}}[$__range]))",
                LEGEND,
            ).instant()
        )
        .unit("short")
        .decimals(0)
        .graph_mode(common.BigValueGraphMode.NONE)
        .grid_pos(place(20, 10, 4, 8))
    )

    board = board.with_row(dashboard.Row("Rollouts").grid_pos(place(0, 18, 24, 1)))
    board = board.with_panel(
        statetimeline.Panel()
        .title("Rollout phase")
        .description(
            "The rollout planner's phase: Planning, then per batch BatchOpening (gathering its "
            "pods), BatchJoining and BatchSettling, then Completed; Failed and Paused wait for "
            "the user."
        )
        .datasource(DATASOURCE)
        .with_target(query(phase_code_expr(), LEGEND))
        .mappings(phase_mappings())
        .show_value(common.VisibilityMode.NEVER)
        .merge_values(True)
        .grid_pos(place(0, 19, 16, 6))
    )
    board = board.with_panel(
        bargauge.Panel()
        .title("Rollout progress")
        .description("Batches of the current or last rollout released and settled.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"rebalancer_rollout_batches_done{{{GROUP}}} "
                f"/ (rebalancer_rollout_batches{{{GROUP}}} > 0)",
                LEGEND,
            ).instant()
        )
        .unit("percentunit")
        .min(0)
        .max(1)
        .grid_pos(place(16, 19, 8, 6))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Gate waits (p95)")
        .description(
            "95th percentile of how long pods waited at their join gates, from creation until "
            "the operator opened their batch, over the hour before each point."
        )
        .datasource(DATASOURCE)
        .with_target(query(quantile_expr(0.95, "rebalancer_gate_wait_seconds", "1h"), LEGEND))
        .unit("s")
        .min(0)
        .grid_pos(place(0, 25, 8, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Gate bypasses")
        .description(
            "Pods that passed their gates without the operator (it was silent for the bypass "
            "time), per interval."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"sum by ({BY_GROUP}) "
                f"(increase(rebalancer_gate_bypasses_total{{{GROUP}}}[$__rate_interval]))",
                LEGEND,
            )
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .unit("short")
        .min(0)
        .grid_pos(place(8, 25, 8, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Enforced rebalances by outcome")
        .description(
            "Enforce requests per interval by final outcome: enforced, in-progress, failed, "
            "expired (the sidecar's), skipped or unreachable."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"sum by ({BY_GROUP}, outcome) "
                f"(increase(rebalancer_enforced_rebalances_total{{{GROUP}}}[$__rate_interval]))",
                LEGEND + " {{outcome}}",
            )
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        .unit("short")
        .min(0)
        .grid_pos(place(16, 25, 8, 8))
    )

    board = board.with_row(dashboard.Row("Group").grid_pos(place(0, 33, 24, 1)))
    board = board.with_panel(
        statetimeline.Panel()
        .title("State")
        .description(
            "Group state at each observation: Stable, rebalancing (PreparingRebalance, "
            "CompletingRebalance, or Assigning and Reconciling for KIP-848 groups), Empty, Dead."
        )
        .datasource(DATASOURCE)
        .with_target(query(state_code_expr(), LEGEND))
        .mappings(state_mappings())
        .show_value(common.VisibilityMode.NEVER)
        .merge_values(True)
        .grid_pos(place(0, 34, 24, 6))
    )
    board = board.with_panel(
        group_timeseries(
            "Members",
            "Members in each group at each observation.",
            f"rebalancer_group_members{{{GROUP}}}",
            "short",
            place(0, 40, 8, 8),
        )
    )
    board = board.with_panel(
        group_timeseries(
            "Generation",
            "Group generation; each step up is one completed rebalance.",
            f"rebalancer_group_generation{{{GROUP}}}",
            "short",
            place(8, 40, 8, 8),
        )
    )
    board = board.with_panel(
        group_timeseries(
            "Lag",
            "Messages each group is behind, summed over its partitions.",
            f"rebalancer_group_lag_messages{{{GROUP}}}",
            "short",
            place(16, 40, 8, 8),
        )
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Partitions assigned")
        .description(
            "Partitions assigned to members against the partitions the group subscribes to; "
            "a gap between the two is partitions nobody consumes."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(f"rebalancer_group_assigned_partitions{{{GROUP}}}", LEGEND + " assigned", "A")
        )
        .with_target(query(f"rebalancer_group_partitions{{{GROUP}}}", LEGEND + " total", "B"))
        .unit("short")
        .min(0)
        .grid_pos(place(0, 48, 12, 8))
    )
    board = board.with_panel(
        statetimeline.Panel()
        .title("Ready")
        .description("The ConsumerGroup's Ready condition: Stable with every partition assigned.")
        .datasource(DATASOURCE)
        .with_target(query(f"rebalancer_group_ready{{{GROUP}}}", LEGEND))
        .mappings(
            [
                ValueMap(
                    options={
                        "1": ValueMappingResult(text="Ready", color="green", index=0),
                        "0": ValueMappingResult(text="Not ready", color="red", index=1),
                    }
                )
            ]
        )
        .show_value(common.VisibilityMode.NEVER)
        .merge_values(True)
        .grid_pos(place(12, 48, 12, 8))
    )

    board = board.with_row(dashboard.Row("Operator").grid_pos(place(0, 56, 24, 1)))
    board = board.with_panel(
        timeseries.Panel()
        .title("Observation failures")
        .description(
            "Failed observations per interval, by reason (the Degraded condition's reason)."
        )
        .datasource(DATASOURCE)
        .with_target(
            query(
                "sum by (namespace, consumergroup, reason) "
                f"(increase(rebalancer_observation_failures_total{{{GROUP}}}[$__rate_interval]))",
                LEGEND + " {{reason}}",
            )
        )
        .draw_style(common.GraphDrawStyle.BARS)
        .unit("short")
        .min(0)
        .grid_pos(place(0, 57, 8, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Member reports")
        .description("Reports accepted and rejected (by reason) at POST /v1/reports, per second.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                "sum(rate(rebalancer_member_reports_accepted_total[$__rate_interval]))",
                "accepted",
                "A",
            )
        )
        .with_target(
            query(
                "sum by (reason) "
                "(rate(rebalancer_member_reports_rejected_total[$__rate_interval]))",
                "rejected: {{reason}}",
                "B",
            )
        )
        .unit("reqps")
        .min(0)
        .grid_pos(place(8, 57, 8, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Observation duration (p95)")
        .description("95th percentile of the time one observation takes, by outcome.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                "histogram_quantile(0.95, sum by (le, outcome) "
                "(rate(rebalancer_observation_duration_seconds_bucket[$__rate_interval])))",
                "{{outcome}}",
            )
        )
        .unit("s")
        .min(0)
        .grid_pos(place(16, 57, 8, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Operator CPU")
        .description("CPU seconds per second the operator process uses.")
        .datasource(DATASOURCE)
        .with_target(
            query(
                f"rate(process_cpu_seconds_total[$__rate_interval]) {OPERATOR}",
                "{{instance}}",
            )
        )
        .unit("short")
        .min(0)
        .grid_pos(place(0, 65, 12, 8))
    )
    board = board.with_panel(
        timeseries.Panel()
        .title("Operator memory")
        .description("Resident memory of the operator process; compare with the container's limit.")
        .datasource(DATASOURCE)
        .with_target(query(f"process_resident_memory_bytes {OPERATOR}", "{{instance}}"))
        .unit("bytes")
        .min(0)
        .grid_pos(place(12, 65, 12, 8))
    )
    return board


def render() -> str:
    model = json.loads(JSONEncoder().encode(build().build()))
    # Links to a single panel (viewPanel=N) need ids that are unique and stay put.
    for number, panel in enumerate(model["panels"], start=1):
        panel["id"] = number
    return json.dumps(model, indent=2, sort_keys=True) + "\n"


def main() -> int:
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
