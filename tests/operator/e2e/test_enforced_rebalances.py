"""Enforced rebalances through the sidecar, driven by the ConsumerGroup's enforce policy."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    events_for,
    eventually,
    free_port,
    get_cg,
    kubectl,
    lab_context,
    statefulset,
)

from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
TOKEN = "lab-sidecar-token"


def token_secret(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "stringData": {"token": TOKEN},
    }


def revoked_after(log: Path, offset: int) -> list[str]:
    """Lines after `offset` where a member gave partitions up."""
    text = log.read_text(errors="replace")[offset:]
    return [line for line in text.splitlines() if re.search(r"revoked .*-\[(?!-\])", line)]


def group_of(found: dict[str, object]) -> dict[str, Any]:
    status = found.get("status")
    group = status.get("group") if isinstance(status, dict) else None
    return group if isinstance(group, dict) else {}


def start_group(lab: Lab, name: str, members: int, tmp: Path) -> tuple[list[ChildProcess], str]:
    consumers = [
        lab.start_consumer(index, group_id=name, prefix=f"{name}-consumer")
        for index in range(members)
    ]
    token_file = tmp / f"{name}.token"
    token_file.write_text(TOKEN)
    port = free_port()
    lab.start_sidecar(f"{name}-consumer-0", name, token_file, port)
    return consumers, f"http://127.0.0.1:{port}"


def test_changing_the_request_token_costs_exactly_one_generation(lab: Lab, tmp_path: Path) -> None:
    name = "enforced"
    from rebalancer_lab.producer import ensure_topic

    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    consumers, url = start_group(lab, name, 2, tmp_path)
    body = consumer_group(name, lab.bootstrap)
    body["spec"]["policy"]["enforce"] = {
        "requestToken": "first",
        "sidecar": {"url": url, "tokenSecretRef": {"name": f"{name}-token"}},
    }
    apply(lab, token_secret(f"{name}-token"), statefulset(f"{name}-consumer"), body)

    def settled() -> dict[str, object] | None:
        found = get_cg(lab, name)
        group = found.get("status", {}).get("group", {})
        ready = condition(found, "Ready").get("status") == "True"
        return found if ready and group.get("members") == 2 else None

    def quiet() -> dict[str, object] | None:
        # The sidecar joins as a member of its own, possibly after both consumers: its join
        # moves the generation too, so wait for a generation that holds for a few seconds.
        before = settled()
        if before is None:
            return None
        time.sleep(4)
        after = settled()
        if after is None or group_of(before).get("generation") is None:
            return None
        same = group_of(after).get("generation") == group_of(before).get("generation")
        return group_of(after) if same else None

    logs = tuple(f"{name}-consumer-{index}" for index in range(2))
    steady = eventually(
        quiet,
        150,
        "two application members, Ready, one generation for 4 s",
        context=lab_context(lab, name, logs),
    )
    # The baseline token never enforces.
    assert (get_cg(lab, name)["status"].get("enforcement") or {}).get("lastStatus") != "enforced"
    assert not any(e["reason"] == "RebalanceEnforced" for e in events_for(lab, name))
    generation = steady["generation"]
    owned = {m["host"]: m["partitions"] for m in steady["memberDetails"]}
    offsets = {c.name: c.log_path.stat().st_size for c in consumers}

    kubectl(
        lab,
        "patch",
        "consumergroup",
        name,
        "--type=merge",
        "-p",
        '{"spec":{"policy":{"enforce":{"requestToken":"second"}}}}',
    )

    def enforced() -> dict[str, object] | None:
        status = get_cg(lab, name)["status"]
        done = (status.get("enforcement") or {}).get("lastStatus") == "enforced"
        return status if done and status["group"]["generation"] > generation else None

    eventually(enforced, 90, "an enforced rebalance")
    time.sleep(8)  # any further generation would show up by now
    after = get_cg(lab, name)["status"]
    assert after["group"]["generation"] == generation + 1, "exactly one new generation"
    assert after["group"]["members"] == 2, "the sidecar is not counted as a member"
    assert {m["host"]: m["partitions"] for m in after["group"]["memberDetails"]} == owned
    assert after["group"]["assignedPartitions"] == 6
    assert after["enforcement"]["lastCause"] == "on-demand"
    for consumer in consumers:
        assert revoked_after(consumer.log_path, offsets[consumer.name]) == [], consumer.name
    messages = [str(e["message"]) for e in events_for(lab, name)]
    assert any("cause enforced" in message for message in messages), messages
    assert any(e["reason"] == "RebalanceEnforced" for e in events_for(lab, name))
    assert after["group"]["lastRebalanceCause"] == "enforced", messages


def test_a_new_matching_topic_is_picked_up_in_one_rebalance(lab: Lab, tmp_path: Path) -> None:
    from rebalancer_lab.producer import ensure_topic

    name = "patterned"
    asyncio.run(ensure_topic(lab.bootstrap, f"{name}.a", 4))
    config = tmp_path / "consumer.properties"
    # librdkafka refreshes a pattern's topics on rejoin only when its metadata is this fresh.
    config.write_text("metadata.max.age.ms=3000\ntopic.metadata.refresh.interval.ms=600000\n")
    env = {
        "KAFKA_TOPICS": "",
        "KAFKA_TOPIC_PATTERN": rf"^{name}\..*",
        "KAFKA_CONFIG_FILE": str(config),
    }
    consumers = [
        lab.start_consumer(index, group_id=name, prefix=f"{name}-consumer", env=env)
        for index in range(3)
    ]
    token_file = tmp_path / f"{name}.token"
    token_file.write_text(TOKEN)
    port = free_port()
    lab.start_sidecar(f"{name}-consumer-0", name, token_file, port)
    body = consumer_group(name, lab.bootstrap, subscription={"pattern": rf"{name}\..*"})
    body["spec"]["policy"]["enforce"] = {
        "onTopicCreation": True,
        "sidecar": {"url": f"http://127.0.0.1:{port}", "tokenSecretRef": {"name": f"{name}-t"}},
    }
    apply(lab, token_secret(f"{name}-t"), statefulset(f"{name}-consumer"), body)

    def settled() -> dict[str, object] | None:
        found = get_cg(lab, name)
        group = found.get("status", {}).get("group", {})
        memory = (found.get("status", {}).get("enforcement") or {}).get("memory") or {}
        ok = group.get("members") == 3 and group.get("assignedPartitions") == 4
        return found if ok and memory.get("topics") else None

    generation = eventually(settled, 120, "three members on 4 partitions")["status"]["group"][
        "generation"
    ]
    asyncio.run(ensure_topic(lab.bootstrap, f"{name}.b", 5))

    def picked_up() -> dict[str, object] | None:
        group = get_cg(lab, name)["status"]["group"]
        return group if group.get("assignedPartitions") == 9 else None

    eventually(picked_up, 60, "every member to pick up the new topic")
    time.sleep(6)
    group = get_cg(lab, name)["status"]["group"]
    assert group["generation"] == generation + 1, "one rebalance for the new topic"
    assert group["assignedPartitions"] == 9
    enforcement = get_cg(lab, name)["status"]["enforcement"]
    assert "topic-created" in enforcement["lastCause"]
    for consumer in consumers:
        assert f"{name}.b" in consumer.log_path.read_text(errors="replace")


def test_a_kafkajs_fleet_is_rebalanced_in_one_generation_by_a_visit(
    lab: Lab, tmp_path: Path
) -> None:
    """A fleet of kafkajs consumers (protocol RoundRobinAssigner, no KAFKA_* settings): the
    sidecar visits the group (docs/enforcing.md, "Client libraries"); every member rejoins once,
    none of the sidecars is ever assigned a partition, and no message is lost."""
    from confluent_kafka import Producer
    from tests.clients.kafka.kafkajs_support import KafkajsConsumer

    from rebalancer_lab.producer import ensure_topic

    name = "kafkajs"
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    everything = {(name, partition) for partition in range(6)}

    def produce(keys: range) -> None:
        producer = Producer({"bootstrap.servers": lab.bootstrap})
        for key in keys:
            producer.produce(name, key=str(key), value=b"order")
        assert producer.flush(15) == 0

    produce(range(100))
    apps = [
        KafkajsConsumer(f"{name}-consumer-{index}", lab.bootstrap, name, name, tmp_path)
        for index in range(2)
    ]
    try:
        token_file = tmp_path / f"{name}.token"
        token_file.write_text(TOKEN)
        port = free_port()

        def generation() -> int | None:
            latest = [app.assignments()[-1] if app.assignments() else None for app in apps]
            if any(item is None for item in latest):
                return None
            generations = {item["generation"] for item in latest if item}
            covered = set().union(*(item["partitions"] for item in latest if item))
            return generations.pop() if len(generations) == 1 and covered == everything else None

        before = eventually(generation, 60, "the kafkajs members split 6 partitions")
        # The fleet's pods set no KAFKA_PARTITION_ASSIGNMENT_STRATEGY (blank sets nothing).
        lab.start_sidecar(
            f"{name}-consumer-0",
            name,
            token_file,
            port,
            env={"KAFKA_PARTITION_ASSIGNMENT_STRATEGY": ""},
        )
        body = consumer_group(name, lab.bootstrap)
        body["spec"]["policy"]["enforce"] = {
            "requestToken": "first",
            "sidecar": {
                "url": f"http://127.0.0.1:{port}",
                "tokenSecretRef": {"name": f"{name}-token"},
            },
        }
        apply(lab, token_secret(f"{name}-token"), statefulset(f"{name}-consumer"), body)

        def observed() -> dict[str, object] | None:
            group = get_cg(lab, name).get("status", {}).get("group", {})
            return group if group.get("members") == 2 else None

        eventually(observed, 120, "the operator sees two members")
        time.sleep(4)
        assert generation() == before, "the sidecar's start cost the fleet no rebalance"
        kubectl(
            lab,
            "patch",
            "consumergroup",
            name,
            "--type=merge",
            "-p",
            '{"spec":{"policy":{"enforce":{"requestToken":"second"}}}}',
        )

        def enforced() -> dict[str, object] | None:
            status = get_cg(lab, name)["status"]
            done = (status.get("enforcement") or {}).get("lastStatus") == "enforced"
            return status if done else None

        eventually(enforced, 90, "an enforced rebalance")
        produce(range(100, 200))
        time.sleep(6)  # any further generation would show up by now
        generations = {item["generation"] for app in apps for item in app.assignments()}
        assert max(generations) == before + 1, generations
        # Eager: every member rejoined into the one new generation; in every generation the
        # two members hold all six partitions between them, so no sidecar held one.
        assert all(any(i["generation"] == before + 1 for i in app.assignments()) for app in apps)
        for seen in generations:
            held = [
                i["partitions"]
                for app in apps
                for i in app.assignments()
                if i["generation"] == seen
            ]
            assert set().union(*held) == everything, (seen, held)
        assert observed() is not None, "the sidecar is not counted as a member"
        messages = [str(e["message"]) for e in events_for(lab, name)]
        assert any(
            "every member rejoined (2 of 2)" in m and "held no partition" in m for m in messages
        ), messages
        expected = {str(key) for key in range(200)}
        eventually(
            lambda: expected <= apps[0].keys() | apps[1].keys(), 30, "every message consumed"
        )
    finally:
        for app in apps:
            app.kill()


def test_a_group_the_sidecar_cannot_join_is_degraded_once_not_retried(
    lab: Lab, tmp_path: Path
) -> None:
    """A Kafka Connect-style group (protocol type `connect`): the sidecar answers 422, the
    ConsumerGroup is Degraded naming the protocol and the fix, and the operator does not ask
    again for the same trigger."""
    import urllib.request

    from tests.clients.kafka.connect_groups import hold_connect_group

    name = "connect-workers"
    loop = asyncio.new_event_loop()
    hold = asyncio.Event()
    worker = loop.create_task(hold_connect_group(lab.bootstrap, name, hold))
    try:
        loop.run_until_complete(asyncio.wait([worker], timeout=8))
        assert not worker.done(), worker
        token_file = tmp_path / f"{name}.token"
        token_file.write_text(TOKEN)
        port = free_port()
        lab.start_sidecar(
            f"{name}-consumer-0",
            name,
            token_file,
            port,
            env={"KAFKA_PARTITION_ASSIGNMENT_STRATEGY": ""},
        )
        body = consumer_group(name, lab.bootstrap)
        body["spec"]["policy"]["enforce"] = {
            "requestToken": "first",
            "sidecar": {
                "url": f"http://127.0.0.1:{port}",
                "tokenSecretRef": {"name": f"{name}-token"},
            },
        }
        apply(lab, token_secret(f"{name}-token"), statefulset(f"{name}-consumer"), body)
        time.sleep(4)  # the baseline token is taken
        kubectl(
            lab,
            "patch",
            "consumergroup",
            name,
            "--type=merge",
            "-p",
            '{"spec":{"policy":{"enforce":{"requestToken":"second"}}}}',
        )

        def degraded() -> dict[str, object] | None:
            found = get_cg(lab, name)
            item = condition(found, "Degraded")
            return found if item.get("reason") == "EnforceUnsupported" else None

        found = eventually(degraded, 60, "Degraded, reason EnforceUnsupported")
        message = str(condition(found, "Degraded")["message"])
        assert "'connect'" in message and "'sessioned'" in message, message
        assert "spec.policy.enforce" in message, message
        assert found["status"]["enforcement"]["lastStatus"] == "unsupported"
        time.sleep(10)  # three enforce timer periods: a retry loop would show
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        asked = [
            line
            for line in metrics.splitlines()
            if line.startswith('rebalancer_sidecar_requests_total{answer="unsupported"}')
        ]
        assert asked == ['rebalancer_sidecar_requests_total{answer="unsupported"} 1.0'], asked
        warnings = [e for e in events_for(lab, name) if e["reason"] == "EnforceUnsupported"]
        assert len(warnings) == 1 and warnings[0].get("count", 1) == 1, warnings
    finally:
        hold.set()
        loop.run_until_complete(asyncio.wait([worker], timeout=10))
        loop.close()
