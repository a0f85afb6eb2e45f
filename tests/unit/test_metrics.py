from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from rebalancer import __version__, metrics
from rebalancer.clients.receiving import ReportHub, build_app
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.history import RebalanceCause
from rebalancer.structs.snapshots import GroupSnapshot


def snapshot(**overrides: object) -> GroupSnapshot:
    values: dict[str, object] = {
        "state": "Stable",
        "protocol": "classic",
        "assignor": "cooperative-sticky",
        "generation": 7,
        "members": 3,
        "member_details": (),
        "assigned_partitions": 12,
        "total_partitions": 12,
        "lag": 40,
        "observed_at": 1_700_000_000.0,
    }
    values.update(overrides)
    return GroupSnapshot(**values)  # type: ignore[arg-type]


def tracking(**overrides: object) -> GroupTracking:
    values: dict[str, object] = {
        "since": 0.0,
        "generation": 7,
        "rebalances": 5,
        "last_rebalance_at": 1_699_999_000.0,
    }
    values.update(overrides)
    return GroupTracking(**values)  # type: ignore[arg-type]


def scrape() -> str:
    return generate_latest(metrics.REGISTRY).decode()


def samples(text: str | None = None) -> list[Sample]:
    parsed = text_string_to_metric_families(text if text is not None else scrape())
    return [sample for family in parsed for sample in family.samples]


def value(name: str, **labels: str) -> float | None:
    found = [s.value for s in samples() if s.name == name and s.labels == labels]
    assert len(found) <= 1
    return found[0] if found else None


@pytest.fixture
def group() -> Iterator[tuple[str, str]]:
    namespace = f"ns-{uuid.uuid4().hex[:8]}"
    yield namespace, "orders"
    metrics.forget_group(namespace, "orders")


def test_snapshot_is_published_with_group_labels(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, snapshot(), tracking())
    labels = {"namespace": namespace, "consumergroup": name}
    assert value("rebalancer_group_members", **labels) == 3
    assert value("rebalancer_group_generation", **labels) == 7
    assert value("rebalancer_group_assigned_partitions", **labels) == 12
    assert value("rebalancer_group_partitions", **labels) == 12
    assert value("rebalancer_group_lag_messages", **labels) == 40
    assert value("rebalancer_group_rebalances", **labels) == 5
    assert value("rebalancer_group_last_rebalance_timestamp_seconds", **labels) == 1_699_999_000
    assert value("rebalancer_group_last_observation_timestamp_seconds", **labels) == 1_700_000_000


def test_state_is_one_hot_and_unknown_states_fold(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, snapshot(state="PreparingRebalance"), tracking())
    states = {
        s.labels["state"]: s.value
        for s in samples()
        if s.name == "rebalancer_group_state" and s.labels["namespace"] == namespace
    }
    assert set(states) == set(metrics.GROUP_STATES)
    assert [state for state, v in states.items() if v == 1] == ["PreparingRebalance"]
    metrics.publish_snapshot(namespace, name, snapshot(state="Banana"), tracking())
    labels = {"namespace": namespace, "consumergroup": name}
    assert value("rebalancer_group_state", **labels, state="Unknown") == 1
    assert value("rebalancer_group_state", **labels, state="PreparingRebalance") == 0
    assert "Banana" not in scrape()


def test_unknown_figures_are_dropped_not_kept_stale(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name}
    metrics.publish_snapshot(namespace, name, snapshot(), tracking())
    metrics.publish_snapshot(
        namespace,
        name,
        snapshot(generation=None, lag=None, assigned_partitions=None, total_partitions=None),
        tracking(generation=None, last_rebalance_at=None),
    )
    for gone in (
        "rebalancer_group_generation",
        "rebalancer_group_lag_messages",
        "rebalancer_group_assigned_partitions",
        "rebalancer_group_partitions",
        "rebalancer_group_last_rebalance_timestamp_seconds",
    ):
        assert value(gone, **labels) is None, gone
    assert value("rebalancer_group_members", **labels) == 3


def test_generation_falls_back_to_the_tracked_one(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, snapshot(generation=None), tracking(generation=9))
    assert value("rebalancer_group_generation", namespace=namespace, consumergroup=name) == 9


