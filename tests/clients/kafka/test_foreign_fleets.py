"""Enforced rebalances of fleets whose consumers are not librdkafka: kafkajs on Apache Kafka.

kafkajs groups form with protocol `RoundRobinAssigner` (or the name of an application's own
assignor), which no librdkafka member can offer (INCONSISTENT_GROUP_PROTOCOL), and kafkajs'
assignor spreads the leader's topics over every member whatever each subscribed to. The sidecar
visits such a group (planning/group_levers.py): one generation, every member rejoins, no
partition ever assigned to a sidecar, no message lost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from connect_groups import hold_connect_group
from kafka_support import eventually, fresh
from kafkajs_support import KafkajsConsumer
from sidecar_support import SidecarProcess, wait_joined

from rebalancer_lab.producer import ensure_topic

PARTITIONS = 6


def produce(bootstrap: str, topic: str, keys: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key in keys:
        producer.produce(topic, key=str(key), value=b"order")
    assert producer.flush(15) == 0


def settled(apps: list[KafkajsConsumer], everything: set[tuple[str, int]]) -> int | None:
    """The generation whose assignments to `apps` split `everything` among them."""
    latest = [app.assignments()[-1] if app.assignments() else None for app in apps]
    if any(item is None for item in latest):
        return None
    generations = {item["generation"] for item in latest if item is not None}
    owned = [item["partitions"] for item in latest if item is not None]
    if len(generations) != 1 or set().union(*owned) != everything:
        return None
    return generations.pop() if sum(map(len, owned)) == len(everything) else None


@pytest.mark.parametrize(
    ("assigner", "protocol"),
    [("roundrobin", "RoundRobinAssigner"), ("orders-assignor", "orders-assignor")],
    ids=["kafkajs-roundrobin", "application-named-assignor"],
)
def test_kafkajs_fleet_rebalances_once_and_no_sidecar_holds_a_partition(
    bootstrap: str, tmp_path: Path, assigner: str, protocol: str
) -> None:
    group_id, topic = fresh("kafkajs"), fresh("kafkajs-orders")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    everything = {(topic, partition) for partition in range(PARTITIONS)}
    produce(bootstrap, topic, range(100))
    apps = [
        KafkajsConsumer(f"app{i}", bootstrap, group_id, topic, tmp_path, ASSIGNER=assigner)
        for i in range(2)
    ]
    sidecars: list[SidecarProcess] = []
    try:
        before = eventually(
            lambda: settled(apps, everything), 60, "the kafkajs members split the partitions"
        )
        # The application's settings name no strategy, as for any fleet of another client.
        sidecars = [
            SidecarProcess(f"pod{i}", bootstrap, group_id, tmp_path, strategy=None)
            for i in range(2)
        ]
        wait_joined(sidecars)
        for sidecar in sidecars:
            view = sidecar.group()
            assert view is not None
            assert (view["lever"], view["protocol"]) == ("visit", protocol), view
        assert sum(bool((s.group() or {})["actor"]) for s in sidecars) == 1
        # The sidecars hold their lease in a group of their own: the fleet saw nothing.
        assert settled(apps, everything) == before

        status, body = sidecars[1].enforce(group_id, "enforce-1", waitSeconds=30)
        assert status == 200, body
        assert body["status"] == "enforced", body
        assert "every member rejoined (2 of 2)" in body["message"], body
        assert "the sidecar held no partition" in body["message"], body
        produce(bootstrap, topic, range(100, 200))

        after = eventually(
            lambda: (g := settled(apps, everything)) is not None and g > before and g,
            30,
            "the fleet settles on a new generation",
        )
        assert after == before + 1
        time.sleep(3.0)  # longer than a rejoin takes (heartbeat 1 s)
        generations = {item["generation"] for app in apps for item in app.assignments()}
        assert max(generations) == after, generations
        # Eager: both members rejoined into the new generation, and between them they hold
        # every partition in every generation: none went to a sidecar.
        for generation in generations:
            held = [
                i["partitions"]
                for a in apps
                for i in a.assignments()
                if i["generation"] == generation
            ]
            assert set().union(*held) == everything, (generation, held)
        assert all(any(i["generation"] == after for i in app.assignments()) for app in apps)
        expected = {str(key) for key in range(200)}
        eventually(
            lambda: expected <= apps[0].keys() | apps[1].keys(), 30, "every message consumed"
        )
        assert not [e for app in apps for e in app.events("crash")]
    finally:
        for sidecar in sidecars:
            sidecar.stop()
        for app in apps:
            app.stop()


def test_a_group_the_sidecar_cannot_join_is_named_not_retried(
    bootstrap: str, tmp_path: Path
) -> None:
    group_id = fresh("connect")
    loop = asyncio.new_event_loop()
    hold = asyncio.Event()
    worker = loop.create_task(hold_connect_group(bootstrap, group_id, hold))
    sidecar: SidecarProcess | None = None
    try:
        # The group forms after the broker's initial rebalance delay (3 s).
        loop.run_until_complete(asyncio.wait([worker], timeout=8))
        assert not worker.done(), worker
        sidecar = SidecarProcess("pod0", bootstrap, group_id, tmp_path, strategy=None)
        view = eventually(
            lambda: (v := sidecar.group()) is not None and v["lever"] == "unsupported" and v,
            30,
            "the sidecar says it cannot join",
        )
        assert "'connect'" in view["leverReason"] and "'sessioned'" in view["leverReason"]
        status, body = sidecar.enforce(group_id, "enforce-1", waitSeconds=2)
        assert status == 422, body
        assert "'connect'" in body["error"] and "spec.policy.enforce" in body["error"], body
    finally:
        if sidecar is not None:
            sidecar.stop()
        hold.set()
        loop.run_until_complete(asyncio.wait([worker], timeout=10))
        loop.close()


@pytest.mark.parametrize(
    ("assignor", "protocol", "lever"),
    [
        # The Java client's default: [RangeAssignor, CooperativeStickyAssignor], chosen `range`.
        (None, "range", "rejoin"),
        ("org.apache.kafka.clients.consumer.StickyAssignor", "sticky", "visit"),
    ],
    ids=["java-default", "java-sticky"],
)
def test_java_fleet_is_enforced_by_the_lever_its_protocol_needs(
    bootstrap: str, tmp_path: Path, assignor: str | None, protocol: str, lever: str
) -> None:
    """The Java client (Apache Kafka's own ConsoleConsumer, kafka-clients of the lab's broker)."""
    import subprocess

    from confluent_kafka.admin import AdminClient

    from rebalancer_lab.kafka_jars import class_path, java_binary

    group_id, topic = fresh("java"), fresh("java-orders")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    properties = tmp_path / "java.properties"
    lines = ["session.timeout.ms=10000", "heartbeat.interval.ms=1000"]
    if assignor:
        lines.append(f"partition.assignment.strategy={assignor}")
    properties.write_text("\n".join(lines) + "\n")
    members = []
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def described() -> object:
        return admin.describe_consumer_groups([group_id])[group_id].result(timeout=10)

    sidecar: SidecarProcess | None = None
    try:
        for number in range(2):
            command = [java_binary(), "-Xmx128m", "-cp", class_path()]
            command += ["org.apache.kafka.tools.consumer.ConsoleConsumer"]
            command += ["--bootstrap-server", bootstrap, "--topic", topic, "--group", group_id]
            command += ["--consumer.config", str(properties)]
            with (tmp_path / f"java{number}.log").open("wb") as sink:
                members.append(
                    subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
                )

        def formed() -> object | None:
            group = described()
            apps = [m for m in group.members if "sidecar" not in m.client_id]
            held = sum(1 for m in apps for tp in m.assignment.topic_partitions if tp.topic == topic)
            return group if len(apps) == 2 and held == PARTITIONS else None

        assert eventually(formed, 90, "the Java members form").partition_assignor == protocol
        sidecar = SidecarProcess("pod0", bootstrap, group_id, tmp_path, strategy=None)
        wait_joined([sidecar])
        view = sidecar.group() or {}
        assert (view["lever"], view["protocol"]) == (lever, protocol), view
        status, body = sidecar.enforce(group_id, "enforce-1", waitSeconds=30)
        assert status == 200 and body["status"] == "enforced", body
        if lever == "visit":
            assert "every member rejoined (2 of 2)" in body["message"], body
            assert "the sidecar held no partition" in body["message"], body
        else:
            assert body["generation"] == body["fromGeneration"] + 1, body
        group = eventually(formed, 30, "the Java members hold every partition again")
        for member in group.members:
            owned = {tp.topic for tp in member.assignment.topic_partitions}
            # The sidecar's member (rejoin) holds its control partition only; a visitor none.
            assert owned <= (
                {topic} if "sidecar" not in member.client_id else {f"__rebalancer.{group_id}"}
            ), (member.client_id, owned)
    finally:
        if sidecar is not None:
            sidecar.stop()
        for member in members:
            member.kill()
            member.wait()
