"""A stateful Kafka Streams application rolled by the operator with static membership.

Real parts: Apache Kafka 4.4, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a JVM running the example application of `examples/streams-app`, built with
Maven: a per-key count in a RocksDB store with a changelog topic) and the operator, whose rollout
planner steps the StatefulSet's partition. group.instance.id is the pod's name. On the classic
protocol each pod's state is in an emptyDir, so a replaced pod restores its tasks from their
changelogs, which its restore listener logs; on the streams protocol (KIP-1071) each pod's state
is kept across its replacement, as a volume claim per pod keeps it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from tests.operator.e2e.support import (
    apply,
    eventually,
    get_cg,
    kubectl,
    lab_context,
    running_lab,
)

from rebalancer.learning.history_table import read_history
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab
from rebalancer_lab.streams_example import (
    example_jar,
    joined_generations,
    pod_events,
    streams_statefulset,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]
PARTITIONS = 6
REPLICAS = 3
KEYS = 12000
SESSION_MS = 60000  # a replaced pod is back well within it, even on a loaded machine


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    example_jar()  # built (once per source change) before the lab's clock starts
    with running_lab(tmp_path_factory.mktemp("lab"), fleet=False, pods=True) as running:
        yield running


def produce(lab: Lab, name: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": lab.bootstrap, "linger.ms": 20})
    for n in range(start, start + count):
        producer.produce(f"{name}-input", key=f"key-{n % KEYS}", value=b"1")
        if n % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def changelog_records(lab: Lab, name: str) -> int:
    consumer = Consumer({"bootstrap.servers": lab.bootstrap, "group.id": f"{name}-peek"})
    changelog = f"{name}-counts-changelog"
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(changelog, p), timeout=10)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


def pods(lab: Lab, name: str) -> dict[str, dict[str, Any]]:
    out = kubectl(lab, "get", "pods", "-n", "default", "-l", f"app={name}", "-o", "json")
    items = json.loads(out[: out.rindex("}") + 1])["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def folder(lab: Lab, pod: dict[str, Any]) -> Path:
    meta = pod["metadata"]
    return lab.config.state_dir / "logs" / "pods" / f"default_{meta['name']}_{meta['uid']}"


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def version_of(pod: dict[str, Any]) -> str:
    env = pod["spec"]["containers"][0]["env"]
    return next(str(e["value"]) for e in env if e["name"] == "APP_VERSION")


def running_tasks(events: list[dict[str, Any]]) -> list[str] | None:
    """The active tasks of the pod's latest state change, when that change was to RUNNING."""
    states = [e for e in events if e["event"] == "state"]
    if not states or states[-1]["to"] != "RUNNING":
        return None
    return list(states[-1]["active"])


def managed_group(lab: Lab, name: str, protocol: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap], "profile": "apache-kafka"},
            "subscription": {"topics": [f"{name}-input"]},
            "workload": {"kind": "StatefulSet", "name": name},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 20},
                "rollout": {
                    "enabled": True,
                    "maxBatchSize": 1,
                    "settleSeconds": 2,
                    "consumers": {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": 3000},
                },
            },
        },
    }
    if protocol == "streams":
        # A streams group's session is the group's config, not the client's; declared, the
        # group is read as a streams group from the first look.
        body["spec"]["policy"]["groupConfigs"] = {"streams": {"sessionTimeoutMs": SESSION_MS}}
        body["spec"]["policy"]["protocol"] = "streams"
    return body


def observed_at(lab: Lab, name: str) -> str | None:
    return ((get_cg(lab, name).get("status") or {}).get("group") or {}).get("observedAt")