def test_rebalances_are_counted_by_cause(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.record_rebalance(namespace, name, RebalanceCause.MEMBER_JOINED)
    metrics.record_rebalance(namespace, name, RebalanceCause.MEMBER_JOINED)
    metrics.record_rebalance(namespace, name, "something-new")
    counts = {
        s.labels["cause"]: s.value
        for s in samples()
        if s.name == "rebalancer_rebalances_total" and s.labels["namespace"] == namespace
    }
    # Every cause exists from the first rebalance on, so increase() sees each first one.
    assert counts == {cause.value: 0.0 for cause in RebalanceCause} | {
        "member-joined": 2.0,
        "unknown": 1.0,
    }


def test_conditions_become_gauges(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name}
    metrics.publish_conditions(
        namespace,
        name,
        [
            Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", "ok"),
            Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, "Observed", "ok"),
            Condition(ConditionType.PROGRESSING, ConditionStatus.TRUE, "Rebalancing", "x"),
        ],
    )
    assert value("rebalancer_group_ready", **labels) == 1
    assert value("rebalancer_group_degraded", **labels) == 0
    metrics.publish_conditions(
        namespace,
        name,
        [Condition(ConditionType.READY, ConditionStatus.UNKNOWN, "Observing", "starting")],
    )
    assert value("rebalancer_group_ready", **labels) == 0
    assert value("rebalancer_group_degraded", **labels) == 0


def test_observation_failures_and_durations(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name}
    metrics.record_observation_failure(namespace, name, "KafkaUnreachable")
    metrics.record_observation_failure(namespace, name, "KafkaUnreachable")
    assert value("rebalancer_observation_failures_total", **labels, reason="KafkaUnreachable") == 2
    before = value("rebalancer_observation_duration_seconds_count", outcome="failure") or 0.0
    metrics.record_observation_duration(4.0, succeeded=False)
    after = value("rebalancer_observation_duration_seconds_count", outcome="failure")
    assert after == before + 1
    assert value("rebalancer_observation_duration_seconds_count", outcome="success") is not None


def test_report_counters() -> None:
    accepted = value("rebalancer_member_reports_accepted_total") or 0.0
    rejected = value("rebalancer_member_reports_rejected_total", reason="unauthorized") or 0.0
    other = value("rebalancer_member_reports_rejected_total", reason="other") or 0.0
    metrics.record_report_accepted()
    metrics.record_report_rejected("unauthorized")
    metrics.record_report_rejected("made up by a client")
    assert value("rebalancer_member_reports_accepted_total") == accepted + 1
    assert value("rebalancer_member_reports_rejected_total", reason="unauthorized") == rejected + 1
    assert value("rebalancer_member_reports_rejected_total", reason="other") == other + 1
    assert "made up" not in scrape()


def test_forget_removes_every_series_of_the_group_only(group: tuple[str, str]) -> None:
    namespace, name = group
    for target in (name, "payments"):
        metrics.publish_snapshot(namespace, target, snapshot(), tracking())
        metrics.record_rebalance(namespace, target, RebalanceCause.REJOIN)
        metrics.record_observation_failure(namespace, target, "ObserveFailed")
        metrics.publish_conditions(
            namespace,
            target,
            [Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", "ok")],
        )
    metrics.forget_group(namespace, name)
    left = [s for s in samples() if s.labels.get("namespace") == namespace]
    assert left
    assert {s.labels["consumergroup"] for s in left} == {"payments"}
    metrics.forget_group(namespace, "payments")
    assert not [s for s in samples() if s.labels.get("namespace") == namespace]
    metrics.forget_group(namespace, "never-seen")


def test_names_follow_prometheus_conventions(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, snapshot(), tracking())
    metrics.record_rebalance(namespace, name, RebalanceCause.REJOIN)
    families = list(text_string_to_metric_families(scrape()))
    assert families
    for family in families:
        assert family.name.startswith("rebalancer_"), family.name
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name
            if family.type == "counter":
                assert sample.name.endswith("_total"), sample.name
            allowed = {"namespace", "consumergroup", "cause", "state", "reason", "outcome", "le"}
            assert set(sample.labels) <= allowed | {"version"}, sample
    info = [s for f in families for s in f.samples if s.name == "rebalancer_operator_info"]
    assert [s.labels for s in info] == [{"version": __version__}]


async def test_metrics_are_served_next_to_reports() -> None:
    async with TestClient(TestServer(build_app(ReportHub(), None))) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        body = await response.text()
    names = {family.name for family in text_string_to_metric_families(body)}
    assert "rebalancer_operator_info" in names


def test_exposition_passes_promtool(group: tuple[str, str]) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    namespace, name = group
    metrics.publish_snapshot(namespace, name, snapshot(), tracking())
    metrics.record_rebalance(namespace, name, RebalanceCause.MEMBER_LEFT)
    metrics.record_observation_failure(namespace, name, "SecretNotFound")
    metrics.publish_conditions(
        namespace, name, [Condition(ConditionType.READY, ConditionStatus.FALSE, "x", "y")]
    )
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=scrape(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = set(re.findall(r"^\| `(rebalancer_[a-z_]+)` \| (\w+) \|", doc, flags=re.MULTILINE))
    suffixes = {"counter": "_total", "info": "_info"}
    exported = {
        (
            family.name + suffixes.get(family.type, ""),
            "gauge" if family.type == "info" else family.type,
        )
        for family in metrics.REGISTRY.collect()
    }
    assert rows == exported
