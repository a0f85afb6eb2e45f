"""The KAFKA_* table the lab consumer and the sidecar share."""

from __future__ import annotations

import pytest

from rebalancer.sidecar.settings import load_settings as load_sidecar
from rebalancer.structs.kafka_properties import (
    PropertiesError,
    drop_classic_only,
    env_properties,
    env_variable,
    parse_properties,
)
from rebalancer_lab.consumer_settings import load_settings as load_consumer


def test_parse_properties_takes_the_first_separator_and_skips_comments() -> None:
    text = "# comment\n! also\n\nbootstrap.servers = a:9092\nsasl.jaas.config: x=y\n"
    assert parse_properties(text, "f") == {
        "bootstrap.servers": "a:9092",
        "sasl.jaas.config": "x=y",
    }


def test_parse_properties_names_the_file_and_line() -> None:
    with pytest.raises(PropertiesError, match=r"consumer.properties:2: expected key=value"):
        parse_properties("a=1\nnot a property\n", "consumer.properties")


def test_blank_variables_set_nothing() -> None:
    env = {"KAFKA_GROUP_ID": "  ", "KAFKA_BOOTSTRAP_SERVERS": " b:9092 ", "OTHER": "x"}
    assert env_properties(env) == {"bootstrap.servers": "b:9092"}


def test_env_variable_names_the_fix() -> None:
    assert env_variable("sasl.password") == "KAFKA_SASL_PASSWORD"


def test_kip848_members_drop_what_the_broker_owns() -> None:
    properties = {"group.protocol": "consumer", "session.timeout.ms": "9000", "group.id": "g"}
    drop_classic_only(properties)
    assert properties == {"group.protocol": "consumer", "group.id": "g"}


def test_consumer_and_sidecar_read_the_same_security_settings() -> None:
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": "b:9093",
        "KAFKA_GROUP_ID": "orders",
        "KAFKA_TOPICS": "t",
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SESSION_TIMEOUT_MS": "12000",
        "REBALANCER_SIDECAR_TOKEN_FILE": "/var/run/token",
    }
    consumer = load_consumer(env).properties
    sidecar = load_sidecar(env=env).kafka
    for name in ("security.protocol", "sasl.mechanism", "session.timeout.ms", "group.id"):
        assert consumer[name] == sidecar[name] == env[env_variable(name)]
