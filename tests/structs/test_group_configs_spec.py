"""spec.policy.groupConfigs as the spec reader takes it: types, Kafka's own bounds, and the
heartbeat below the session timeout, each problem naming its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import parse_spec

VALID: dict[str, Any] = {
    "groupId": "orders",
    "kafka": {"bootstrapServers": ["kafka-0.kafka:9092"]},
    "subscription": {"topics": ["orders"]},
    "workload": {"kind": "StatefulSet", "name": "orders-consumer"},
}


def with_group_configs(raw: object) -> dict[str, Any]:
    spec = copy.deepcopy(VALID)
    spec["policy"] = {"groupConfigs": raw}
    return spec


def test_absent_means_the_group_configs_are_left_alone() -> None:
    assert parse_spec(VALID).policy.group_configs is None


def test_the_fields_are_read() -> None:
    spec = parse_spec(
        with_group_configs(
            {
                "consumer": {"sessionTimeoutMs": 50000, "assignmentIntervalMs": 2000},
                "streams": {"initialRebalanceDelayMs": 7000, "numStandbyReplicas": 1},
            }
        )
    )
    configs = spec.policy.group_configs
    assert configs is not None and configs.consumer is not None and configs.streams is not None
    assert configs.consumer.session_timeout_ms == 50000
    assert configs.consumer.heartbeat_interval_ms is None
    assert configs.consumer.assignment_interval_ms == 2000
    assert configs.streams.initial_rebalance_delay_ms == 7000
    assert configs.streams.num_standby_replicas == 1


@pytest.mark.parametrize(
    ("raw", "path", "said"),
    [
        (
            {"streams": {"initialRebalanceDelayMs": -1}},
            "spec.policy.groupConfigs.streams.initialRebalanceDelayMs",
            "between 0 and 2147483647",
        ),
        (
            {"consumer": {"sessionTimeoutMs": "50000"}},
            "spec.policy.groupConfigs.consumer.sessionTimeoutMs",
            "must be an integer",
        ),
        (
            {"consumer": {"sessionTimeoutMs": 45000, "heartbeatIntervalMs": 45000}},
            "spec.policy.groupConfigs.consumer.heartbeatIntervalMs",
            "is not below sessionTimeoutMs (45000)",
        ),
        (
            {"streams": {"sessionTimeoutMs": 45000, "heartbeatIntervalMs": 50000}},
            "spec.policy.groupConfigs.streams.heartbeatIntervalMs",
            "is not below sessionTimeoutMs",
        ),
    ],
)
def test_a_bad_value_names_its_field(raw: object, path: str, said: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(with_group_configs(raw))
    [problem] = caught.value.problems
    assert problem.path == path
    assert said in problem.message
