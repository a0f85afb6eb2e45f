"""planning.settings_deliveries: the writes of one settings delivery and what status says of
them, decided from the workload as read."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.planning.test_settings_rendering import POLICY, workload

from rebalancer.planning.settings_deliveries import (
    DeliveryInputs,
    SettingsTarget,
    delivered,
    plan_delivery,
    settings_target,
)
from rebalancer.planning.sidecar_templates import apply_ops
from rebalancer.structs.broker_configs import BrokerLimits
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind, parse_spec

TARGET = SettingsTarget(
    namespace="default",
    name="orders",
    uid="uid-1",
    group_id="orders",
    bootstrap_servers=("kafka:9092",),
    workload_kind=WorkloadKind.STATEFULSET,
    workload_name="orders-consumer",
    container=None,
    protocol_choice=ProtocolChoice.AUTO,
    profile=None,
    settings=POLICY,
    delay=None,
)


def inputs(target: SettingsTarget = TARGET, body: dict[str, Any] | None = None) -> DeliveryInputs:
    """The workload as read: `body`, or the rendering tests' StatefulSet."""
    return DeliveryInputs(target, body or workload(), None, {}, {}, BrokerLimits())


def missing(target: SettingsTarget = TARGET) -> DeliveryInputs:
    return DeliveryInputs(target, None, None, {}, {}, BrokerLimits())


def test_a_missing_workload_is_reported_and_nothing_written() -> None:
    read = missing()
    delivery = plan_delivery(read)
    assert delivery.configmap is None and delivery.ops == []
    outcome = delivered(read, delivery, True, None)
    assert outcome.status is not None and outcome.status["applied"] is False
    assert "StatefulSet default/orders-consumer not found" in outcome.status["message"]
    quiet = missing(replace(TARGET, settings=None))
    assert delivered(quiet, plan_delivery(quiet), True, None).status is None


def test_settings_are_written_once_and_told_only_when_the_write_went_in() -> None:
    read = inputs()
    delivery = plan_delivery(read)
    assert delivery.configmap is not None and delivery.ops
    assert [n.reason for n in delivery.on_applied] == ["SettingsApplied"]
    applied = delivered(read, delivery, True, None)
    assert [n.reason for n in applied.notices] == ["SettingsApplied"]
    assert applied.status is not None and not applied.template_lost
    lost = delivered(read, delivery, False, None)
    assert lost.template_lost and lost.notices == ()
    again = inputs(body=apply_ops(workload(), delivery.ops))
    assert plan_delivery(again).ops == []


def test_removed_settings_take_out_what_the_operator_added() -> None:
    put_in = apply_ops(workload(), plan_delivery(inputs()).ops)
    read = inputs(replace(TARGET, settings=None), body=put_in)
    delivery = plan_delivery(read)
    assert delivery.ops and delivery.configmap is None
    outcome = delivered(read, delivery, True, None)
    assert outcome.status is None
    assert [n.reason for n in outcome.notices] == ["SettingsRemoved"]


def test_a_refusal_patches_nothing_and_is_told_once() -> None:
    target = replace(
        TARGET,
        workload_kind=WorkloadKind.DEPLOYMENT,
        settings=replace(POLICY, static_membership=True),
    )
    read = inputs(target, body=workload("Deployment"))
    delivery = plan_delivery(read)
    assert delivery.ops == [] and delivery.configmap is None and not delivery.group_configs
    first = delivered(read, delivery, True, None)
    assert [(n.warning, n.reason) for n in first.notices] == [(True, "SettingsRefused")]
    assert first.status is not None
    told = replace(read, previous=first.status)
    assert delivered(told, plan_delivery(told), True, None).notices == ()


def test_the_target_follows_the_spec() -> None:
    raw = {
        "groupId": "orders",
        "kafka": {"bootstrapServers": ["kafka:9092"]},
        "subscription": {"topics": ["orders"]},
        "workload": {"kind": "Deployment", "name": "orders-consumer", "container": "app"},
        "policy": {"rollout": {"enabled": False, "gateJoins": True}},
    }
    target = settings_target(parse_spec(raw), "shop", "orders", "uid-2", "rebalancer:1")
    assert (target.namespace, target.name, target.uid) == ("shop", "orders", "uid-2")
    assert target.workload_kind is WorkloadKind.DEPLOYMENT and target.container == "app"
    assert target.where == "Deployment shop/orders-consumer"
    # Without managed rollouts the operator opens no gates, and delivers no staggered rollout.
    assert not target.staggered and not target.gate_joins
    assert target.sidecar_options.image == "rebalancer:1"
