"""The sidecar's settings: the application's KAFKA_* environment, flags first."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalancer.sidecar.settings import load_settings, parse_listen
from rebalancer.structs.kafka_properties import SettingsError

BASE = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "KAFKA_GROUP_ID": "orders",
    "KAFKA_TOPICS": "orders",
    "KAFKA_SESSION_TIMEOUT_MS": "10000",
    "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
    "KAFKA_SASL_PASSWORD": "pw",
    "KAFKA_HEAP_OPTS": "-Xmx1g",
    "REBALANCER_SIDECAR_TOKEN_FILE": "/var/run/token",
    "POD_NAME": "orders-0",
}


def test_takes_the_applications_settings_and_its_own_identity() -> None:
    settings = load_settings(env=BASE)
    assert settings.group_id == "orders" and settings.client_id == "orders-0-sidecar"
    assert settings.kafka == {
        "bootstrap.servers": "kafka:9092",
        "group.id": "orders",
        "session.timeout.ms": "10000",
        "partition.assignment.strategy": "cooperative-sticky",
        "sasl.password": "pw",
    }
    assert "pw" not in repr(settings)
    assert (settings.listen_host, settings.listen_port) == ("127.0.0.1", 8091)
    assert settings.instance_id is None


def test_flags_win_and_static_members_get_a_static_sidecar(tmp_path: Path) -> None:
    properties = tmp_path / "c.properties"
    properties.write_text("# base\nsecurity.protocol=SSL\nclient.id=app\n")
    env = {**BASE, "KAFKA_GROUP_INSTANCE_ID": "orders-0", "KAFKA_CONFIG_FILE": str(properties)}
    settings = load_settings(
        env=env, bootstrap="other:9093", listen="0.0.0.0:9000", rate_per_minute=2, burst=1
    )
    assert settings.kafka["bootstrap.servers"] == "other:9093"
    assert settings.kafka["security.protocol"] == "SSL"
    assert "client.id" not in settings.kafka
    assert settings.instance_id == "orders-0-sidecar"
    assert (settings.listen_host, settings.listen_port, settings.rate_per_minute) == (
        "0.0.0.0",
        9000,
        2,
    )


def test_kip_848_drops_the_settings_the_broker_owns() -> None:
    settings = load_settings(env={**BASE, "KAFKA_GROUP_PROTOCOL": "consumer"})
    assert settings.protocol == "consumer"
    assert "session.timeout.ms" not in settings.kafka
    assert "partition.assignment.strategy" not in settings.kafka


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"KAFKA_BOOTSTRAP_SERVERS": ""}, "KAFKA_BOOTSTRAP_SERVERS"),
        ({"KAFKA_GROUP_ID": ""}, "KAFKA_GROUP_ID"),
        ({"REBALANCER_SIDECAR_TOKEN_FILE": ""}, "token"),
        ({"REBALANCER_SIDECAR_LISTEN": "nowhere"}, "host:port"),
        ({"REBALANCER_SIDECAR_RATE_PER_MINUTE": "fast"}, "number"),
        ({"REBALANCER_SIDECAR_BURST": "0"}, "at least 1"),
    ],
)
def test_mistakes_say_what_to_set(change: dict[str, str], words: str) -> None:
    with pytest.raises(SettingsError, match=words):
        load_settings(env={**BASE, **change})


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [(":8091", ("127.0.0.1", 8091)), ("0.0.0.0:1", ("0.0.0.0", 1)), ("[::]:80", ("::", 80))],
)
def test_parse_listen(raw: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(raw) == parsed
