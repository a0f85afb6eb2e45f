"""`spec.policy.settings` and `spec.policy.brokerDelay` parsing: defaults, and every mistake
named by its field."""

from __future__ import annotations

import pytest

from rebalancer.structs.broker_delay_policy import (
    BrokerDelayPolicy,
    DelayMode,
    StrimziRef,
    parse_broker_delay_policy,
)
from rebalancer.structs.consumer_settings_policy import (
    AssignmentStrategy,
    ClientLibrary,
    EnvConvention,
    SettingsPolicy,
    parse_settings_policy,
    settings_asked,
)
from rebalancer.structs.problems import SpecInvalid


def test_absent_blocks_mean_not_managed() -> None:
    assert parse_settings_policy(None) is None
    assert parse_broker_delay_policy(None) is None


def test_empty_settings_take_the_defaults() -> None:
    policy = parse_settings_policy({})
    assert policy == SettingsPolicy()
    assert policy.strategy is AssignmentStrategy.COOPERATIVE_STICKY
    assert policy.library is ClientLibrary.LIBRDKAFKA
    assert policy.env.effective_prefix == "KAFKA_"


def test_a_full_settings_block() -> None:
    policy = parse_settings_policy(
        {
            "sessionTimeoutMs": 30000,
            "heartbeatIntervalMs": 3000,
            "maxPollIntervalMs": 600000,
            "assignmentStrategy": "range",
            "staticMembership": True,
            "env": {"convention": "spring"},
            "mountPath": "/etc/kafka/",
            "properties": {"fetch.min.bytes": "1024", "auto.offset.reset": "earliest"},
        }
    )
    assert policy is not None
    assert policy.session_timeout_ms == 30000
    assert policy.assignment_strategy is AssignmentStrategy.RANGE
    assert policy.library is ClientLibrary.JAVA  # auto follows the spring convention
    assert policy.env.effective_prefix == "SPRING_KAFKA_CONSUMER_PROPERTIES_"
    assert policy.mount_path == "/etc/kafka"
    # Sorted, whatever order the user wrote.
    assert policy.properties == (("auto.offset.reset", "earliest"), ("fetch.min.bytes", "1024"))


@pytest.mark.parametrize(
    ("raw", "field", "fix"),
    [
        ({"sessionTimeoutMs": "45s"}, "sessionTimeoutMs", "milliseconds"),
        ({"sessionTimeoutMs": 0}, "sessionTimeoutMs", "range"),
        ({"heartbeatIntervalMs": True}, "heartbeatIntervalMs", "milliseconds"),
        ({"assignmentStrategy": "sticky-cooperative"}, "assignmentStrategy", "cooperative-sticky"),
        ({"staticMembership": "yes"}, "staticMembership", "bool"),
        ({"clientLibrary": "go"}, "clientLibrary", "librdkafka"),
        ({"env": {"convention": "dotenv"}}, "env.convention", "spring"),
        ({"env": {"convention": "custom"}}, "env.prefix", "env.prefix"),
        ({"env": {"convention": "custom", "prefix": "my-app"}}, "env.prefix", "MYAPP_KAFKA_"),
        ({"env": {"prefix": "APP_"}}, "env.prefix", "convention: custom"),
        ({"env": {"configFileVariable": "1BAD"}}, "env.configFileVariable", "letters"),
        ({"mountPath": "etc/kafka"}, "mountPath", "/etc/kafka"),
        ({"mountPath": "/etc/../root"}, "mountPath", "/etc/kafka"),
        ({"properties": ["fetch.min.bytes=1"]}, "properties", "key: value"),
        ({"properties": {"fetch.min.bytes": 1}}, "properties[fetch.min.bytes]", "quote"),
        ({"properties": {"bad key": "1"}}, "properties[bad key]", "fetch.min.bytes"),
        ({"properties": {"a.b": "x\ny"}}, "properties[a.b]", "line break"),
    ],
)
def test_settings_mistakes_name_the_field(raw: dict[str, object], field: str, fix: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_settings_policy(raw)
    problems = caught.value.problems
    assert [p.path for p in problems] == [f"spec.policy.settings.{field}"], problems
    assert fix in problems[0].fix


def test_custom_prefix_and_no_config_file_variable() -> None:
    policy = parse_settings_policy(
        {"env": {"convention": "custom", "prefix": "ORDERS_KAFKA_", "configFileVariable": ""}}
    )
    assert policy is not None
    assert policy.env.convention is EnvConvention.CUSTOM
    assert policy.env.effective_prefix == "ORDERS_KAFKA_"
    assert policy.env.config_file_variable == ""


def test_broker_delay_defaults_and_strimzi() -> None:
    assert parse_broker_delay_policy({}) == BrokerDelayPolicy()
    policy = parse_broker_delay_policy(
        {
            "mode": "strimzi",
            "delayMs": 8000,
            "strimzi": {"name": "my-cluster", "namespace": "kafka"},
        }
    )
    assert policy == BrokerDelayPolicy(
        DelayMode.STRIMZI, 8000, 30000, StrimziRef("my-cluster", "kafka")
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"mode": "apply"}, "mode"),
        ({"delayMs": -1}, "delayMs"),
        ({"delayMs": 400000}, "delayMs"),
        ({"delayMs": 20000, "maxDelayMs": 10000}, "delayMs"),
        ({"mode": "strimzi"}, "strimzi"),
        ({"mode": "strimzi", "strimzi": {"namespace": "kafka"}}, "strimzi.name"),
        ({"strimzi": {"name": "My_Cluster"}}, "strimzi.name"),
    ],
)
def test_broker_delay_mistakes_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_broker_delay_policy(raw)
    assert [p.path for p in caught.value.problems] == [f"spec.policy.brokerDelay.{field}"]


def test_settings_are_looked_after_only_where_there_is_something_to_deliver_or_undo() -> None:
    assert not settings_asked({"groupId": "g", "policy": {"rollout": {"enabled": True}}}, {})
    assert not settings_asked({"policy": {"enforce": {"sidecar": {"inject": False}}}}, {})
    for block in ("settings", "brokerDelay", "groupConfigs"):
        assert settings_asked({"policy": {block: {}}}, {}), block
    assert settings_asked({"policy": {"enforce": {"sidecar": {"inject": True}}}}, {})
    # A block removed leaves what it delivered to be taken back.
    assert settings_asked({"policy": {}}, {"settings": {"applied": True}})
