"""The operator, against the lab's broker and control plane, reports real groups and rebalances."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    consumer_log_generations,
    events_for,
    eventually,
    get_cg,
    kubectl,
    statefulset,
)

from rebalancer.learning.history_table import read_history
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e


def test_status_and_events_follow_real_rebalances(lab: Lab) -> None:
    apply(lab, statefulset("orders-consumer"), consumer_group("orders", lab.bootstrap))
    lab.start_producer()
    first = lab.start_consumer(0)
    second = lab.start_consumer(1)

    def two_settled_members() -> dict[str, object] | None:
        body = get_cg(lab, "orders")
        group = body.get("status", {}).get("group", {})
        ready = condition(body, "Ready")
        if group.get("members") == 2 and ready.get("status") == "True":
            return body
        return None

    body = eventually(two_settled_members, 90, "2 members, Ready")
    group = body["status"]["group"]
    assert group["state"] == "Stable"
    assert group["assignedPartitions"] == group["totalPartitions"] == 6
    # Apache Kafka describes the members itself; the reports add what only members know.
    assert group["sources"]["members"] == "broker"
    assert group["sources"]["state"] == "broker"
    assert body["status"]["observedGeneration"] == body["metadata"]["generation"]

    # Every generation the consumers lived through on the broker is one Rebalance event.
    seen_by_consumers = consumer_log_generations(first.log_path) | consumer_log_generations(
        second.log_path
    )
    assert seen_by_consumers, "consumers printed no generation"

    def rebalance_events_cover_generations() -> list[dict[str, object]] | None:
        events = [e for e in events_for(lab, "orders") if e["reason"] == "Rebalance"]
        messages = " ".join(str(e["message"]) for e in events)
        if all(
            f"generation {g}:" in messages or f"generation {g};" in messages
            for g in seen_by_consumers
        ):
            return events
        return None

    eventually(rebalance_events_cover_generations, 30, f"events for {seen_by_consumers}")
    recorded = get_cg(lab, "orders")["status"]["group"]
    assert recorded["rebalances"] >= len(seen_by_consumers)
    assert recorded["generation"] == max(seen_by_consumers)

    table = kubectl(lab, "get", "consumergroups").splitlines()
    header = table[0].split()
    for column in ("NAME", "GROUP", "STATE", "MEMBERS", "GENERATION", "ROLLOUT", "READY", "AGE"):
        assert column in header
    starts = [table[0].index(column) for column in header]
    cells = [table[1][a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    row = dict(zip(header, cells, strict=True))
    assert row["NAME"] == row["GROUP"] == "orders"
    assert row["STATE"] == "Stable" and row["MEMBERS"] == "2" and row["READY"] == "True"
    assert row["GENERATION"] == str(max(seen_by_consumers))

    # A member leaves cleanly: one more rebalance, caused by member-left, and one member.
    before = recorded["rebalances"]
    second.stop()

    def one_member() -> dict[str, object] | None:
        status = get_cg(lab, "orders")["status"]
        return status if status["group"]["members"] == 1 else None

    status = eventually(one_member, 60, "the group to shrink to 1 member")
    eventually(
        lambda: get_cg(lab, "orders")["status"]["group"]["rebalances"] > before,
        30,
        "a rebalance after the member left",
    )
    causes = [str(e["message"]) for e in events_for(lab, "orders") if e["reason"] == "Rebalance"]
    assert any("member-left" in message for message in causes), causes
    assert status["group"]["memberDetails"][0]["host"] == "orders-consumer-0"

    # History has one rebalance record per detected rebalance (member-join records sit beside).
    records = [
        record
        for record in read_history(lab.config.state_dir / "history")
        if record.get("name") == "orders" and record.get("record_type") == "rebalance"
    ]
    assert {record["generation"] for record in records} >= seen_by_consumers

    # Deleting the ConsumerGroup leaves the workload alone.
    kubectl(lab, "delete", "consumergroup", "orders", "--wait=true", "--timeout=30s")
    assert "orders-consumer" in kubectl(lab, "get", "statefulsets")
    time.sleep(1)
    assert first.running, "deleting the ConsumerGroup must not touch the consumers"


def test_a_kip848_group_is_reported_with_its_protocol_and_target_assignment(lab: Lab) -> None:
    # A group id of its own: the broker is shared by the session.
    name = f"kip-{uuid.uuid4().hex[:6]}"
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    apply(lab, statefulset(f"{name}-consumer"), consumer_group(name, lab.bootstrap))
    protocol = {"KAFKA_GROUP_PROTOCOL": "consumer"}
    for index in range(2):
        lab.start_consumer(index, group_id=name, prefix=f"{name}-consumer", env=protocol)

    def settled() -> dict[str, object] | None:
        body = get_cg(lab, name)
        group = body.get("status", {}).get("group", {})
        ready = condition(body, "Ready")
        # Each member is named by its pod once its first report is in.
        hosts = sorted(d.get("host") for d in group.get("memberDetails", []))
        pods = [f"{name}-consumer-0", f"{name}-consumer-1"]
        if hosts == pods and ready.get("status") == "True":
            return body
        return None

    group = eventually(settled, 90, "2 KIP-848 members named by their pods, Ready")["status"][
        "group"
    ]
    assert group["protocol"] == "consumer"
    # The broker's assignor, as ConsumerGroupDescribe names it; no client assignor applies.
    assert group["assignor"] == "uniform"
    assert group["state"] == "Stable" and group["membersReconciling"] == 0
    details = group["memberDetails"]
    assert all(d["targetPartitions"] == d["partitions"] for d in details)
    assert sum(d["partitions"] for d in details) == 6
    wide = kubectl(lab, "get", "consumergroup", name, "-o", "wide").splitlines()
    header = wide[0].split()
    assert "PROTOCOL" in header
    assert wide[1].split()[header.index("PROTOCOL")] == "consumer"


def test_unreachable_kafka_is_degraded_and_named(lab: Lab) -> None:
    apply(lab, consumer_group("nowhere", "127.0.0.1:1"))

    def degraded() -> dict[str, object] | None:
        found = condition(get_cg(lab, "nowhere"), "Degraded")
        return found if found.get("status") == "True" else None

    found = eventually(degraded, 60, "Degraded on an unreachable cluster")
    assert found["reason"] == "KafkaUnreachable"
    assert "127.0.0.1:1" in str(found["message"])
    warnings = [e for e in events_for(lab, "nowhere") if e["type"] == "Warning"]
    assert any(e["reason"] == "KafkaUnreachable" for e in warnings)
    assert lab.operator is not None and lab.operator.running
    kubectl(lab, "delete", "consumergroup", "nowhere", "--wait=true", "--timeout=30s")


def test_missing_secret_is_degraded_and_then_recovers(lab: Lab) -> None:
    body = consumer_group("secured", lab.bootstrap)
    body["spec"]["kafka"]["sasl"] = {
        "mechanism": "PLAIN",
        "usernameSecretRef": {"name": "kafka-creds", "key": "username"},
        "passwordSecretRef": {"name": "kafka-creds", "key": "password"},
    }
    apply(lab, body)

    def degraded() -> dict[str, object] | None:
        found = condition(get_cg(lab, "secured"), "Degraded")
        return found if found.get("reason") == "SecretNotFound" else None

    found = eventually(degraded, 60, "SecretNotFound")
    assert "default/kafka-creds" in str(found["message"])
    assert "spec.kafka.sasl.usernameSecretRef" in str(found["message"])
    secret_value = "s3cr3t-planted-value"
    apply(
        lab,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kafka-creds", "namespace": "default"},
            "stringData": {"username": "reader", "password": secret_value},
        },
    )

    def moved_on() -> dict[str, object] | None:
        found = condition(get_cg(lab, "secured"), "Degraded")
        return found if found.get("reason") != "SecretNotFound" else None

    eventually(moved_on, 90, "the operator to read the new Secret")
    everything = kubectl(lab, "get", "consumergroup", "secured", "-o", "yaml")
    everything += kubectl(lab, "get", "events", "-o", "yaml")
    assert lab.operator is not None
    everything += lab.operator.log_path.read_text(errors="replace")
    assert secret_value not in everything
    kubectl(lab, "delete", "consumergroup", "secured", "--wait=true", "--timeout=30s")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"groupId": None}, "spec.groupId"),
        ({"kafka": {"bootstrapServers": "k:9092"}}, "spec.kafka.bootstrapServers"),
        (
            {"kafka": {"bootstrapServers": ["k:9092"], "requestTimeoutSeconds": 0}},
            "spec.kafka.requestTimeoutSeconds",
        ),
        ({"workload": {"kind": "DaemonSet", "name": "x"}}, "spec.workload.kind"),
        ({"subscription": {"topics": ["a"], "pattern": "a.*"}}, "spec.subscription"),
        (
            {"policy": {"observe": {"intervalSeconds": "often"}}},
            "spec.policy.observe.intervalSeconds",
        ),
    ],
)
def test_schema_rejects_bad_resources_naming_the_field(
    lab: Lab, change: dict[str, object], field: str
) -> None:
    body = consumer_group("bad", lab.bootstrap)
    for key, value in change.items():
        if value is None:
            body["spec"].pop(key)
        else:
            body["spec"][key] = value
    import yaml

    out = kubectl(lab, "apply", "-f", "-", stdin=yaml.safe_dump(body), check=False)
    assert "is invalid" in out, out
    assert field in out, out


def test_operator_reports_what_the_schema_cannot_check(lab: Lab) -> None:
    apply(lab, consumer_group("backtracking", lab.bootstrap, subscription={"pattern": "(a+)+$"}))

    def invalid() -> dict[str, object] | None:
        found = condition(get_cg(lab, "backtracking"), "Degraded")
        return found if found.get("reason") == "InvalidSpec" else None

    found = eventually(invalid, 30, "InvalidSpec")
    assert "spec.subscription.pattern" in str(found["message"])
    assert "fix:" in str(found["message"])
    warnings = [e for e in events_for(lab, "backtracking") if e["reason"] == "InvalidSpec"]
    assert warnings and warnings[0]["type"] == "Warning"
    kubectl(lab, "delete", "consumergroup", "backtracking", "--wait=true", "--timeout=30s")


def test_prometheus_in_the_lab_shows_the_series(lab: Lab) -> None:
    from rebalancer_lab.prometheus import query

    if lab.prometheus_url is None:
        pytest.skip("no prometheus binary installed (Debian package prometheus)")
    url = lab.prometheus_url
    apply(lab, statefulset("metered-consumer"), consumer_group("metered", lab.bootstrap))

    def series() -> list[dict[str, object]] | None:
        found = query(url, 'rebalancer_group_state{consumergroup="metered"} == 1')
        return found or None

    found = eventually(series, 60, "rebalancer_group_state in Prometheus")
    labels = found[0]["metric"]
    assert isinstance(labels, dict)
    assert labels["namespace"] == "default"
    assert labels["state"] in {"Empty", "Unknown", "Dead"}
    assert query(url, "rebalancer_operator_info")
    assert query(url, 'rebalancer_group_ready{consumergroup="metered"}')
    kubectl(lab, "delete", "consumergroup", "metered", "--wait=true", "--timeout=30s")


def test_learned_recommendations_are_shown_in_status(lab: Lab) -> None:
    import datetime
    import json

    from rebalancer.clients.recommending import SUMMARY_FILE
    from rebalancer.structs.recommendations import SUMMARY_SCHEMA

    folder = lab.config.state_dir / "history" / "_recommendations"
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    summary = {
        "schema": SUMMARY_SCHEMA,
        "runId": "run-1",
        "generatedAt": now,
        "groups": {
            "default/learned": {
                "cluster": lab.bootstrap,
                "initialRebalanceDelayMs": 900.0,
                "batchSize": 4,
                "sessionTimeoutMs": 20000.0,
                "expectedCostPerDaySeconds": 50.0,
                "defaultCostPerDaySeconds": 80.0,
                "improvement": 0.375,
            }
        },
    }
    (folder / SUMMARY_FILE).write_text(json.dumps(summary))
    body = consumer_group("learned", lab.bootstrap)
    body["spec"]["policy"]["learning"] = {"mode": "recommend"}
    apply(lab, body)

    def shown() -> dict[str, object] | None:
        learning = get_cg(lab, "learned").get("status", {}).get("learning") or {}
        return learning if learning.get("runId") == "run-1" else None

    learning = eventually(shown, 60, "status.learning")
    assert learning["action"] == "show"
    assert learning["recommended"] == {
        "initialRebalanceDelayMs": 900.0,
        "batchSize": 4,
        "sessionTimeoutMs": 20000.0,
    }
    assert learning["lastAppliedTime"] is None
    spec = get_cg(lab, "learned")["spec"]
    assert "maxBatchSize" not in (spec["policy"].get("rollout") or {}), "recommend never applies"
    kubectl(lab, "delete", "consumergroup", "learned", "--wait=true", "--timeout=30s")