def streams_joins(lab: Lab, name: str) -> list[dict[str, Any]] | None:
    found = [
        r
        for r in read_history(lab.config.state_dir / "history")
        if r["record_type"] == "member-join" and r["group_id"] == name
    ]
    members = {str(r["member"]) for r in found}
    return found if members >= {f"{name}-{n}" for n in range(REPLICAS)} else None


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_a_static_streams_statefulset_rolls_without_a_rebalance(lab: Lab, protocol: str) -> None:
    name = "counts" if protocol == "classic" else "kcounts"
    changelog = f"{name}-counts-changelog"
    asyncio.run(ensure_topic(lab.bootstrap, f"{name}-input", PARTITIONS))
    produce(lab, name, 0, 2 * KEYS)
    kept = lab.config.state_dir / f"{name}-state" if protocol == "streams" else None
    fleet = streams_statefulset(
        name,
        lab.bootstrap,
        f"{name}-input",
        REPLICAS,
        group_protocol=protocol,
        session_timeout_ms=SESSION_MS,
        commit_interval_ms=1000,
        state_root=kept,
    )
    context = lab_context(lab, name)
    if protocol == "streams":
        # The operator looks at the group before its members come, as when a ConsumerGroup is
        # in place before its application's first start: the members it then finds are joins.
        apply(lab, managed_group(lab, name, protocol))
        eventually(lambda: observed_at(lab, name), 60, "a first observation", 1, context)
        first = (get_cg(lab, name).get("status") or {}).get("group") or {}
        assert first.get("protocol") == "streams", first  # declared, before any member
    apply(lab, fleet, managed_group(lab, name, protocol))

    def settled() -> dict[str, list[str]] | None:
        current = pods(lab, name)
        tasks = {pod: running_tasks(pod_events(folder(lab, body))) for pod, body in current.items()}
        held = [t for found in tasks.values() for t in found or []]
        whole = len(current) == REPLICAS and all(ready(p) for p in current.values())
        if not whole or sorted(held) != sorted(f"0_{p}" for p in range(PARTITIONS)):
            return None
        return {pod: found or [] for pod, found in tasks.items()}

    eventually(settled, 180, "three pods RUNNING with the six tasks between them", 1, context)
    eventually(lambda: changelog_records(lab, name) >= KEYS or None, 60, "every key counted")

    def observed() -> dict[str, Any] | None:
        group = (get_cg(lab, name).get("status") or {}).get("group") or {}
        done = group.get("members") == REPLICAS and group.get("state") == "Stable"
        # A streams group's status counts tasks (one per input partition), not partitions.
        held = group.get("assignedPartitions" if protocol == "classic" else "activeTasks")
        return group if done and held == PARTITIONS else None

    before = eventually(observed, 60, "the operator sees the group Stable", 1, context)
    if protocol == "streams":
        # A streams application sends no member reports: its members' joins come from the
        # group's describes, recorded with the group's protocol for the learning job.
        joins = eventually(lambda: streams_joins(lab, name), 60, "a join record per pod")
        assert {r["group_protocol"] for r in joins} == {"streams"}, joins
    tasks_before = eventually(settled, 30, "still settled")
    old = pods(lab, name)
    if protocol == "classic":
        # The generation the group is in: the last one each pod joined, the same for all.
        generations = {pod: joined_generations(folder(lab, body)) for pod, body in old.items()}
        assert all(found for found in generations.values()), generations
        assert len({found[-1] for found in generations.values()}) == 1, generations
        generation = next(iter(generations.values()))[-1]
    else:
        # The group epoch, as the broker describes it (StreamsGroupDescribe).
        generation = before["generation"]
    events_before = {pod: len(pod_events(folder(lab, body))) for pod, body in old.items()}

    # A template change: the operator rolls the pods one at a time (the partition stepped down).
    changed = time.time()
    kubectl(lab, "set", "env", f"statefulset/{name}", "-c", "streams", "APP_VERSION=2")
    produce(lab, name, 2 * KEYS, KEYS)

    def rolled() -> dict[str, Any] | None:
        rollout = (get_cg(lab, name).get("status") or {}).get("rollout") or {}
        done = rollout.get("phase") == "Completed" and rollout.get("kind") == "rolling-update"
        return rollout if done else None

    rollout = eventually(rolled, 240, "the rolling update Completed", 1, context)
    rolled_in = time.time() - changed

    def replaced() -> dict[str, list[str]] | None:
        current = pods(lab, name)
        fresh = all(version_of(p) == "2" for p in current.values())
        return settled() if fresh and set(current) == set(old) else None

    tasks_after = eventually(replaced, 120, "three new pods RUNNING", 1, context)
    after = eventually(observed, 60, "the operator sees the group Stable again", 1, context)
    new = pods(lab, name)

    # Static membership: each pod came back under its name to the tasks it had...
    assert tasks_after == tasks_before, (tasks_before, tasks_after)
    # ... in the generation the group was in: no rebalance, as the group's members saw it.
    for pod, body in new.items():
        joins = joined_generations(folder(lab, body))  # the classic protocol's joins
        assert joins == ([generation] if protocol == "classic" else []), (pod, joins, generation)
    if protocol == "streams":
        assert after["generation"] == generation, (before, after)
    assert rollout.get("static") is True, rollout
    assert after["rebalances"] == before["rebalances"], (before, after)
    # The pods not yet replaced kept RUNNING until their own turn came (no REBALANCING).
    for pod, body in old.items():
        later = pod_events(folder(lab, body))[events_before[pod] :]
        states = [e["to"] for e in later if e["event"] == "state"]
        assert states == ["PENDING_SHUTDOWN", "NOT_RUNNING"], (pod, states)
    # Each new pod restored its tasks' stores (from their changelogs when its state was lost),
    # then ran.
    figures = {}
    for pod, body in new.items():
        events = pod_events(folder(lab, body))
        restored = [e for e in events if e["event"] == "restored"]
        assert sorted(f"0_{e['partition']}" for e in restored) == sorted(tasks_after[pod]), events
        assert all(e["store"] == "counts" and e["topic"] == changelog for e in restored)
        records = sum(e["records"] for e in restored)
        assert records > 0 if kept is None else records == 0, restored
        started = next(e["at"] for e in events if e["event"] == "started")
        running = next(e["at"] for e in events if e["event"] == "state" and e["to"] == "RUNNING")
        # Its tasks were down from its predecessor's close until it ran them again.
        closing = next(
            e["at"]
            for e in pod_events(folder(lab, old[pod]))
            if e["event"] == "state" and e["to"] == "PENDING_SHUTDOWN"
        )
        figures[pod] = {
            "records": sum(e["records"] for e in restored),
            "restoreSeconds": round(sum(e["seconds"] for e in restored), 3),
            "slowestPartitionSeconds": max(e["seconds"] for e in restored),
            "startToRunningSeconds": round(running - started, 3),
            "tasksDownSeconds": round(running - closing, 3),
        }
    shown = {k: after.get(k) for k in ("protocol", "assignor", "state", "generation", "members")}
    summary = {k: rollout.get(k) for k in ("kind", "batches", "membersJoined", "static")}
    print(
        f"{protocol} streams rollout: status.group {json.dumps(shown)}, "
        f"status.rollout {json.dumps(summary)}; "
        f"generation {generation} throughout, operator-counted rebalances "
        f"{before['rebalances']} -> {after['rebalances']}, rolled in {rolled_in:.1f} s, "
        f"per pod {json.dumps(figures)}"
    )
