"""The Grafana dashboard is the generator's output and queries only metrics the operator exports."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from tests.deploy.chart.support import CHART

from rebalancer import metrics

DASHBOARD = CHART / "dashboards" / "rebalancer.json"
# Grafana's range variables, replaced by fixed durations so promtool can parse the query.
GRAFANA_RANGES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}


def load_generator() -> ModuleType:
    path = CHART / "dashboards" / "generate.py"
    spec = importlib.util.spec_from_file_location("dashboard_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported_names() -> set[str]:
    names = set()
    for family in metrics.REGISTRY.collect():
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def expressions() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in panels() for target in panel["targets"]]


def referenced(expr: str) -> set[str]:
    without_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return set(re.findall(r"\b(?:rebalancer|process|python)_[a-z_]+\b", without_strings))


def test_committed_dashboard_is_the_generators_output() -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk is not installed")
    assert load_generator().render() == DASHBOARD.read_text(encoding="utf-8"), (
        "dashboards/rebalancer.json is out of date: run "
        ".venv/bin/python charts/rebalancer/dashboards/generate.py"
    )


def test_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    assert [v["name"] for v in board["templating"]["list"]] == [
        "datasource",
        "namespace",
        "consumergroup",
        "group_id",
    ]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["title"] and panel["description"], panel
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        position = panel["gridPos"]
        assert position["x"] >= 0 and position["x"] + position["w"] <= 24, panel["title"]


def test_queries_use_only_exported_metrics() -> None:
    exported = exported_names()
    for title, expr in expressions():
        names = referenced(expr)
        assert names, f"{title}: queries no rebalancer metric"
        assert names <= exported, f"{title}: {sorted(names - exported)} are not exported"
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            assert referenced(variable["query"]) <= exported, variable["name"]


def test_dashboard_covers_the_groups_story() -> None:
    used = set().union(*(referenced(expr) for _, expr in expressions()))
    assert {
        "rebalancer_rebalances_total",
        "rebalancer_group_members",
        "rebalancer_group_generation",
        "rebalancer_group_state",
        "rebalancer_group_lag_messages",
        "rebalancer_group_last_rebalance_timestamp_seconds",
        "rebalancer_group_assigned_partitions",
        "rebalancer_group_ready",
        "rebalancer_observation_failures_total",
        "rebalancer_member_reports_accepted_total",
        "rebalancer_member_reports_rejected_total",
        "rebalancer_rebalance_time_to_stable_seconds_bucket",
        "rebalancer_unowned_partition_seconds_total",
        "rebalancer_rollout_phase",
        "rebalancer_rollout_batches",
        "rebalancer_rollout_batches_done",
        "rebalancer_gate_wait_seconds_bucket",
        "rebalancer_gate_bypasses_total",
        "rebalancer_enforced_rebalances_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    } <= used


def group_metric_names() -> set[str]:
    """Names of the series that carry the group labels, from one group published in full."""
    from rebalancer.planning.rebalances import GroupTracking
    from rebalancer.planning.rollout_states import RolloutState
    from rebalancer.structs.history import RebalanceCause
    from rebalancer.structs.snapshots import GroupSnapshot

    seen = GroupSnapshot("Stable", "classic", None, 1, 1, (), 1, 1, 0, 1.0)
    metrics.publish_snapshot("ns", "cg", "gid", seen, GroupTracking(since=0.0))
    metrics.record_rebalance("ns", "cg", "gid", RebalanceCause.REJOIN)
    metrics.record_rebalance_records("ns", "cg", "gid", [])
    metrics.record_time_to_stable("ns", "cg", "gid", 3.0)
    metrics.publish_rollout("ns", "cg", "gid", RolloutState())
    metrics.record_gate_waits("ns", "cg", "gid", [1.0])
    metrics.record_gate_bypasses("ns", "cg", "gid", 1)
    metrics.record_enforcement("ns", "cg", "gid", "enforced")
    metrics.record_observation_failure("ns", "cg", "gid", "ObserveFailed")
    try:
        return {
            sample.name
            for family in metrics.REGISTRY.collect()
            for sample in family.samples
            if sample.labels.get("consumergroup") == "cg"
        }
    finally:
        metrics.forget_group("ns", "cg")


def test_every_group_query_follows_the_three_variables() -> None:
    """A per-group series is always filtered by namespace, ConsumerGroup and Kafka group, so the
    variables narrow every panel."""
    names = group_metric_names()
    assert {"rebalancer_rollout_phase", "rebalancer_gate_wait_seconds_bucket"} <= names
    checked = 0
    for title, expr in expressions():
        for name in referenced(expr) & names:
            selectors = re.findall(rf"\b{name}\{{([^}}]*)\}}", expr)
            assert selectors, f"{title}: {name} without a selector"
            for selector in selectors:
                for variable in ("namespace", "consumergroup", "group_id"):
                    assert f'{variable}=~"${variable}"' in selector, (title, name, variable)
                checked += 1
    assert checked >= 20


def test_every_query_parses(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    rules = []
    for number, (_, expr) in enumerate(expressions()):
        parsable = expr
        for variable, duration in GRAFANA_RANGES.items():
            parsable = parsable.replace(variable, duration)
        # A recording rule is the one place promtool parses a bare expression offline.
        rules.append({"record": f"dashboard:query_{number}", "expr": parsable})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
