"""The lab's Apache Kafka launcher against the real broker: the settings it writes are the ones
the broker reports, data survives a restart and a crash, and a three-node cluster moves a group
to another coordinator when its coordinator is killed.

Brokers of their own here (these tests stop them); the session's shared broker is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka_support import fresh

from rebalancer_lab.broker import BrokerStartError, KafkaBroker, KafkaCluster
from rebalancer_lab.kafka_jars import KAFKA_VERSION, ensure_kafka_jars

pytestmark = pytest.mark.e2e
DELAY = "group.initial.rebalance.delay.ms"


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": "0"})


def delay_config(bootstrap: str, node: int = 1) -> tuple[str, ConfigSource, bool]:
    resource = ConfigResource("BROKER", str(node))
    client = admin(bootstrap)  # held: a collected client cancels its requests
    entries = client.describe_configs([resource])[resource].result(timeout=15)
    entry = entries[DELAY]
    return str(entry.value), ConfigSource(entry.source), bool(entry.is_read_only)


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, partitions)])[name].result(timeout=30)


def topics(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=15).topics)


def test_the_jars_are_fetched_once_and_found_in_the_cache() -> None:
    jars = ensure_kafka_jars()
    names = {jar.name for jar in jars}
    assert f"kafka_2.13-{KAFKA_VERSION}.jar" in names
    assert f"kafka-group-coordinator-{KAFKA_VERSION}.jar" in names
    assert ensure_kafka_jars() == jars


def test_the_broker_runs_with_the_production_delay_and_keeps_data_across_restarts(
    tmp_path: Path,
) -> None:
    with KafkaBroker(log_dir=tmp_path) as broker:
        value, source, read_only = delay_config(broker.bootstrap)
        # Written into server.properties: a static setting the broker reports as such.
        assert (value, read_only) == ("3000", True)
        assert source is ConfigSource.STATIC_BROKER_CONFIG
        topic = fresh("kept")
        create_topic(broker.bootstrap, topic)
        port, first_pid = broker.port, broker.pid
        # Its own session: a Ctrl-C in the lab's terminal reaches the lab, which stops the
        # broker after the consumers, not the broker before them.
        assert first_pid is not None and os.getsid(first_pid) == first_pid != os.getsid(0)
        broker.restart()
        assert (broker.port, broker.starts) == (port, 2) and broker.pid != first_pid
        assert topic in topics(broker.bootstrap)
        broker.kill()  # a crash: SIGKILL, no clean shutdown
        assert not broker.running
        broker.start()
        assert topic in topics(broker.bootstrap)


def test_a_delay_under_test_is_what_the_broker_reports(tmp_path: Path) -> None:
    with KafkaBroker(log_dir=tmp_path, initial_rebalance_delay_ms=0) as broker:
        assert delay_config(broker.bootstrap)[0] == "0"


def test_a_taken_port_fails_with_a_message_naming_it(tmp_path: Path) -> None:
    with KafkaBroker(log_dir=tmp_path / "first") as first:
        clash = KafkaBroker(port=first.port, log_dir=tmp_path / "second")
        with pytest.raises(BrokerStartError, match=f"{first.port} is already in use"):
            clash.start()
        assert first.running


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="negative"):
        KafkaBroker(initial_rebalance_delay_ms=-1)
    with pytest.raises(ValueError, match="fixed port is for a single node"):
        KafkaCluster(3, port=9092)
    with pytest.raises(RuntimeError, match="start it first"):
        _ = KafkaBroker().bootstrap


def test_three_nodes_move_a_group_when_its_coordinator_dies(tmp_path: Path) -> None:
    with KafkaCluster(3, log_dir=tmp_path) as cluster:
        assert len(cluster.bootstrap.split(",")) == 3
        for node in (1, 2, 3):
            assert delay_config(cluster.bootstrap, node)[0] == "3000"
        group = fresh("failover")
        coordinator = cluster.coordinator_of(group)
        cluster.kill_node(coordinator)
        assert not cluster.node(coordinator).running
        moved = cluster.coordinator_of(group)
        assert moved != coordinator
        cluster.start_node(coordinator)
        assert cluster.running
