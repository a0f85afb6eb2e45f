from __future__ import annotations

from pathlib import Path

import pytest

from rebalancer.clients.librdkafka_config import read_properties_file
from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.kafka_properties import SettingsError
from rebalancer_lab.consumer import lag_from_statistics
from rebalancer_lab.consumer_settings import load_settings

BASE = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092", "KAFKA_GROUP_ID": "orders"}


def test_environment_overrides_the_properties_file(tmp_path: Path) -> None:
    config = tmp_path / "consumer.properties"
    config.write_text(
        "# tuned by hand\n"
        "session.timeout.ms=45000\n"
        "heartbeat.interval.ms : 3000\n"
        "! another comment\n"
        "enable.auto.commit=true\n"
        "fetch.min.bytes=1\n"
    )
    env = {
        **BASE,
        "KAFKA_CONFIG_FILE": str(config),
        "KAFKA_TOPICS": "orders, payments",
        "KAFKA_SESSION_TIMEOUT_MS": "6000",
        "POD_NAME": "orders-0",
    }
    settings = load_settings(env)
    assert settings.properties["session.timeout.ms"] == "6000"
    assert settings.properties["heartbeat.interval.ms"] == "3000"
    assert settings.properties["fetch.min.bytes"] == "1"
    # At-least-once is not negotiable in the example consumer.
    assert settings.properties["enable.auto.commit"] == "false"
    assert settings.properties["client.id"] == "orders-0"
    assert settings.topics == ("orders", "payments")
    assert settings.host == "orders-0"
    assert not settings.incremental


def test_pattern_subscriptions_become_librdkafka_regexes() -> None:
    settings = load_settings({**BASE, "KAFKA_TOPIC_PATTERN": "orders-.*"})
    assert settings.subscription() == ["^orders-.*"]


def test_cooperative_and_kip848_are_incremental() -> None:
    cooperative = load_settings(
        {**BASE, "KAFKA_TOPICS": "t", "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky"}
    )
    assert cooperative.incremental
    kip848 = load_settings(
        {
            **BASE,
            "KAFKA_TOPICS": "t",
            "KAFKA_GROUP_PROTOCOL": "consumer",
            "KAFKA_SESSION_TIMEOUT_MS": "6000",
        }
    )
    assert kip848.incremental
    assert "session.timeout.ms" not in kip848.properties


def test_reporting_turns_on_statistics_for_lag() -> None:
    settings = load_settings(
        {
            **BASE,
            "KAFKA_TOPICS": "t",
            "REBALANCER_REPORT_URL": "http://127.0.0.1:8090/v1/reports",
            "REBALANCER_REPORT_INTERVAL_S": "2",
        }
    )
    assert settings.properties["statistics.interval.ms"] == "2000"
    assert settings.heartbeat_seconds == 2


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"KAFKA_GROUP_ID": "g", "KAFKA_TOPICS": "t"}, "KAFKA_BOOTSTRAP_SERVERS"),
        ({**BASE}, "exactly one of"),
        ({**BASE, "KAFKA_TOPICS": "t", "KAFKA_TOPIC_PATTERN": "x"}, "exactly one of"),
        ({**BASE, "KAFKA_TOPICS": "t", "PROCESS_DELAY_MS": "slow"}, "PROCESS_DELAY_MS"),
        ({**BASE, "KAFKA_TOPICS": "t", "KAFKA_CONFIG_FILE": "/no/such/file"}, "cannot read"),
    ],
)
def test_bad_settings_say_what_to_fix(env: dict[str, str], words: str) -> None:
    with pytest.raises(SettingsError, match=words):
        load_settings(env)


def test_properties_file_lines_without_a_separator_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("bootstrap.servers\n")
    with pytest.raises(SettingsError, match=r"bad\.properties:1"):
        read_properties_file(path)


def test_lag_sums_owned_partitions_with_known_lag() -> None:
    stats = {
        "topics": {
            "t": {
                "partitions": {
                    "0": {"consumer_lag": 5},
                    "1": {"consumer_lag": -1},
                    "2": {"consumer_lag": 7},
                    "-1": {"consumer_lag": 100},
                }
            },
            "other": {"partitions": {"0": {"consumer_lag": 1000}}},
        }
    }
    owned = {TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)}
    assert lag_from_statistics(stats, owned) == 12
    assert lag_from_statistics(stats, {TopicPartition("t", 1)}) is None
    assert lag_from_statistics({}, owned) is None
