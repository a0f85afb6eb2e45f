"""History and learning through the whole operator in the lab.

Real parts: Apache Kafka, Kubernetes' control plane, the lab's kubelet (each consumer pod a real
`python -m rebalancer_lab.consumer` process posting member reports), the operator process with
`--history-dir`, and Spark for the learning job. A cold start leaves a join record per member in
the history and the job reads them; then a recommendation set written by the job's own writer
drives `spec.policy.learning.mode: auto` through the settings and rollout machinery. Between
the two, a consumer crashes and a pod is deleted: pod records from Kubernetes for starts the
stagger did not release and for stops, and a stop-the-world estimate for a rebalance of the
group while it was consuming.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kubernetes import client
from pyspark.sql import SparkSession
from tests.operator.e2e.support import (
    consumer_pid,
    events_for,
    eventually,
    get_cg,
    restart_operator,
    running_lab,
)

from rebalancer.learning.choosing import ClusterChoice, GroupChoice, GroupFacts
from rebalancer.learning.history_table import read_history
from rebalancer.learning.inputs import find_inputs
from rebalancer.learning.jobs import LearnOptions, learn
from rebalancer.learning.outputs import build_output, write_output
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
PODS = ("orders-consumer-0", "orders-consumer-1", "orders-consumer-2")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=True,
        pods=True,
        partitions=6,
        start_spread_seconds=0.2,
    ) as running:
        yield running


def history_dir(lab: Lab) -> Path:
    return Path(lab.config.state_dir) / "history"


def recommendations_dir(lab: Lab) -> Path:
    # The operator's default: <history-dir>/_recommendations (the history reader skips "_").
    return history_dir(lab) / "_recommendations"


def stable_with_three(lab: Lab) -> dict[str, Any] | None:
    """The group Stable with three members and every partition assigned (members that all
    report one generation look Stable even while the broker still holds their assignment)."""
    group = (get_cg(lab, "orders").get("status") or {}).get("group") or {}
    settled = (
        group.get("members") == 3
        and group.get("state") == "Stable"
        and group.get("assignedPartitions") == group.get("totalPartitions") == 6
    )
    return group if settled else None


def rollout_done(lab: Lab) -> dict[str, Any] | None:
    rollout = (get_cg(lab, "orders").get("status") or {}).get("rollout") or {}
    return rollout if rollout.get("phase") in ("Completed", "Idle") else None


def pods(lab: Lab) -> dict[str, dict[str, Any]]:
    assert lab.api_client is not None
    items = json.loads(
        client.CoreV1Api(lab.api_client).list_namespaced_pod("default", _preload_content=False).data
    )["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"] in PODS}


def settings_line(lab: Lab, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    folder = Path(lab.config.state_dir) / "logs" / "pods" / f"default_{meta['name']}_{meta['uid']}"
    text = "".join(p.read_text(errors="replace") for p in sorted(folder.glob("*/*.log")))
    return next((line for line in text.splitlines() if "settings:" in line), "")


def joins(lab: Lab) -> list[dict[str, object]]:
    return [r for r in read_history(history_dir(lab)) if r["record_type"] == "member-join"]


def test_a_cold_start_leaves_a_join_record_per_member_and_the_job_reads_them(
    lab: Lab, spark: SparkSession, tmp_path: Path
) -> None:
    eventually(lambda: stable_with_three(lab), 120, "the example group, 3 members, Stable")
    found = eventually(
        lambda: (rows := joins(lab)) and {r["member"] for r in rows} >= set(PODS) and rows,
        30,
        "a member-join record for each pod",
    )

    by_member = {str(r["member"]): r for r in found}
    assert sorted(str(r["member"]) for r in found) == sorted(PODS), "one join per member"
    batches = {r["batch_id"] for r in found}
    assert len(batches) == 1 and None not in batches, batches
    first = min(float(str(r["detected_at"])) for r in found)
    for member, row in by_member.items():
        (offset,) = row["join_offsets_ms"]  # type: ignore[misc]
        expected = (float(str(row["detected_at"])) - first) * 1000.0
        # A pass's joins are taken in the order their members stamped them (their reports
        # can arrive a few milliseconds out of it), so offsets and detection times agree to
        # their millisecond rounding; a wrong offset is off by the spread itself.
        assert abs(float(offset) - expected) <= 2.0, (member, offset, expected)
        assert isinstance(row["generation"], int) and row["generation"] >= 0, row
        assert row["namespace"] == "default" and row["name"] == "orders", row
        assert row["assignor"] == "cooperative-sticky" and row["static_membership"] is False, row
        assert row["cluster"] == lab.bootstrap and row["source"] == "member-reports", row
    print("JOINS", [(m, r["generation"], r["join_offsets_ms"]) for m, r in by_member.items()])

    # The rebalances the joins caused carry them, their start and their time to Stable.
    def rebalances_with_joins() -> list[dict[str, object]] | None:
        found = [
            r
            for r in read_history(history_dir(lab))
            if r["record_type"] == "rebalance" and r["join_offsets_ms"]
        ]
        named = {member for r in found for member in r["joined"]}  # type: ignore[attr-defined]
        return found if named >= set(PODS) else None

    # A rebalance record waits a few seconds for its late reporters before it is written.
    rebalances = eventually(rebalances_with_joins, 30, "rebalance records naming every join")
    joined = {member for r in rebalances for member in r["joined"]}  # type: ignore[attr-defined]
    assert joined == set(PODS), joined
    # The cold start is the stagger's first rollout (rollouts are on by default): its release
    # is each pod's start; a start outside a rollout would count from the first join. (Each
    # container's own start, from Kubernetes, is recorded too: source "kubernetes".)
    (batch,) = batches
    starts = [
        r
        for r in read_history(history_dir(lab))
        if r["record_type"] == "pod-start" and r["batch_id"] == batch and r["source"] == "operator"
    ]
    if str(batch).startswith("start-"):
        began = first
        assert starts == []
    else:
        assert sorted(str(r["member"]) for r in starts) == sorted(PODS), starts
        (began,) = {float(str(r["detected_at"])) for r in starts}
        assert began <= first and all(r["source"] == "operator" for r in starts), starts
    print("BATCH", batch, "released", began, "first join", first)
    for row in rebalances:
        assert row["started_at"] == pytest.approx(began), row
        assert float(str(row["time_to_stable_ms"])) >= 0.0, row
        assert len(row["join_offsets_ms"]) == len(row["joined"]), row  # type: ignore[arg-type]
    # The first generation met an empty group: every partition waited its time to Stable.
    first_generation = min(rebalances, key=lambda r: int(str(r["generation"])))
    assert first_generation["stop_the_world_partition_s"] == pytest.approx(
        6 * float(str(first_generation["time_to_stable_ms"])) / 1000.0, abs=0.01
    ), first_generation
    print(
        "REBALANCES", [(r["generation"], r["joined"], r["time_to_stable_ms"]) for r in rebalances]
    )

    # The learning job reads the operator's own files: one batch of three, its spread.
    assert not find_inputs(history_dir(lab)).skipped
    output = tmp_path / "out"
    result = learn(
        LearnOptions(history=str(history_dir(lab)), output=str(output)),
        spark=spark,
        progress=lambda _: None,
    )
    assert result.groups == 1, result.messages
    summary = json.loads((output / "recommendations.json").read_text())
    run_dir = output / summary["report"].rsplit("/", 1)[0]
    spreads = pq.read_table(run_dir / "spreads.parquet").to_pylist()
    assert [(row["name"], row["batch_members"], row["batches"]) for row in spreads] == [
        ("orders", 3, 1)
    ]
    spread = max(float(str(r["detected_at"])) for r in found) - first
    assert spreads[0]["spread_p90_ms"] == pytest.approx(spread * 1000.0, abs=1.0)


def restarts(lab: Lab, pod: str) -> int:
    statuses = (pods(lab).get(pod) or {}).get("status", {}).get("containerStatuses") or []
    return sum(int(item.get("restartCount") or 0) for item in statuses)


def pod_records(lab: Lab, record_type: str, key: str) -> list[dict[str, object]]:
    return [
        r
        for r in read_history(history_dir(lab))
        if r["record_type"] == record_type and r["record_key"] == key
    ]


def test_restarts_outside_the_stagger_leave_pod_records_and_a_stop_the_world_estimate(
    lab: Lab,
) -> None:
    eventually(lambda: stable_with_three(lab), 120, "the example group, 3 members, Stable")

    # A consumer crashes and the kubelet starts it again: nobody released that start.
    crashed = "orders-consumer-2"
    uid = pods(lab)[crashed]["metadata"]["uid"]
    pid = eventually(lambda: consumer_pid(lab, crashed), 30, f"{crashed}'s consumer")
    os.kill(pid, signal.SIGKILL)
    eventually(lambda: restarts(lab, crashed) >= 1, 60, f"the kubelet to restart {crashed}")
    (start,) = eventually(
        lambda: pod_records(lab, "pod-start", f"pod-start/{uid}/1"),
        180,  # written once the member joined again, or after the pairing wait
        f"a pod-start record of {crashed}'s second run",
    )
    (stop,) = eventually(
        lambda: pod_records(lab, "pod-stop", f"pod-stop/{uid}/0"),
        30,
        f"a pod-stop record of {crashed}'s first run",
    )
    print("CRASH", json.dumps({k: start[k] for k in ("detected_at", "batch_id", "source")}))
    assert start["source"] == stop["source"] == "kubernetes", (start, stop)
    assert start["member"] == stop["member"] == crashed, (start, stop)
    assert stop["departure"] == "crash", stop
    assert float(str(stop["detected_at"])) <= float(str(start["detected_at"])), (stop, start)
    assert start["rollout_id"] is None, "no rollout released it"
    # The pod's first run was the stagger's: that start is its release, not written twice.
    assert pod_records(lab, "pod-start", f"pod-start/{uid}/0") != [] or any(
        r["member"] == crashed and r["source"] == "operator"
        for r in read_history(history_dir(lab))
        if r["record_type"] == "pod-start"
    )
    eventually(lambda: stable_with_three(lab), 180, "the group settled after the crash")

    # A pod deleted: its consumer gives its partitions up as it closes, the others take them.
    assert lab.api_client is not None
    leaver = "orders-consumer-1"
    leaver_uid = pods(lab)[leaver]["metadata"]["uid"]
    deleted_at = time.time()
    client.CoreV1Api(lab.api_client).delete_namespaced_pod(leaver, "default")
    (left,) = eventually(
        lambda: pod_records(lab, "pod-stop", f"pod-stop/{leaver_uid}/0"),
        60,
        f"a pod-stop record of {leaver}",
    )
    assert left["departure"] == "leave" and left["source"] == "kubernetes", left
    assert abs(float(str(left["detected_at"])) - deleted_at) < 5.0, (left, deleted_at)

    def estimated() -> list[dict[str, object]]:
        return [
            r
            for r in read_history(history_dir(lab))
            if r["record_type"] == "rebalance"
            and float(str(r["detected_at"])) >= deleted_at
            and r["stop_the_world_partition_s"] is not None
        ]

    found = eventually(estimated, 120, "a rebalance after the delete with a stop-the-world")
    print("STOP-THE-WORLD", [(r["generation"], r["cause"], r["joined"], r["left"],
                              r["stop_the_world_partition_s"]) for r in found])  # fmt: skip
    # The group consumed throughout: the estimate is the partitions' wait between the leaver's
    # revocation and the others' assignment, not the cold-start formula (0 < it < 6 partitions
    # x 60 s).
    assert any(0.0 < float(str(r["stop_the_world_partition_s"])) < 360.0 for r in found), found
    assert all(r["previous_generation"] is not None for r in found), found
    eventually(lambda: stable_with_three(lab), 180, "the group settled after the delete")

    # An operator that restarts meets the same pods again: it writes none of their facts twice
    # (its first look skips the keys in the store).
    def keys() -> list[str]:
        return [str(r["record_key"]) for r in read_history(history_dir(lab)) if r["record_key"]]

    before = keys()
    restart_operator(lab)
    restarted_at = time.time()

    def observed_again() -> bool:
        group = (get_cg(lab, "orders").get("status") or {}).get("group") or {}
        stamp = str(group.get("observedAt") or "")
        seen = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
        return seen is not None and seen.timestamp() > restarted_at + 1.0

    eventually(observed_again, 90, "an observation by the restarted operator")
    time.sleep(3)
    after = keys()
    print("KEYS", len(before), len(after))
    assert len(after) == len(set(after)), sorted(k for k in after if after.count(k) > 1)
    assert set(before) <= set(after)
    eventually(lambda: stable_with_three(lab), 120, "the group Stable after the restart")


def write_recommendation(
    lab: Lab, run_id: str, session_ms: float, batch: int, improvement: float = 0.3
) -> None:
    """A recommendation set as `rebalancer learn` writes it, through the job's own writer."""
    facts = GroupFacts(
        cluster=lab.bootstrap,
        namespace="default",
        name="orders",
        group_id="orders",
        members=3,
        partitions=6,
        rollouts_per_day=4.0,
        departures_per_day=2.0,
        processing_ms=500.0,
        latency_p50_ms=800.0,
        latency_p90_ms=1500.0,
        join_samples=60,
        rebalance_samples=30,
        departure_samples=12,
        current_session_ms=6000.0,
        current_batch_size=3,
    )
    default_cost = 100.0
    choice = GroupChoice(
        facts=facts,
        delay_ms=1000.0,
        batch_size=batch,
        session_timeout_ms=session_ms,
        cost_per_day_s=default_cost * (1.0 - improvement),
        default_cost_per_day_s=default_cost,
        startup_cost_s=None,
        default_startup_cost_s=None,
        departure_cost_s=None,
        default_departure_cost_s=None,
    )
    cluster = ClusterChoice(lab.bootstrap, 1000.0, 1, 1, None)
    output = build_output(
        run_id=run_id,
        options_history=str(history_dir(lab)),
        inputs=find_inputs(history_dir(lab)),
        clusters=[cluster],
        choices=[choice],
        spreads=[],
        messages=[],
    )
    write_output(str(recommendations_dir(lab)), output)


