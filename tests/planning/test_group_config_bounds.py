"""spec.policy.groupConfigs against the broker's bounds, as planning.group_configs decides it."""

from __future__ import annotations

import pytest

from rebalancer.planning.group_configs import (
    check_group_configs,
    configs_status,
    differing,
    field_path,
    wanted_configs,
)
from rebalancer.structs.group_configs_spec import (
    ConsumerGroupConfigsSpec,
    GroupConfigsSpec,
    StreamsGroupConfigsSpec,
)

# What Apache Kafka 4.4 reports with its defaults (measured on the lab broker).
KAFKA_44 = {
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.min.assignment.interval.ms": "0",
    "group.consumer.max.assignment.interval.ms": "15000",
    "group.streams.min.session.timeout.ms": "45000",
    "group.streams.max.session.timeout.ms": "60000",
    "group.streams.min.heartbeat.interval.ms": "5000",
    "group.streams.max.heartbeat.interval.ms": "15000",
    "group.streams.max.standby.replicas": "2",
}


def consumer(**fields: int) -> GroupConfigsSpec:
    return GroupConfigsSpec(consumer=ConsumerGroupConfigsSpec.model_validate(fields))


def streams(**fields: int) -> GroupConfigsSpec:
    return GroupConfigsSpec(streams=StreamsGroupConfigsSpec.model_validate(fields))


def test_the_wanted_configs_are_the_fields_set_in_kafka_names() -> None:
    spec = GroupConfigsSpec(
        consumer=ConsumerGroupConfigsSpec.model_validate({"assignmentIntervalMs": 0}),
        streams=StreamsGroupConfigsSpec.model_validate(
            {"initialRebalanceDelayMs": 7000, "numStandbyReplicas": 1}
        ),
    )
    assert wanted_configs(spec) == {
        "consumer.assignment.interval.ms": "0",
        "streams.initial.rebalance.delay.ms": "7000",
        "streams.num.standby.replicas": "1",
    }
    assert wanted_configs(GroupConfigsSpec()) == {}


@pytest.mark.parametrize(
    ("spec", "path", "said"),
    [
        (
            consumer(sessionTimeoutMs=30000),
            "spec.policy.groupConfigs.consumer.sessionTimeoutMs",
            "45000 to 60000",
        ),
        (
            consumer(heartbeatIntervalMs=20000),
            "spec.policy.groupConfigs.consumer.heartbeatIntervalMs",
            "5000 to 15000",
        ),
        (
            consumer(assignmentIntervalMs=16000),
            "spec.policy.groupConfigs.consumer.assignmentIntervalMs",
            "0 to 15000",
        ),
        (
            streams(sessionTimeoutMs=61000),
            "spec.policy.groupConfigs.streams.sessionTimeoutMs",
            "group.streams.max.session.timeout.ms",
        ),
        (
            streams(numStandbyReplicas=3),
            "spec.policy.groupConfigs.streams.numStandbyReplicas",
            "group.streams.max.standby.replicas (2)",
        ),
    ],
)
def test_a_value_outside_the_broker_bounds_names_the_field_the_bound_and_the_fix(
    spec: GroupConfigsSpec, path: str, said: str
) -> None:
    [problem] = check_group_configs(spec, KAFKA_44, settings_managed=False)
    assert problem.path == path
    assert said in problem.message
    assert "set a value" in problem.fix


def test_values_within_the_bounds_pass() -> None:
    spec = GroupConfigsSpec(
        consumer=ConsumerGroupConfigsSpec.model_validate(
            {"sessionTimeoutMs": 60000, "heartbeatIntervalMs": 5000, "assignmentIntervalMs": 0}
        ),
        streams=StreamsGroupConfigsSpec.model_validate(
            {"initialRebalanceDelayMs": 120000, "numStandbyReplicas": 2}
        ),
    )
    assert check_group_configs(spec, KAFKA_44, settings_managed=False) == []


def test_bounds_the_broker_does_not_report_are_left_to_the_broker() -> None:
    assert check_group_configs(consumer(sessionTimeoutMs=1000), {}, settings_managed=False) == []
    # A raised bound is the broker's, not Kafka's default.
    raised = {**KAFKA_44, "group.consumer.max.session.timeout.ms": "300000"}
    assert check_group_configs(consumer(sessionTimeoutMs=120000), raised, False) == []


def test_settings_and_group_configs_may_not_both_own_the_kip848_session() -> None:
    [problem] = check_group_configs(consumer(sessionTimeoutMs=50000), KAFKA_44, True)
    assert problem.path == "spec.policy.groupConfigs.consumer.sessionTimeoutMs"
    assert "spec.policy.settings" in problem.message and "one place" in problem.fix
    # The assignment interval is not spec.policy.settings' to set.
    assert check_group_configs(consumer(assignmentIntervalMs=2000), KAFKA_44, True) == []


def test_only_the_configs_the_broker_does_not_hold_are_altered() -> None:
    wanted = {"streams.initial.rebalance.delay.ms": "7000", "streams.num.standby.replicas": "1"}
    current = {"streams.initial.rebalance.delay.ms": "7000", "streams.num.standby.replicas": "0"}
    assert differing(wanted, current) == {"streams.num.standby.replicas": "1"}
    assert differing(wanted, wanted) == {}


def test_a_wanted_value_equal_to_the_broker_default_is_set_on_the_group() -> None:
    wanted = {"streams.initial.rebalance.delay.ms": "3000"}
    by_default = {"streams.initial.rebalance.delay.ms": "default-config"}
    assert differing(wanted, wanted, by_default) == wanted
    own = {"streams.initial.rebalance.delay.ms": "group-config"}
    assert differing(wanted, wanted, own) == {}


def test_status_shows_each_wanted_config_with_its_source() -> None:
    shown = configs_status(
        {"consumer.session.timeout.ms": "50000"},
        {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "5000"},
        {"consumer.session.timeout.ms": "group-config"},
    )
    assert shown == {"consumer.session.timeout.ms": {"value": "50000", "source": "group-config"}}
    assert field_path("streams.num.standby.replicas").endswith("streams.numStandbyReplicas")
