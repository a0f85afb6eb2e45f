"""Spec parsing: every kind of mistake names the field and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import (
    BrokerProfileChoice,
    WorkloadKind,
    check_pattern,
    parse_spec,
)

VALID: dict[str, Any] = {
    "groupId": "orders",
    "kafka": {"bootstrapServers": ["kafka-0.kafka:9092", "127.0.0.1:9093"]},
    "subscription": {"topics": ["orders", "orders.retry"]},
    "workload": {"kind": "StatefulSet", "name": "orders-consumer"},
}


def with_change(path: str, value: object) -> dict[str, Any]:
    spec = copy.deepcopy(VALID)
    node = spec
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is _DELETE:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return spec


_DELETE = object()


def test_valid_spec_is_parsed_with_defaults() -> None:
    spec = parse_spec(VALID)
    assert spec.group_id == "orders"
    assert spec.kafka.bootstrap_servers == ("kafka-0.kafka:9092", "127.0.0.1:9093")
    assert spec.kafka.profile is BrokerProfileChoice.AUTO
    assert spec.workload.kind is WorkloadKind.STATEFULSET
    assert spec.policy.observe.interval_seconds == 10
    assert spec.subscription.matches("orders.retry")
    assert not spec.subscription.matches("payments")


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("groupId", _DELETE, "spec.groupId"),
        ("groupId", 42, "spec.groupId"),
        ("groupId", "has space", "spec.groupId"),
        ("kafka", _DELETE, "spec.kafka"),
        ("kafka.bootstrapServers", _DELETE, "spec.kafka.bootstrapServers"),
        ("kafka.bootstrapServers", "kafka:9092", "spec.kafka.bootstrapServers"),
        ("kafka.bootstrapServers", ["kafka"], "spec.kafka.bootstrapServers[0]"),
        ("kafka.bootstrapServers", ["kafka:99999"], "spec.kafka.bootstrapServers[0]"),
        ("kafka.profile", "confluent", "spec.kafka.profile"),
        ("kafka.requestTimeoutSeconds", 0, "spec.kafka.requestTimeoutSeconds"),
        ("kafka.requestTimeoutSeconds", "10", "spec.kafka.requestTimeoutSeconds"),
        ("kafka.sasl", {"mechanism": "GSSAPI"}, "spec.kafka.sasl.mechanism"),
        ("kafka.sasl", {"mechanism": "PLAIN"}, "spec.kafka.sasl.usernameSecretRef"),
        ("subscription.topics", [], "spec.subscription.topics"),
        ("subscription.topics", ["bad topic"], "spec.subscription.topics[0]"),
        ("subscription.pattern", "orders.*", "spec.subscription"),
        ("workload", _DELETE, "spec.workload"),
        ("workload.kind", "DaemonSet", "spec.workload.kind"),
        ("workload.kind", "ReplicaSet", "spec.workload.kind"),
        ("workload.name", "Orders_Consumer", "spec.workload.name"),
        ("policy.observe.intervalSeconds", -5, "spec.policy.observe.intervalSeconds"),
        ("policy.observe.intervalSeconds", 10**12, "spec.policy.observe.intervalSeconds"),
        ("policy.observe.intervalSeconds", True, "spec.policy.observe.intervalSeconds"),
        ("policy.protocol", "kraft", "spec.policy.protocol"),
        ("policy", "fast", "spec.policy"),
    ],
)
def test_each_mistake_names_its_field(path: str, value: object, field: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(with_change(path, value))
    paths = [problem.path for problem in caught.value.problems]
    assert field in paths, paths
    assert "fix:" in str(caught.value)


def test_report_ttl_shorter_than_interval_is_refused() -> None:
    spec = with_change("policy", {"observe": {"intervalSeconds": 60, "reportTtlSeconds": 30}})
    with pytest.raises(SpecInvalid, match=r"spec.policy.observe.reportTtlSeconds"):
        parse_spec(spec)


def test_all_problems_are_reported_not_just_the_first() -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_spec({"groupId": "", "kafka": {}, "subscription": {}, "workload": {"kind": "Job"}})
    paths = {problem.path for problem in caught.value.problems}
    assert {"spec.groupId", "spec.kafka.bootstrapServers", "spec.subscription"} <= paths
    assert "spec.workload.kind" in paths and "spec.workload.name" in paths


def test_spec_must_be_an_object() -> None:
    with pytest.raises(SpecInvalid, match="spec must be an object"):
        parse_spec(["not", "a", "mapping"])
    with pytest.raises(SpecInvalid, match="spec is required"):
        parse_spec(None)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("orders\\..*", None),
        ("(unclosed", "not a valid regular expression"),
        ("(a+)+$", "backtrack"),
        ("(x*)*y", "backtrack"),
        ("a" * 2000, "longer than"),
    ],
)
def test_patterns_that_cannot_be_used_are_refused(pattern: str, problem: str | None) -> None:
    found = check_pattern(pattern)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_invalid_pattern_in_spec_names_the_field() -> None:
    spec = with_change("subscription", {"pattern": "(a+)+"})
    with pytest.raises(SpecInvalid, match=r"spec.subscription.pattern"):
        parse_spec(spec)


def test_secret_references_are_collected_without_values() -> None:
    spec = with_change(
        "kafka",
        {
            "bootstrapServers": ["k:9093"],
            "tls": {"caSecretRef": {"name": "ca"}},
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "usernameSecretRef": {"name": "creds", "key": "user"},
                "passwordSecretRef": {"name": "creds", "key": "pass"},
            },
        },
    )
    parsed = parse_spec(spec)
    refs = parsed.kafka.secret_refs()
    assert [(ref.name, ref.key) for ref in refs] == [
        ("ca", "ca.crt"),
        ("creds", "user"),
        ("creds", "pass"),
    ]


def test_enforce_policy_problems_are_reported_with_the_spec() -> None:
    spec = with_change("policy", {"enforce": {"scheduleSeconds": 5, "sidecar": {"url": "ftp://x"}}})
    with pytest.raises(SpecInvalid) as caught:
        parse_spec(spec)
    paths = {problem.path for problem in caught.value.problems}
    assert {"spec.policy.enforce.scheduleSeconds", "spec.policy.enforce.sidecar.url"} <= paths
