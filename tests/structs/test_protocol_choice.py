"""spec.policy.protocol: streams as the spec reader takes it, and the blocks a streams group
(or a classic or KIP-848 one) does not take, each refused naming both fields. The API server's
side of the same rules is applied in tests/lab/controlplane/test_crd_lifecycle.py from
docs/crd-lifecycle.md."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.structs.test_group_configs_spec import VALID
from tests.structs.test_spec_schemas import crd_subtree

from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import ProtocolChoice, parse_spec


def with_policy(policy: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(VALID)
    spec["policy"] = policy
    return spec


def refusal(policy: dict[str, Any]) -> tuple[str, str, str]:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(with_policy(policy))
    [problem] = caught.value.problems
    return problem.path, problem.message, problem.fix


def test_streams_is_read_with_its_group_configs() -> None:
    spec = parse_spec(
        with_policy(
            {"protocol": "streams", "groupConfigs": {"streams": {"initialRebalanceDelayMs": 5000}}}
        )
    )
    assert spec.policy.protocol is ProtocolChoice.STREAMS
    assert spec.policy.group_configs is not None
    assert spec.policy.group_configs.streams is not None


def test_an_unknown_protocol_names_the_choices() -> None:
    path, message, fix = refusal({"protocol": "stream"})
    assert (path, message) == ("spec.policy.protocol", "unsupported value 'stream'")
    assert "streams" in fix


def test_consumer_group_configs_are_refused_for_a_streams_group() -> None:
    path, message, fix = refusal(
        {"protocol": "streams", "groupConfigs": {"consumer": {"sessionTimeoutMs": 45000}}}
    )
    assert path == "spec.policy.groupConfigs.consumer"
    assert "spec.policy.protocol: streams" in message
    assert "spec.policy.groupConfigs.streams" in fix


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_streams_group_configs_are_refused_for_a_consumer_group(protocol: str) -> None:
    path, message, fix = refusal(
        {"protocol": protocol, "groupConfigs": {"streams": {"initialRebalanceDelayMs": 5000}}}
    )
    assert path == "spec.policy.groupConfigs.streams"
    assert f"spec.policy.protocol: {protocol}" in message
    assert "spec.policy.protocol to streams" in fix


def test_auto_takes_either_block() -> None:
    both = {"consumer": {"sessionTimeoutMs": 45000}, "streams": {"numStandbyReplicas": 1}}
    assert parse_spec(with_policy({"groupConfigs": both})).policy.group_configs is not None


def test_consumer_settings_are_refused_for_a_streams_group() -> None:
    path, message, fix = refusal({"protocol": "streams", "settings": {"sessionTimeoutMs": 45000}})
    assert path == "spec.policy.settings"
    assert "Kafka Streams" in message and "spec.policy.protocol: streams" in message
    assert "spec.policy.groupConfigs.streams.sessionTimeoutMs" in fix


def test_the_crd_carries_each_rule_naming_both_fields() -> None:
    policy = crd_subtree("spec", "policy")
    assert "streams" in policy["properties"]["protocol"]["enum"]
    by_path = {rule["fieldPath"]: rule for rule in policy["x-kubernetes-validations"]}
    assert set(by_path) == {".settings", ".groupConfigs.consumer", ".groupConfigs.streams"}
    for path, rule in by_path.items():
        assert f"spec.policy{path}" in rule["message"]
        assert "spec.policy.protocol" in rule["message"]
        assert rule["reason"] == "FieldValueForbidden"
