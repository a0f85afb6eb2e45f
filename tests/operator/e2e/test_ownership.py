"""One owner per group and per workload, on the lab: the example `orders` ConsumerGroup runs
with its three consumers, and other ConsumerGroups try to claim its group or its workload.

At apply time the real kube-apiserver calls the operator's validating webhook, which refuses
them naming `default/orders`. Created while the webhook was down (the operator stopped, the
webhook's failurePolicy Ignore lets the write through), the newer resources take no action: no
status.group, Ready False NotOwner naming the owner, a NotOwner Event, the StatefulSet left
unparked though their rollout planner is on; the older resource keeps observing its members.
With the example's resource gone, a resource for its StatefulSet under another group id sees the
pods' member reports name `orders` and takes no action either (GroupMismatch).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    events_for,
    eventually,
    get_cg,
    kubectl,
    running_lab,
)

from rebalancer_lab.running import ADMISSION_CONFIGURATION, Lab

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=True,
        consumers=3,
        partitions=6,
        start_spread_seconds=0.2,
    ) as running:
        yield running


def owner_group(lab: Lab) -> dict[str, Any] | None:
    """The example group's status while it is observed Stable with its three members."""
    group = (get_cg(lab, "orders").get("status") or {}).get("group") or {}
    return group if group.get("members") == 3 and group.get("state") == "Stable" else None


def twin(lab: Lab) -> dict[str, Any]:
    """A second ConsumerGroup for the example's group id, with a workload of its own."""
    body = consumer_group("orders-twin", lab.bootstrap, group_id="orders")
    body["spec"]["subscription"] = {"topics": ["orders"]}
    return body


def intruder(lab: Lab) -> dict[str, Any]:
    """Another group id, but the example's StatefulSet, with the rollout planner on."""
    body = consumer_group("intruder", lab.bootstrap, group_id="intruder")
    body["spec"]["workload"] = {"kind": "StatefulSet", "name": "orders-consumer"}
    body["spec"]["policy"]["rollout"] = {"enabled": True}
    return body


def partition(lab: Lab) -> Any:
    sts = json.loads(kubectl(lab, "get", "statefulset", "orders-consumer", "-o", "json"))
    return ((sts["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")


def test_the_api_server_refuses_a_second_owner_naming_the_first(lab: Lab) -> None:
    eventually(lambda: owner_group(lab), 90, "the example group, 3 members, Stable")
    configuration = json.loads(
        kubectl(lab, "get", "validatingwebhookconfiguration", ADMISSION_CONFIGURATION, "-o", "json")
    )
    for webhook in configuration["webhooks"]:
        # An operator outage never blocks a write, and only ConsumerGroups are sent.
        assert webhook["failurePolicy"] == "Ignore"
        assert [rule["resources"] for rule in webhook["rules"]] == [["consumergroups"]]

    refused = kubectl(lab, "apply", "-f", "-", stdin=json.dumps(twin(lab)), check=False)
    assert "denied the request" in refused, refused
    assert "spec.groupId 'orders'" in refused and "default/orders" in refused, refused

    refused = kubectl(lab, "apply", "-f", "-", stdin=json.dumps(intruder(lab)), check=False)
    assert "denied the request" in refused, refused
    assert "spec.workload StatefulSet/orders-consumer" in refused, refused
    assert "default/orders" in refused, refused

    for name in ("orders-twin", "intruder"):
        missing = kubectl(lab, "get", "consumergroup", name, check=False)
        assert "NotFound" in missing, missing
    # A ConsumerGroup of its own group and workload goes through the same webhook.
    apply(lab, consumer_group("bystander", lab.bootstrap))
    assert get_cg(lab, "bystander")["metadata"]["name"] == "bystander"
    kubectl(lab, "delete", "consumergroup", "bystander", "--wait=true")


def test_rivals_made_while_the_webhook_was_down_take_no_action(lab: Lab) -> None:
    eventually(lambda: owner_group(lab), 90, "the example group, 3 members, Stable")
    assert partition(lab) in (None, 0)
    assert lab.operator is not None
    lab.operator.stop(grace=15)
    try:
        # The webhook configuration is still there, its server gone: Ignore lets them in.
        apply(lab, twin(lab), intruder(lab))
    finally:
        lab.start_operator()

    def not_owner(name: str) -> dict[str, Any] | None:
        body = get_cg(lab, name)
        ready = condition(body, "Ready")
        return body if ready.get("reason") == "NotOwner" else None

    for name, field in (("orders-twin", "spec.groupId"), ("intruder", "spec.workload")):
        body = eventually(lambda n=name: not_owner(n), 60, f"{name} Ready False NotOwner")
        ready, degraded = condition(body, "Ready"), condition(body, "Degraded")
        assert ready["status"] == "False" and "default/orders" in ready["message"]
        assert field in ready["message"] and "takes no action" in ready["message"]
        assert degraded["status"] == "True" and degraded["reason"] == "NotOwner"
        # It reports nothing of a group it does not observe.
        assert "group" not in (body.get("status") or {}), body["status"]
        reasons = [event["reason"] for event in events_for(lab, name)]
        assert "NotOwner" in reasons, reasons

    # The intruder's rollout planner is on, yet the StatefulSet is not parked (it was within
    # seconds before), while the owner keeps observing its three members.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert partition(lab) in (None, 0), "the intruder parked the owner's StatefulSet"
        assert condition(get_cg(lab, "intruder"), "Ready")["reason"] == "NotOwner"
        time.sleep(1)
    assert eventually(lambda: owner_group(lab), 30, "the owner still observing its members")
    assert condition(get_cg(lab, "orders"), "Ready")["status"] == "True"

    # Deleting the newer duplicate leaves the owner's fleet alone; the owner stays Ready.
    kubectl(lab, "delete", "consumergroup", "intruder", "orders-twin", "--wait=true")
    assert partition(lab) in (None, 0)
    assert condition(get_cg(lab, "orders"), "Ready")["status"] == "True"


def test_a_resource_whose_workload_consumes_as_another_group_takes_no_action(lab: Lab) -> None:
    # The example's resource goes; its consumers keep consuming (and reporting) as `orders`.
    kubectl(lab, "delete", "consumergroup", "orders", "--wait=true")
    assert partition(lab) in (None, 0)
    apply(lab, intruder(lab))

    def mismatched() -> dict[str, Any] | None:
        body = get_cg(lab, "intruder")
        return body if condition(body, "Ready").get("reason") == "GroupMismatch" else None

    body = eventually(mismatched, 60, "intruder Ready False GroupMismatch")
    ready, degraded = condition(body, "Ready"), condition(body, "Degraded")
    assert ready["status"] == "False" and degraded["status"] == "True"
    # Both group ids named, and the pods seen using the other one.
    assert "group 'orders'" in ready["message"], ready["message"]
    assert "spec.groupId 'intruder'" in ready["message"], ready["message"]
    assert "orders-consumer-0" in ready["message"], ready["message"]
    assert "group" not in (body.get("status") or {}), body["status"]
    assert "GroupMismatch" in [event["reason"] for event in events_for(lab, "intruder")]
    # Its rollout planner is on, yet the StatefulSet of another group's consumers is not parked.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert partition(lab) in (None, 0), "the intruder parked another group's StatefulSet"
        time.sleep(1)
    kubectl(lab, "delete", "consumergroup", "intruder", "--wait=true")
