from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from rebalancer import __version__, metrics
from rebalancer.clients.receiving import ReportHub, build_app
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.sidecar import metrics as sidecar_metrics
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.snapshots import GroupSnapshot

GID = "orders-group"


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
    metrics.publish_snapshot(namespace, name, GID, snapshot(), tracking())
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
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
    metrics.publish_snapshot(namespace, name, GID, snapshot(state="PreparingRebalance"), tracking())
    states = {
        s.labels["state"]: s.value
        for s in samples()
        if s.name == "rebalancer_group_state" and s.labels["namespace"] == namespace
    }
    assert set(states) == set(metrics.GROUP_STATES)
    assert [state for state, v in states.items() if v == 1] == ["PreparingRebalance"]
    metrics.publish_snapshot(namespace, name, GID, snapshot(state="Banana"), tracking())
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    assert value("rebalancer_group_state", **labels, state="Unknown") == 1
    assert value("rebalancer_group_state", **labels, state="PreparingRebalance") == 0
    assert "Banana" not in scrape()


def test_unknown_figures_are_dropped_not_kept_stale(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.publish_snapshot(namespace, name, GID, snapshot(), tracking())
    metrics.publish_snapshot(
        namespace,
        name,
        GID,
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
    metrics.publish_snapshot(
        namespace, name, GID, snapshot(generation=None), tracking(generation=9)
    )
    assert (
        value("rebalancer_group_generation", namespace=namespace, consumergroup=name, group_id=GID)
        == 9
    )


def test_rebalances_are_counted_by_cause(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.record_rebalance(namespace, name, GID, RebalanceCause.MEMBER_JOINED)
    metrics.record_rebalance(namespace, name, GID, RebalanceCause.MEMBER_JOINED)
    metrics.record_rebalance(namespace, name, GID, "something-new")
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
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.publish_conditions(
        namespace,
        name,
        GID,
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
        GID,
        [Condition(ConditionType.READY, ConditionStatus.UNKNOWN, "Observing", "starting")],
    )
    assert value("rebalancer_group_ready", **labels) == 0
    assert value("rebalancer_group_degraded", **labels) == 0


def test_observation_failures_and_durations(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.record_observation_failure(namespace, name, GID, "KafkaUnreachable")
    metrics.record_observation_failure(namespace, name, GID, "KafkaUnreachable")
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
        metrics.publish_snapshot(namespace, target, GID, snapshot(), tracking())
        metrics.record_rebalance(namespace, target, GID, RebalanceCause.REJOIN)
        metrics.record_observation_failure(namespace, target, GID, "ObserveFailed")
        metrics.publish_conditions(
            namespace,
            target,
            GID,
            [Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", "ok")],
        )
    metrics.forget_group(namespace, name)
    left = [s for s in samples() if s.labels.get("namespace") == namespace]
    assert left
    assert {s.labels["consumergroup"] for s in left} == {"payments"}
    metrics.forget_group(namespace, "payments")
    assert not [s for s in samples() if s.labels.get("namespace") == namespace]
    metrics.forget_group(namespace, "never-seen")


# The standard collectors' families (process_*, python_*) and their own labels.
RUNTIME_PREFIXES = ("process_", "python_")
RUNTIME_LABELS = {"generation", "implementation", "major", "minor", "patchlevel", "version"}


def test_names_follow_prometheus_conventions(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, GID, snapshot(), tracking())
    metrics.record_rebalance(namespace, name, GID, RebalanceCause.REJOIN)
    metrics.publish_rollout(namespace, name, GID, RolloutState())
    metrics.record_enforcement(namespace, name, GID, "enforced")
    families = list(text_string_to_metric_families(scrape()))
    assert families
    allowed = {"namespace", "consumergroup", "group_id", "cause", "state", "reason", "outcome"}
    allowed |= {"phase", "le", "kind", "verb", "resource", "request"}
    # A status field path the operator's own code writes (list indexes and map keys taken out).
    allowed |= {"field"}
    for family in families:
        runtime = family.name.startswith(RUNTIME_PREFIXES)
        assert runtime or family.name.startswith("rebalancer_"), family.name
        for sample in family.samples:
            assert not sample.name.endswith("_created"), sample.name
            if family.type == "counter":
                assert sample.name.endswith("_total"), sample.name
            extra = RUNTIME_LABELS if runtime else {"version"}
            assert set(sample.labels) <= allowed | extra, sample
    info = [s for f in families for s in f.samples if s.name == "rebalancer_operator_info"]
    assert [s.labels for s in info] == [{"version": __version__}]


def test_process_and_python_runtime_metrics_describe_this_process() -> None:
    import os
    import time

    start = value("process_start_time_seconds")
    assert start is not None and start <= time.time()
    assert (value("process_resident_memory_bytes") or 0) > 0
    # Read from /proc/self: this process's descriptors, not a constant.
    assert 0 < (value("process_open_fds") or 0) <= len(os.listdir("/proc/self/fd"))
    assert [s for s in samples() if s.name == "python_info"]
    assert [s for s in samples() if s.name == "python_gc_collections_total"]


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
    metrics.publish_snapshot(namespace, name, GID, snapshot(), tracking())
    metrics.record_rebalance(namespace, name, GID, RebalanceCause.MEMBER_LEFT)
    metrics.record_observation_failure(namespace, name, GID, "SecretNotFound")
    metrics.publish_conditions(
        namespace, name, GID, [Condition(ConditionType.READY, ConditionStatus.FALSE, "x", "y")]
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


def documented_rows() -> set[tuple[str, str]]:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    pattern = r"^\| `((?:rebalancer|process|python)_[a-z_]+)` \| (\w+) \|"
    return set(re.findall(pattern, doc, flags=re.MULTILINE))


def exported_rows(registry: CollectorRegistry) -> set[tuple[str, str]]:
    suffixes = {"counter": "_total", "info": "_info"}
    return {
        (
            family.name + suffixes.get(family.type, ""),
            "gauge" if family.type == "info" else family.type,
        )
        for family in registry.collect()
    }


def test_every_metric_is_documented() -> None:
    """docs/metrics.md has one row per family of the operator and of the sidecar, and no more."""
    assert documented_rows() == exported_rows(metrics.REGISTRY) | exported_rows(
        sidecar_metrics.REGISTRY
    )


def record(**overrides: object) -> RebalanceEvent:
    values: dict[str, object] = {
        "namespace": "ns",
        "name": "orders",
        "group_id": GID,
        "cluster": "kafka:9092",
        "generation": 8,
        "previous_generation": 7,
        "cause": RebalanceCause.MEMBER_JOINED,
        "detected_at": 1_700_000_000.0,
        "started_at": None,
        "members": 3,
        "joined": ("orders-2",),
        "left": (),
        "source": "member-reports",
        "state": "Stable",
    }
    values.update(overrides)
    return RebalanceEvent(**values)  # type: ignore[arg-type]


def test_rebalance_records_feed_unowned_partition_seconds(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.record_rebalance_records(namespace, name, GID, [])
    # Present at zero before any rebalance, so increase() sees the first one.
    assert value("rebalancer_unowned_partition_seconds_total", **labels) == 0
    metrics.record_rebalance_records(
        namespace,
        name,
        GID,
        [
            record(time_to_stable_ms=4200.0, stop_the_world_partition_s=50.4),
            record(time_to_stable_ms=2500.0, stop_the_world_partition_s=None),
            # A leave whose partitions' releases nobody reported: unknown, nothing counted.
            record(cause=RebalanceCause.MEMBER_LEFT, joined=(), left=("orders-1",)),
        ],
    )
    assert value("rebalancer_unowned_partition_seconds_total", **labels) == 50.4


def test_time_to_stable_is_a_histogram_per_group(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.record_time_to_stable(namespace, name, GID, None)
    assert value("rebalancer_rebalance_time_to_stable_seconds_count", **labels) == 0
    metrics.record_time_to_stable(namespace, name, GID, 4.2)
    metrics.record_time_to_stable(namespace, name, GID, 2.5)
    assert value("rebalancer_rebalance_time_to_stable_seconds_count", **labels) == 2
    assert value("rebalancer_rebalance_time_to_stable_seconds_sum", **labels) == 6.7
    assert value("rebalancer_rebalance_time_to_stable_seconds_bucket", **labels, le="3.0") == 1
    assert value("rebalancer_rebalance_time_to_stable_seconds_bucket", **labels, le="5.0") == 2


def test_a_value_on_a_bucket_bound_counts_in_it_and_above_all_in_inf(
    group: tuple[str, str],
) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    for seconds in (3.0, 601.0):
        metrics.record_time_to_stable(namespace, name, GID, seconds)

    def bucket(le: str) -> float | None:
        return value("rebalancer_rebalance_time_to_stable_seconds_bucket", **labels, le=le)

    assert (bucket("2.0"), bucket("3.0"), bucket("600.0"), bucket("+Inf")) == (0, 1, 1, 2)


def test_rollout_phase_is_one_hot_with_progress(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    joining = RolloutState(phase=RolloutPhase.BATCH_JOINING, batch=3, sizes=(2, 2, 2, 1))
    metrics.publish_rollout(namespace, name, GID, joining)
    phases = {
        s.labels["phase"]: s.value
        for s in samples()
        if s.name == "rebalancer_rollout_phase" and s.labels["namespace"] == namespace
    }
    assert set(phases) == {phase.value for phase in RolloutPhase}
    assert [phase for phase, v in phases.items() if v == 1] == ["BatchJoining"]
    assert value("rebalancer_rollout_batches", **labels) == 4
    assert value("rebalancer_rollout_batches_done", **labels) == 2
    metrics.publish_rollout(namespace, name, GID, RolloutState(phase=RolloutPhase.IDLE))
    assert value("rebalancer_rollout_phase", **labels, phase="Idle") == 1
    assert value("rebalancer_rollout_phase", **labels, phase="BatchJoining") == 0
    assert value("rebalancer_rollout_batches", **labels) == 0


def test_gate_waits_and_enforcements(group: tuple[str, str]) -> None:
    namespace, name = group
    labels = {"namespace": namespace, "consumergroup": name, "group_id": GID}
    metrics.record_gate_waits(namespace, name, GID, [4.0, 12.0])
    assert value("rebalancer_gate_wait_seconds_count", **labels) == 2
    assert value("rebalancer_gate_wait_seconds_bucket", **labels, le="5.0") == 1
    metrics.record_enforcement(namespace, name, GID, "enforced")
    metrics.record_enforcement(namespace, name, GID, "unreachable")
    metrics.record_enforcement(namespace, name, GID, "accepted")  # not final: not counted
    counts = {
        s.labels["outcome"]: s.value
        for s in samples()
        if s.name == "rebalancer_enforced_rebalances_total" and s.labels["namespace"] == namespace
    }
    assert counts == {outcome: 0.0 for outcome in metrics.ENFORCE_OUTCOMES} | {
        "enforced": 1.0,
        "unreachable": 1.0,
    }


def test_a_new_group_id_replaces_the_old_ones_series(group: tuple[str, str]) -> None:
    namespace, name = group
    metrics.publish_snapshot(namespace, name, "old-id", snapshot(), tracking())
    metrics.record_rebalance(namespace, name, "old-id", RebalanceCause.REJOIN)
    metrics.publish_snapshot(namespace, name, "new-id", snapshot(members=5), tracking())
    ids = {s.labels["group_id"] for s in samples() if s.labels.get("namespace") == namespace}
    assert ids == {"new-id"}
    assert (
        value(
            "rebalancer_group_members", namespace=namespace, consumergroup=name, group_id="new-id"
        )
        == 5
    )


def test_a_streams_groups_tasks_by_kind_and_gone_when_it_is_not_one(
    group: tuple[str, str],
) -> None:
    namespace, name = group
    counts = {"active": 4, "standby": 2, "warmup": 1}
    metrics.publish_streams_tasks(namespace, name, GID, counts)
    seen = {
        s.labels["kind"]: s.value
        for s in samples()
        if s.name == "rebalancer_streams_group_tasks" and s.labels["consumergroup"] == name
    }
    assert seen == counts
    metrics.publish_streams_tasks(namespace, name, GID, None)
    assert not [
        s
        for s in samples()
        if s.name == "rebalancer_streams_group_tasks" and s.labels["consumergroup"] == name
    ]
    metrics.publish_streams_tasks(namespace, name, GID, counts)
    metrics.forget_group(namespace, name)
    # Other tests publish series of groups named alike in namespaces of their own.
    assert not [
        s
        for s in samples()
        if s.labels.get("namespace") == namespace and s.labels.get("consumergroup") == name
    ]
