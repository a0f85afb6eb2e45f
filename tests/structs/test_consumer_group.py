"""The one typed reading of a ConsumerGroup object (structs/consumer_group.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rebalancer.structs.consumer_group import (
    declared_group_id,
    read_consumer_group,
    written_status,
)
from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS
from rebalancer.structs.problems import SpecInvalid

BODY: dict[str, Any] = {
    "metadata": {"name": "orders", "namespace": "shop", "generation": 4},
    "spec": {
        "groupId": "orders",
        "kafka": {"bootstrapServers": ["kafka:9092"]},
        "subscription": {"topics": ["orders"]},
        "workload": {"kind": "StatefulSet", "name": "orders"},
    },
    "status": {"rollout": {"phase": "Idle"}, "group": "not an object"},
}


def body_with(**policy: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["spec"]["policy"] = policy
    return body


def test_identity_spec_and_status_in_one_read() -> None:
    group = read_consumer_group(BODY)
    assert (group.namespace, group.name, group.generation) == ("shop", "orders", 4)
    assert group.group_id == "orders"
    assert group.spec.workload.name == "orders"
    assert group.status_part("rollout") == {"phase": "Idle"}
    # A part of another type than an object reads as empty, not as a crash later.
    assert group.status_part("group") == {}
    assert group.status_part("settings") == {}


def test_the_rollout_policy_is_managed_only_when_turned_on() -> None:
    assert read_consumer_group(BODY).spec.policy.rollout.enabled is False
    assert (
        read_consumer_group(body_with(rollout={"maxBatchSize": 3})).spec.policy.rollout.enabled
        is False
    )
    turned_on = read_consumer_group(body_with(rollout={"enabled": True, "maxBatchSize": 3}))
    assert turned_on.spec.policy.rollout.enabled is True
    assert turned_on.spec.policy.rollout.max_batch_size == 3


def test_an_unset_bypass_is_the_operators_default_and_a_set_one_is_kept() -> None:
    unset = body_with(rollout={"enabled": True})
    assert read_consumer_group(unset).spec.policy.rollout.bypass_gate_after_seconds == (
        DEFAULT_BYPASS_SECONDS
    )
    assert (
        read_consumer_group(unset, bypass_default=77).spec.policy.rollout.bypass_gate_after_seconds
        == 77
    )
    written = body_with(rollout={"enabled": True, "bypassGateAfterSeconds": 120})
    assert (
        read_consumer_group(
            written, bypass_default=77
        ).spec.policy.rollout.bypass_gate_after_seconds
        == 120
    )


def test_the_enforce_policy_is_part_of_the_spec() -> None:
    group = read_consumer_group(body_with(enforce={"enabled": True, "requestToken": "t-1"}))
    assert group.spec.policy.enforce.enabled is True
    assert group.spec.policy.enforce.request_token == "t-1"


def test_every_problem_of_spec_and_policies_is_named_at_once() -> None:
    body = body_with(rollout={"enabled": True, "maxBatchSize": 0}, enforce="yes")
    body["spec"]["groupId"] = "bad group"
    with pytest.raises(SpecInvalid) as raised:
        read_consumer_group(body)
    paths = {problem.path for problem in raised.value.problems}
    assert {"spec.groupId", "spec.policy.rollout.maxBatchSize", "spec.policy.enforce"} <= paths


def test_namespace_falls_back_to_the_one_given_then_default() -> None:
    body = copy.deepcopy(BODY)
    del body["metadata"]["namespace"]
    assert read_consumer_group(body, namespace="apps").namespace == "apps"
    assert read_consumer_group(body).namespace == "default"


@pytest.mark.parametrize(
    ("body", "group_id", "status"),
    [
        ({}, "", {}),
        ({"spec": None, "status": None}, "", {}),
        ({"spec": ["x"], "status": ["y"]}, "", {}),
        ({"spec": {"groupId": 5}}, "", {}),
        ({"spec": {"groupId": "g"}, "status": {"a": 1}}, "g", {"a": 1}),
    ],
)
def test_an_invalid_object_is_read_raw_only_for_its_group_id_and_status(
    body: dict[str, Any], group_id: str, status: dict[str, Any]
) -> None:
    assert declared_group_id(body) == group_id
    assert written_status(body) == status
