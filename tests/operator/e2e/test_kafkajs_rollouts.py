"""A kafkajs fleet under a managed rollout with the injected sidecar, enforced after the rollout.

Real parts: Apache Kafka, Kubernetes' own control plane, the lab's kubelet (each container a real
process: the application is kafkajs, `node tests/clients/kafka/kafkajs/consumer.js`, the injected
sidecar `rebalancer sidecar`), and the operator with its rollout planner, settings handler and
enforce timer. The fleet names no Kafka settings; its group's protocol is kafkajs'
`RoundRobinAssigner`, which the sidecars visit (docs/enforcing.md, "Client libraries").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kubernetes import client
from tests.clients.kafka.kafkajs_support import ensure_kafkajs
from tests.operator.e2e.support import (
    apply,
    events_for,
    eventually,
    free_port,
    get_cg,
    kubectl,
    running_lab,
)

from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
NAME = "kjs"
WORKLOAD = f"{NAME}-consumer"
TOKEN = "lab-kafkajs-token"
PARTITIONS = 6


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"), fleet=False, pods=True, partitions=PARTITIONS
    ) as running:
        yield running


def statefulset(lab: Lab, version: str) -> dict[str, Any]:
    script = ensure_kafkajs()
    container = {
        "name": "consumer",
        "image": "node:20",
        "command": ["node", str(script), lab.bootstrap, NAME, NAME, "$(POD_NAME)"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SESSION_TIMEOUT_MS", "value": "10000"},
            {"name": "HEARTBEAT_INTERVAL_MS", "value": "1000"},
            {"name": "ORDERS_VERSION", "value": version},
            # What the operator copies into the sidecar: where Kafka is, and no strategy.
            {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": lab.bootstrap},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": WORKLOAD, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "serviceName": WORKLOAD,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
                "spec": {"containers": [container]},
            },
        },
    }


def pods(lab: Lab) -> dict[str, dict[str, Any]]:
    assert lab.api_client is not None
    items = json.loads(
        client.CoreV1Api(lab.api_client).list_namespaced_pod("default", _preload_content=False).data
    )["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(WORKLOAD)}


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def kafkajs_events(lab: Lab, pod: dict[str, Any]) -> list[dict[str, Any]]:
    meta = pod["metadata"]
    folder = lab.config.state_dir / "logs" / "pods" / f"default_{meta['name']}_{meta['uid']}"
    events = []
    for path in sorted((folder / "consumer").glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            start = line.find("{")
            try:
                event = json.loads(line[start:]) if start >= 0 else None
            except ValueError:
                continue
            if isinstance(event, dict) and "event" in event:
                events.append(event)
    return events


def every_consumed_key(lab: Lab) -> set[str]:
    """Keys consumed by any kafkajs container of the workload, the replaced pods' included."""
    keys: set[str] = set()
    for folder in (lab.config.state_dir / "logs" / "pods").glob(f"default_{WORKLOAD}-*"):
        for path in (folder / "consumer").glob("*.log"):
            for line in path.read_text(errors="replace").splitlines():
                start = line.find("{")
                try:
                    event = json.loads(line[start:]) if start >= 0 else None
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "message":
                    keys.add(str(event["key"]))
    return keys


def produce(lab: Lab, keys: range) -> None:
    producer = Producer({"bootstrap.servers": lab.bootstrap})
    for key in keys:
        producer.produce(NAME, key=str(key), value=b"order")
    assert producer.flush(15) == 0


