"""Rendering settings: ConfigMap, env vars by convention, and the pod-template patch.

Patches are applied as the API server applies them (RFC 6902, the jsonpatch library), so each
test checks the template a cluster would store, and that patching it again changes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from rebalancer.planning.consumer_settings import SettingsContext, check_settings, resolve_settings
from rebalancer.planning.consumer_settings_plans import (
    SettingsInputs,
    consumer_timings,
    plan_settings,
    settings_conditions,
    settings_status,
    timings_from_status,
)
from rebalancer.planning.consumer_settings_templates import (
    SETTINGS_ENV_ANNOTATION,
    SETTINGS_HASH_ANNOTATION,
    OwnerRef,
    RenderedSettings,
    configmap_name,
    render_configmap,
    render_settings,
    render_template_patch,
)
from rebalancer.planning.sidecar_templates import PatchFailed, apply_ops
from rebalancer.structs.broker_configs import ApplyState, BrokerLimits, ConfigOutcome
from rebalancer.structs.consumer_settings_policy import EnvConvention, EnvPolicy, SettingsPolicy
from rebalancer.structs.rollout_policy import ConsumerTimings
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind

Body = dict[str, Any]
STS = SettingsContext(WorkloadKind.STATEFULSET, group_active=False)
POLICY = SettingsPolicy(session_timeout_ms=6000, max_poll_interval_ms=60000)


def workload(kind: str = "StatefulSet", **container: Any) -> Body:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "orders-consumer", "namespace": "default", "resourceVersion": "7"},
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "orders"}},
                "spec": {
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "example/consumer:1",
                            "env": [
                                {"name": "KAFKA_GROUP_ID", "value": "orders"},
                                {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "10000"},
                            ],
                            **container,
                        },
                        {"name": "sidecar", "image": "example/sidecar:1"},
                    ]
                },
            },
        },
    }


def rendered(policy: SettingsPolicy = POLICY, context: SettingsContext = STS) -> RenderedSettings:
    return render_settings("orders", policy, resolve_settings(policy, context))


def env_of(body: Body, index: int = 0) -> dict[str, Any]:
    env = body["spec"]["template"]["spec"]["containers"][index].get("env") or []
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


def patched(body: Body, settings: RenderedSettings | None, **options: Any) -> Body:
    kind = WorkloadKind(body["kind"])
    patch = render_template_patch(body, settings, kind=kind, **options)
    assert patch.problem is None
    return apply_ops(body, patch.ops) if patch.ops else body


# (convention policy, expected variable for session.timeout.ms, static variable)
CONVENTIONS = [
    (EnvPolicy(), "KAFKA_SESSION_TIMEOUT_MS", "KAFKA_GROUP_INSTANCE_ID"),
    (
        EnvPolicy(EnvConvention.SPRING),
        "SPRING_KAFKA_CONSUMER_PROPERTIES_SESSION_TIMEOUT_MS",
        "SPRING_KAFKA_CONSUMER_PROPERTIES_GROUP_INSTANCE_ID",
    ),
    (
        EnvPolicy(EnvConvention.CUSTOM, "ORDERS_"),
        "ORDERS_SESSION_TIMEOUT_MS",
        "ORDERS_GROUP_INSTANCE_ID",
    ),
]


@pytest.mark.parametrize(("env", "session_var", "static_var"), CONVENTIONS)
def test_env_names_follow_the_convention(env: EnvPolicy, session_var: str, static_var: str) -> None:
    policy = replace(POLICY, env=env, static_membership=True)
    body = patched(workload(), rendered(policy))
    variables = env_of(body)
    assert variables[session_var] == "6000"
    assert variables[static_var] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
    assert variables["KAFKA_CONFIG_FILE"] == "/etc/rebalancer/consumer.properties"


def test_a_gated_deployments_static_members_take_the_identity_slot_annotation() -> None:
    policy = replace(POLICY, static_membership=True)
    deployment = SettingsContext(WorkloadKind.DEPLOYMENT, group_active=False, gate_joins=True)
    assert check_settings(policy, deployment) == []
    body = patched(workload("Deployment"), rendered(policy, deployment))
    path = "metadata.annotations['rebalancer.dev/instance-id']"
    assert env_of(body)["KAFKA_GROUP_INSTANCE_ID"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": path}
    }
    # Without the gate nobody hands the slots out: refused, with the fix.
    ungated = replace(deployment, gate_joins=False)
    (problem,) = check_settings(policy, ungated)
    assert problem.path.endswith("staticMembership") and "gateJoins" in problem.fix


def test_file_only_convention_sets_no_property_variables() -> None:
    policy = replace(POLICY, env=EnvPolicy(EnvConvention.NONE))
    variables = env_of(patched(workload(), rendered(policy)))
    assert set(variables) == {
        "KAFKA_GROUP_ID",
        "KAFKA_SESSION_TIMEOUT_MS",  # the user's own, untouched
        "KAFKA_CONFIG_FILE",
        "REBALANCER_SETTINGS_HASH",
    }
    assert variables["KAFKA_SESSION_TIMEOUT_MS"] == "10000"


def test_the_patch_mounts_the_configmap_and_marks_the_template() -> None:
    settings = rendered()
    body = patched(workload(), settings)
    template = body["spec"]["template"]
    consumer = template["spec"]["containers"][0]
    assert consumer["volumeMounts"] == [
        {"name": "rebalancer-settings", "mountPath": "/etc/rebalancer", "readOnly": True}
    ]
    assert template["spec"]["volumes"] == [
        {
            "name": "rebalancer-settings",
            "configMap": {"name": "orders-consumer-settings", "optional": True, "defaultMode": 420},
        }
    ]
    annotations = template["metadata"]["annotations"]
    assert annotations[SETTINGS_HASH_ANNOTATION] == settings.hash
    assert "KAFKA_SESSION_TIMEOUT_MS" in annotations[SETTINGS_ENV_ANNOTATION].split(",")
    # Ours replaces the user's variable in place; the sidecar is left alone.
    assert list(env_of(body))[:2] == ["KAFKA_GROUP_ID", "KAFKA_SESSION_TIMEOUT_MS"]
    assert env_of(body)["KAFKA_SESSION_TIMEOUT_MS"] == "6000"
    assert "env" not in template["spec"]["containers"][1]


def test_patching_again_changes_nothing() -> None:
    settings = rendered()
    once = patched(workload(), settings, park=True)
    again = render_template_patch(once, settings, kind=WorkloadKind.STATEFULSET, park=True)
    assert again.ops == ()


def test_a_settings_change_only_the_file_shows_still_changes_the_template() -> None:
    file_only = replace(POLICY, env=EnvPolicy(EnvConvention.NONE))
    first = patched(workload(), rendered(file_only))
    changed = replace(file_only, properties=(("fetch.min.bytes", "1024"),))
    second = patched(first, rendered(changed))
    hashes = [b["spec"]["template"]["metadata"]["annotations"][SETTINGS_HASH_ANNOTATION]
              for b in (first, second)]  # fmt: skip
    assert hashes[0] != hashes[1]
    assert env_of(first)["REBALANCER_SETTINGS_HASH"] != env_of(second)["REBALANCER_SETTINGS_HASH"]


def test_variables_the_operator_stops_setting_are_removed_and_only_those() -> None:
    with_fetch = replace(POLICY, properties=(("fetch.min.bytes", "1024"),))
    first = patched(workload(), rendered(with_fetch))
    assert "KAFKA_FETCH_MIN_BYTES" in env_of(first)
    second = patched(first, rendered(POLICY))
    assert "KAFKA_FETCH_MIN_BYTES" not in env_of(second)
    assert env_of(second)["KAFKA_GROUP_ID"] == "orders"


def test_removing_the_settings_takes_out_everything_the_operator_added() -> None:
    body = patched(workload(), rendered(replace(POLICY, static_membership=True)))
    removed = patched(body, None)
    template = removed["spec"]["template"]
    assert set(env_of(removed)) == {"KAFKA_GROUP_ID"}  # ours replaced the user's session value
    assert "volumeMounts" not in template["spec"]["containers"][0]
    assert "volumes" not in template["spec"]
    assert template["metadata"]["annotations"] == {}


def test_a_config_file_variable_the_user_sets_is_kept() -> None:
    body = workload()
    body["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "KAFKA_CONFIG_FILE", "value": "/app/base.properties"}
    )
    patch = render_template_patch(body, rendered(), kind=WorkloadKind.STATEFULSET)
    after = apply_ops(body, patch.ops)
    assert env_of(after)["KAFKA_CONFIG_FILE"] == "/app/base.properties"
    assert any("sets KAFKA_CONFIG_FILE itself" in note for note in patch.notes)


def test_the_named_container_is_patched_and_a_missing_one_refused() -> None:
    body = patched(workload(), rendered(), container="sidecar")
    assert env_of(body, 1)["KAFKA_SESSION_TIMEOUT_MS"] == "6000"
    assert env_of(body, 0)["KAFKA_SESSION_TIMEOUT_MS"] == "10000"
    patch = render_template_patch(
        workload(), rendered(), kind=WorkloadKind.STATEFULSET, container="app"
    )
    assert patch.problem is not None and patch.problem.path == "spec.workload.container"


def test_a_mount_path_in_use_is_refused() -> None:
    body = workload(volumeMounts=[{"name": "config", "mountPath": "/etc/rebalancer"}])
    patch = render_template_patch(body, rendered(), kind=WorkloadKind.STATEFULSET)
    assert patch.problem is not None and patch.problem.path == "spec.policy.settings.mountPath"


# (update strategy before, partition after): parking holds every pod at its revision
PARKING = [
    (None, 3),
    ({"type": "RollingUpdate"}, 3),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}, 3),
    ({"type": "RollingUpdate", "rollingUpdate": {"partition": 5}}, 5),
    ({"type": "OnDelete"}, None),
]


@pytest.mark.parametrize(("strategy", "partition"), PARKING)
def test_statefulsets_are_parked_in_the_same_patch(
    strategy: Body | None, partition: int | None
) -> None:
    body = workload()
    if strategy is not None:
        body["spec"]["updateStrategy"] = strategy
    after = patched(body, rendered(), park=True)
    found = (after["spec"].get("updateStrategy") or {}).get("rollingUpdate", {}).get("partition")
    assert found == partition


def test_deployments_are_not_parked_and_unparked_without_the_flag() -> None:
    deployment = patched(workload("Deployment"), rendered(), park=True)
    assert "updateStrategy" not in deployment["spec"]
    statefulset = patched(workload(), rendered(), park=False)
    assert "updateStrategy" not in statefulset["spec"]


def test_a_stale_read_cannot_be_patched() -> None:
    body = workload()
    patch = render_template_patch(body, rendered(), kind=WorkloadKind.STATEFULSET)
    newer = copy.deepcopy(body)
    newer["metadata"]["resourceVersion"] = "8"
    with pytest.raises(PatchFailed):
        apply_ops(newer, patch.ops)


def test_configmap_carries_the_file_the_owner_and_the_hash() -> None:
    settings = rendered(replace(POLICY, properties=(("fetch.min.bytes", "1024"),)))
    owner = OwnerRef("rebalancer.dev/v1alpha1", "ConsumerGroup", "orders", "uid-1")
    configmap = render_configmap(settings, "default", "orders", owner)
    assert configmap["metadata"]["name"] == "orders-consumer-settings"
    assert configmap["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    text = configmap["data"]["consumer.properties"]
    assert text.startswith("# Written by Rebalancer for ConsumerGroup orders")
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "fetch.min.bytes=1024",
        "heartbeat.interval.ms=2000",
        "max.poll.interval.ms=60000",
        "partition.assignment.strategy=cooperative-sticky",
        "session.timeout.ms=6000",
    ]


def test_long_names_still_make_a_valid_configmap_name() -> None:
    name = configmap_name("a" * 253)
    assert len(name) <= 253 and name.endswith("-consumer-settings")
    assert configmap_name("a" * 253) != configmap_name("a" * 252 + "b")


def test_env_values_are_escaped_for_kubernetes_expansion() -> None:
    policy = replace(POLICY, properties=(("client.rack", "$(NODE_ZONE)"),))
    assert env_of(patched(workload(), rendered(policy)))["KAFKA_CLIENT_RACK"] == "$$(NODE_ZONE)"


def test_the_plan_and_its_status() -> None:
    body = workload()
    inputs = SettingsInputs(
        namespace="default",
        name="orders",
        uid="uid-1",
        policy=replace(POLICY, static_membership=True),
        workload_kind=WorkloadKind.STATEFULSET,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        workload=body,
        view=None,
    )
    plan = plan_settings(inputs)
    assert plan.problems == () and plan.patch.changes and plan.configmap is not None
    status = settings_status(plan, BrokerLimits(), applied=True)
    assert status["protocol"] == "classic"
    assert status["assignors"] == ["cooperative-sticky"]
    assert status["sessionLimits"]["source"] == "default"
    assert status["rolledOut"] is False
    # The same inputs on the patched workload plan no patch.
    after = apply_ops(body, plan.patch.ops)
    assert plan_settings(replace(inputs, workload=after)).patch.ops == ()


def test_a_refused_plan_patches_nothing_and_says_why() -> None:
    inputs = SettingsInputs(
        namespace="default",
        name="orders",
        uid=None,
        policy=replace(POLICY, static_membership=True),
        workload_kind=WorkloadKind.DEPLOYMENT,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        workload=workload("Deployment"),
        view=None,
    )
    plan = plan_settings(inputs)
    assert plan.refused and plan.patch.ops == () and plan.configmap is None
    status = settings_status(plan, BrokerLimits(), applied=False)
    assert status["applied"] is False
    assert "spec.policy.settings.staticMembership" in status["message"]


def test_kip848_status_reports_group_configs_honestly() -> None:
    inputs = SettingsInputs(
        namespace="default",
        name="orders",
        uid=None,
        policy=SettingsPolicy(),
        workload_kind=WorkloadKind.STATEFULSET,
        container=None,
        protocol_choice=ProtocolChoice.CONSUMER,
        workload=workload(),
        view=None,
    )
    plan = plan_settings(inputs)
    assert plan.group_configs == {
        "consumer.heartbeat.interval.ms": "5000",
        "consumer.session.timeout.ms": "45000",
    }
    outcome = ConfigOutcome(ApplyState.UNVERIFIABLE, "accepted, no configs reported")
    status = settings_status(plan, BrokerLimits(), applied=True, group_configs=outcome)
    assert status["protocol"] == "consumer"
    assert status["groupConfigs"]["state"] == "accepted-not-verifiable"
    assert "assignors" not in status


def test_the_rollout_planner_gets_the_delivered_timings() -> None:
    fallback = ConsumerTimings(45000, 3000, 300000)
    inputs = SettingsInputs(
        namespace="default",
        name="orders",
        uid=None,
        policy=POLICY,
        workload_kind=WorkloadKind.STATEFULSET,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        workload=workload(),
        view=None,
    )
    assert consumer_timings(plan_settings(inputs), fallback) == ConsumerTimings(6000, 2000, 60000)
    kip848 = replace(inputs, policy=SettingsPolicy(), protocol_choice=ProtocolChoice.CONSUMER)
    assert consumer_timings(plan_settings(kip848), fallback) == ConsumerTimings(45000, 5000, 300000)
    refused = replace(inputs, policy=replace(POLICY, heartbeat_interval_ms=6000))
    assert consumer_timings(plan_settings(refused), fallback) == fallback
    # The same, read back from status by the rollout daemon, once the template has them.
    status = settings_status(plan_settings(inputs), BrokerLimits(), applied=True)
    assert timings_from_status(status, fallback) == ConsumerTimings(6000, 2000, 60000)
    pending = settings_status(plan_settings(inputs), BrokerLimits(), applied=False)
    assert timings_from_status(pending, fallback) == fallback
    assert timings_from_status(None, fallback) == fallback


# (status.settings) -> the Degraded reason it imposes, if any
CONDITIONS = [
    (None, None),
    ({"applied": True, "hash": "h"}, None),
    ({"applied": False, "message": "spec.policy.settings.x is bad"}, "SettingsRefused"),
    ({"hash": "h", "groupConfigs": {"state": "failed", "message": "no"}}, "GroupConfigsFailed"),
    ({"hash": "h", "groupConfigs": {"state": "accepted-not-verifiable"}}, None),
    ({"brokerDelay": {"reason": "DelayRefused", "message": "read-only"}}, "DelayRefused"),
    ({"brokerDelay": {"reason": "DelayRecommended", "message": "set it"}}, None),
]


@pytest.mark.parametrize(("settings", "reason"), CONDITIONS)
def test_settings_conditions(settings: dict[str, Any] | None, reason: str | None) -> None:
    conditions = settings_conditions(settings)
    assert [c.reason for c in conditions] == ([reason] if reason else [])
    assert all(c.status.value == "True" and c.type.value == "Degraded" for c in conditions)


def test_settings_need_staggered_rollouts() -> None:
    inputs = SettingsInputs(
        namespace="default",
        name="orders",
        uid=None,
        policy=POLICY,
        workload_kind=WorkloadKind.STATEFULSET,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        workload=workload(),
        view=None,
        staggered=False,
    )
    plan = plan_settings(inputs)
    assert [p.path for p in plan.problems] == ["spec.policy.rollout.enabled"]
    assert "in batches" in plan.problems[0].fix
    assert plan.patch.ops == ()
