"""read_spec: a block validated by its model, each problem told with field path and fix."""

from __future__ import annotations

import pytest

from rebalancer.structs.consumer_group_spec import ResourceSpec
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import RolloutPolicy, parse_rollout_policy
from rebalancer.structs.rollout_spec import RolloutSpec
from rebalancer.structs.spec_models import read_spec

PATH = "spec.policy.rollout"


def test_every_bad_field_of_a_block_is_told_at_once() -> None:
    with pytest.raises(SpecInvalid) as caught:
        read_spec(RolloutSpec, {"maxBatchSize": 0, "consumers": {"sessionTimeoutMs": "45s"}}, PATH)
    assert [(p.path, p.message, p.fix) for p in caught.value.problems] == [
        (
            f"{PATH}.maxBatchSize",
            "must be between 1 and 10000, got 0",
            "set a value from 1 to 10000",
        ),
        (f"{PATH}.consumers.sessionTimeoutMs", "must be an integer", "use a number"),
    ]


def test_a_null_is_an_unset_field_as_the_api_server_prunes_it() -> None:
    raw = {"gatherSeconds": None, "consumers": None, "maxBatchSize": None}
    assert parse_rollout_policy(raw) == RolloutPolicy()


def test_the_crds_bounds_are_the_parsers() -> None:
    # The CRD's maxLength, which the hand parser did not copy.
    with pytest.raises(SpecInvalid) as caught:
        parse_rollout_policy({"gateImage": "r/" + "x" * 511})
    assert caught.value.problems[0].path == f"{PATH}.gateImage"
    assert parse_rollout_policy({"gateImage": "r/" + "x" * 510}).gate_image


def test_a_name_other_than_the_crds_is_ignored_as_the_api_server_prunes_it() -> None:
    assert parse_rollout_policy({"park_stateful_sets": False, "unknown": 1}) == RolloutPolicy()


SPEC = {
    "groupId": "orders",
    "kafka": {"bootstrapServers": ["kafka-0.kafka:9092"]},
    "subscription": {"topics": ["orders"]},
    "workload": {"kind": "StatefulSet", "name": "orders-consumer"},
}


def told(raw: object) -> list[tuple[str, str, str]]:
    with pytest.raises(SpecInvalid) as caught:
        read_spec(ResourceSpec, raw, "spec")
    return [(p.path, p.message, p.fix) for p in caught.value.problems]


def test_a_lists_item_is_named_by_its_index_with_the_fields_wording() -> None:
    raw = {**SPEC, "kafka": {"bootstrapServers": ["kafka-0:9092", "kafka", "kafka:99999"]}}
    fix = "write it as host:port, for example kafka-0.kafka:9092"
    assert told(raw) == [
        ("spec.kafka.bootstrapServers[1]", "'kafka' is not host:port", fix),
        ("spec.kafka.bootstrapServers[2]", "'kafka:99999' is not host:port", fix),
    ]


def test_a_rule_between_fields_is_told_with_every_other_problem() -> None:
    # The subscription's own rule runs in the same pass as the workload's field checks.
    raw = {**SPEC, "subscription": {}, "workload": {"kind": "Job", "name": "orders"}}
    assert told(raw) == [
        (
            "spec.subscription",
            "must set exactly one of topics or pattern",
            "keep topics or pattern",
        ),
        ("spec.workload.kind", "unsupported value 'Job'", "use one of: StatefulSet, Deployment"),
    ]


def test_a_rules_problem_names_the_field_it_is_about() -> None:
    raw = {**SPEC, "policy": {"observe": {"intervalSeconds": 60, "reportTtlSeconds": 30}}}
    assert told(raw) == [
        (
            "spec.policy.observe.reportTtlSeconds",
            "(30) is shorter than intervalSeconds (60)",
            "make reportTtlSeconds at least intervalSeconds",
        )
    ]


def test_a_required_field_and_a_wording_limited_to_some_errors() -> None:
    # The bootstrapServers wording for a missing list, not the one for a bad item.
    assert told({**SPEC, "kafka": {}}) == [
        ("spec.kafka.bootstrapServers", "is required", "list the brokers as host:port")
    ]