def test_a_kafkajs_fleet_rolls_out_managed_and_is_enforced_once_after(lab: Lab) -> None:
    import asyncio

    from rebalancer_lab.producer import ensure_topic

    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    everything = {(NAME, partition) for partition in range(PARTITIONS)}
    produce(lab, range(100))
    port = free_port()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{NAME}-token", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    group = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": NAME, "namespace": "default"},
        "spec": {
            "groupId": NAME,
            "kafka": {"bootstrapServers": [lab.bootstrap]},
            "subscription": {"topics": [NAME]},
            "workload": {"kind": "StatefulSet", "name": WORKLOAD},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 20},
                "rollout": {"enabled": True, "maxBatchSize": 1, "settleSeconds": 2},
                "enforce": {
                    "afterRollout": True,
                    "sidecar": {
                        "inject": True,
                        "port": port,
                        "tokenSecretRef": {"name": f"{NAME}-token"},
                    },
                },
            },
        },
    }
    apply(lab, secret, statefulset(lab, "1"), group)

    def injected() -> dict[str, Any] | None:
        status = get_cg(lab, NAME).get("status") or {}
        sidecar = (status.get("settings") or {}).get("sidecar") or {}
        found = pods(lab)
        with_sidecar = [
            p
            for p in found.values()
            if ready(p) and "rebalancer-sidecar" in [c["name"] for c in p["spec"]["containers"]]
        ]
        return status if sidecar.get("rolledOut") and len(with_sidecar) == 2 else None

    eventually(injected, 240, "the sidecar injected into both pods by a managed rollout")

    def settled() -> int | None:
        current = list(pods(lab).values())
        latest = []
        for pod in current:
            assigned = [e for e in kafkajs_events(lab, pod) if e["event"] == "assigned"]
            if not assigned:
                return None
            latest.append(assigned[-1])
        generations = {e["generation"] for e in latest}
        covered = {(t, p) for e in latest for t, ps in (e["assignment"] or {}).items() for p in ps}
        if len(current) != 2 or len(generations) != 1 or covered != everything:
            return None
        return generations.pop()

    eventually(settled, 60, "the kafkajs pods settle")

    def baseline() -> dict[str, Any] | None:
        # The injection's rollout is complete and the enforce timer has taken its revision as
        # the baseline (the first finished rollout enforces nothing); a template change before
        # that would join the injection's rollout and be taken as the baseline itself.
        status = get_cg(lab, NAME).get("status") or {}
        completed = (status.get("rollout") or {}).get("completedRevision")
        enforcement = status.get("enforcement") or {}
        remembered = (enforcement.get("memory") or {}).get("rollout")
        return enforcement if completed and remembered == completed else None

    revision = eventually(baseline, 60, "the injection's rollout taken as the baseline")
    # A template change: a managed rollout of the kafkajs pods, then one enforced rebalance.
    kubectl(
        lab,
        "set",
        "env",
        f"statefulset/{WORKLOAD}",
        "-c",
        "consumer",
        "ORDERS_VERSION=2",
    )
    produce(lab, range(100, 200))

    def enforced_after_rollout() -> dict[str, Any] | None:
        enforcement = (get_cg(lab, NAME).get("status") or {}).get("enforcement") or {}
        done = enforcement.get("lastStatus") == "enforced"
        new = enforcement.get("lastRequestId") != revision.get("lastRequestId")
        return (
            enforcement if done and new and "rollout" in str(enforcement.get("lastCause")) else None
        )

    enforcement = eventually(enforced_after_rollout, 240, "enforced after the rollout")
    produce(lab, range(200, 300))
    after = eventually(settled, 60, "the kafkajs pods settle again")
    current = list(pods(lab).values())
    # The enforcement's generation: both current pods rejoined into it, one generation after
    # the one they held when the rollout's last pod had joined.
    for pod in current:
        generations = [
            e["generation"] for e in kafkajs_events(lab, pod) if e["event"] == "assigned"
        ]
        assert generations[-1] == after and after - 1 in generations, (
            pod["metadata"]["name"],
            generations,
        )
    messages = [
        str(e["message"]) for e in events_for(lab, NAME) if e["reason"] == "RebalanceEnforced"
    ]
    assert any(
        "every member rejoined (2 of 2)" in m and "held no partition" in m for m in messages
    ), (messages, enforcement)
    expected = {str(key) for key in range(300)}
    eventually(lambda: expected <= every_consumed_key(lab), 60, "every message consumed")