def learning_status(lab: Lab) -> dict[str, Any]:
    return dict((get_cg(lab, "orders").get("status") or {}).get("learning") or {})


def test_auto_mode_applies_a_recommendation_within_bounds_once_per_interval(lab: Lab) -> None:
    eventually(lambda: stable_with_three(lab), 120, "the example group, 3 members, Stable")
    assert lab.api_client is not None
    custom = client.CustomObjectsApi(lab.api_client)
    policy = {
        # One pod at a time, so the applied change can be followed pod by pod.
        "rollout": {"enabled": True, "maxBatchSize": 1, "settleSeconds": 2},
        "settings": {"sessionTimeoutMs": 6000, "heartbeatIntervalMs": 1500},
        "learning": {
            "mode": "auto",
            "minIntervalMinutes": 60,
            "bounds": {
                "sessionTimeoutMs": {"min": 6000, "max": 20000},
                "batchSize": {"min": 1, "max": 1},
            },
        },
    }
    custom.patch_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", "default", "consumergroups", "orders",
        {"spec": {"policy": policy}},
    )  # fmt: skip

    # Managed settings first (a rollout of their own), with nothing recommended yet.
    def settings_rolled_out() -> dict[str, Any] | None:
        settings = (get_cg(lab, "orders").get("status") or {}).get("settings") or {}
        current = pods(lab)
        done = (
            settings.get("applied")
            and len(current) == 3
            and all(
                f"settings-hash={settings['hash']}" in settings_line(lab, p)
                for p in current.values()
            )
        )
        return settings if done else None

    eventually(settings_rolled_out, 240, "the managed settings in every pod")
    eventually(lambda: rollout_done(lab), 120, "the settings rollout completed")
    eventually(lambda: stable_with_three(lab), 120, "the group settled after the settings")
    waiting = eventually(
        lambda: (status := learning_status(lab)).get("reason") == "NoRecommendation" and status,
        30,
        "status.learning saying nothing is recommended yet",
    )
    assert waiting["action"] == "none"
    before = {name: pod["metadata"]["uid"] for name, pod in pods(lab).items()}

    # The job recommends a session timeout and a batch size above the bounds: both are
    # clamped; the session timeout goes through spec.policy, the batch size is at its bound
    # already.
    write_recommendation(lab, "run-1", session_ms=120000.0, batch=5)
    applied_at = time.time()

    def applied() -> dict[str, Any] | None:
        status = learning_status(lab)
        return status if status.get("runId") == "run-1" and status.get("lastAppliedTime") else None

    status = eventually(applied, 60, "status.learning showing run-1 applied")
    assert set(status["clamped"]) >= {"sessionTimeoutMs", "batchSize"}, status
    stamp = datetime.datetime.fromisoformat(status["lastAppliedTime"].replace("Z", "+00:00"))
    assert stamp.timestamp() >= applied_at - 1.0, status
    spec_policy = get_cg(lab, "orders")["spec"]["policy"]
    assert spec_policy["settings"]["sessionTimeoutMs"] == 20000, spec_policy
    assert spec_policy["rollout"]["maxBatchSize"] == 1, spec_policy
    assert "brokerDelay" not in spec_policy, "a delay is never applied without a brokerDelay policy"
    reasons = [e["reason"] for e in events_for(lab, "orders")]
    assert reasons.count("RecommendationApplied") == 1, reasons

    # The pods roll with the learned settings, in batches of the learned (clamped) size.
    def restarted() -> dict[str, dict[str, Any]] | None:
        now = pods(lab)
        fresh = {n: p for n, p in now.items() if p["metadata"]["uid"] != before.get(n)}
        done = len(fresh) == 3 and all(
            "session.timeout.ms=20000" in settings_line(lab, p) for p in fresh.values()
        )
        return fresh if done else None

    eventually(restarted, 300, "every pod restarted with session.timeout.ms=20000")
    rollout = eventually(lambda: rollout_done(lab), 180, "the learned settings' rollout done")
    print("ROLLOUT", json.dumps(rollout))
    assert rollout.get("batches") == 3, rollout
    eventually(lambda: stable_with_three(lab), 120, "the group settled after the learned settings")

    # A newer recommendation inside minIntervalMinutes is shown, not applied.
    write_recommendation(lab, "run-2", session_ms=12000.0, batch=2)
    status = eventually(
        lambda: (s := learning_status(lab)).get("runId") == "run-2" and s,
        60,
        "status.learning showing run-2",
    )
    assert status["reason"] == "WaitingForInterval", status
    assert status["action"] == "show", status
    assert status["recommended"]["sessionTimeoutMs"] == 12000.0, status
    time.sleep(12)  # two more observations
    spec_policy = get_cg(lab, "orders")["spec"]["policy"]
    assert spec_policy["settings"]["sessionTimeoutMs"] == 20000, spec_policy
    assert spec_policy["rollout"]["maxBatchSize"] == 1, spec_policy
    assert learning_status(lab)["reason"] == "WaitingForInterval"
    reasons = [e["reason"] for e in events_for(lab, "orders")]
    assert reasons.count("RecommendationApplied") == 1, reasons
