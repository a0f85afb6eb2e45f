"""Raw StatefulSets, Deployments and pods read into the planner's view; the gate's template."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.planning.gate_templates import GateOptions, gate_container, render_gate_patch
from rebalancer.planning.workload_views import (
    gate_state,
    resolve_int_or_percent,
    selector_string,
    view_workload,
)
from rebalancer.structs.gates import (
    GATE_CONTAINER,
    JOIN_GATE_DIR,
    JOIN_GATE_VOLUME,
    GateHold,
    GateState,
)
from rebalancer.structs.specs import WorkloadKind

GATE = {"name": GATE_CONTAINER, "image": "x"}


def pod(
    name: str,
    *,
    revision: str = "rev-2",
    label: str = "controller-revision-hash",
    gate: bool = True,
    init: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    ready: bool = False,
    running: bool = False,
    owner: str = "sts-uid",
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"{name}-uid",
        "labels": {label: revision},
        "annotations": annotations or {},
        "creationTimestamp": "2024-05-01T10:00:00Z",
        "ownerReferences": [{"uid": owner}],
    }
    if deleting:
        metadata["deletionTimestamp"] = "2024-05-01T10:05:00Z"
    status: dict[str, Any] = {
        "phase": "Running" if running else "Pending",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    if init is not None:
        status["initContainerStatuses"] = [{"name": GATE_CONTAINER, "state": init}]
    if running:
        status["containerStatuses"] = [{"name": "app", "state": {"running": {}}}]
    return {
        "metadata": metadata,
        "spec": {"initContainers": [GATE] if gate else [], "containers": [{"name": "app"}]},
        "status": status,
    }


@pytest.mark.parametrize(
    ("kwargs", "state"),
    [
        ({"gate": False}, GateState.NONE),
        ({}, GateState.PENDING),
        ({"init": {"waiting": {"reason": "PodInitializing"}}}, GateState.PENDING),
        ({"init": {"running": {}}}, GateState.WAITING),
        ({"init": {"running": {}}, "annotations": {"rebalancer.dev/gate": "open"}}, GateState.OPEN),
        ({"init": {"terminated": {"exitCode": 0}}}, GateState.PASSED),
        ({"init": {"terminated": {"exitCode": 1}}}, GateState.PENDING),
        ({"init": {"terminated": {"exitCode": 0}}, "running": True}, GateState.PASSED),
    ],
)
def test_gate_state(kwargs: dict[str, Any], state: GateState) -> None:
    assert gate_state(pod("orders-0", **kwargs)) is state


def join_held(name: str, **kwargs: Any) -> dict[str, Any]:
    """A pod whose gate is a native sidecar that holds only the join."""
    body = pod(name, **kwargs)
    body["spec"]["initContainers"] = [{**GATE, "restartPolicy": "Always"}]
    return body


OPEN = {"rebalancer.dev/gate": "open"}


@pytest.mark.parametrize(
    ("kwargs", "state"),
    [
        ({}, GateState.PENDING),
        # The consumer runs beside its gate, holding only its join: still waiting.
        ({"init": {"running": {}}, "running": True}, GateState.WAITING),
        ({"init": {"running": {}}}, GateState.WAITING),
        ({"init": {"running": {}}, "annotations": OPEN}, GateState.OPEN),
        ({"init": {"running": {}}, "running": True, "annotations": OPEN}, GateState.PASSED),
    ],
)
def test_gate_state_of_a_gate_that_holds_only_the_join(
    kwargs: dict[str, Any], state: GateState
) -> None:
    assert gate_state(join_held("orders-0", **kwargs)) is state


def statefulset(**spec: Any) -> dict[str, Any]:
    body_spec: dict[str, Any] = {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "orders"}},
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 3}},
        "template": {"spec": {"initContainers": [GATE], "containers": [{"name": "app"}]}},
    }
    body_spec.update(spec)
    return {
        "kind": "StatefulSet",
        "metadata": {"name": "orders", "uid": "sts-uid", "generation": 4},
        "spec": body_spec,
        "status": {
            "replicas": 3,
            "readyReplicas": 2,
            "updatedReplicas": 1,
            "currentRevision": "rev-1",
            "updateRevision": "rev-2",
            "observedGeneration": 4,
        },
    }


def test_statefulset_view() -> None:
    pods = [
        pod("orders-0", revision="rev-1", gate=False, ready=True, running=True),
        pod("orders-1", revision="rev-1", gate=False, ready=True, running=True, deleting=True),
        pod("orders-2", init={"running": {}}, annotations={"rebalancer.dev/gate-batch": "a/1"}),
        pod("stranger-0", owner="someone-else"),
    ]
    view = view_workload(statefulset(), pods)
    assert view.kind is WorkloadKind.STATEFULSET
    assert (view.replicas, view.partition, view.pod_management) == (3, 3, "Parallel")
    assert (view.update_revision, view.current_revision) == ("rev-2", "rev-1")
    assert view.gate_installed and view.caught_up
    assert [p.name for p in view.pods] == ["orders-0", "orders-1", "orders-2"]
    first, second, third = view.pods
    assert (first.ordinal, first.updated, first.gate, first.ready) == (
        0,
        False,
        GateState.NONE,
        True,
    )
    assert second.terminating
    assert (third.ordinal, third.updated, third.gate) == (2, True, GateState.WAITING)
    assert third.gate_batch == "a/1"
    assert [p.name for p in view.live_pods] == ["orders-0", "orders-2"]


def test_on_delete_statefulset_has_no_partition() -> None:
    view = view_workload(statefulset(updateStrategy={"type": "OnDelete"}), [])
    assert view.partition is None
    assert view.update_strategy == "OnDelete"


def test_deployment_view_takes_revisions_from_its_replica_sets() -> None:
    body = {
        "kind": "Deployment",
        "metadata": {"name": "web", "uid": "dep-uid", "generation": 7},
        "spec": {
            "replicas": 10,
            "paused": True,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"spec": {"containers": [{"name": "app"}]}},
        },
        "status": {"replicas": 10, "updatedReplicas": 3, "observedGeneration": 6},
    }
    replica_sets = [
        {
            "metadata": {
                "uid": f"rs-{hash_}",
                "labels": {"pod-template-hash": hash_},
                "annotations": {"deployment.kubernetes.io/revision": revision},
                "ownerReferences": [{"uid": "dep-uid"}],
            },
            "status": {"replicas": replicas},
        }
        for hash_, revision, replicas in (("aaa", "1", 7), ("bbb", "2", 3))
    ]
    pods = [
        pod("web-x", revision="aaa", label="pod-template-hash", gate=False, owner="rs-aaa"),
        pod("web-y", revision="bbb", label="pod-template-hash", owner="rs-bbb"),
        pod("web-z", revision="ccc", label="pod-template-hash", owner="rs-other"),
    ]
    view = view_workload(body, pods, replica_sets)
    assert (view.update_revision, view.current_revision) == ("bbb", "aaa")
    assert (view.max_surge, view.max_unavailable) == (3, 2)
    assert view.paused and not view.caught_up and not view.gate_installed
    assert [(p.name, p.updated, p.ordinal) for p in view.pods] == [
        ("web-x", False, None),
        ("web-y", True, None),
    ]


def deployment_with(template: dict[str, Any], rs_template: dict[str, Any], **meta: Any) -> Any:
    body = {
        "kind": "Deployment",
        "metadata": {"name": "web", "uid": "dep-uid", **meta},
        "spec": {"replicas": 2, "paused": True, "template": template},
    }
    replica_set = {
        "metadata": {
            "uid": "rs-aaa",
            "labels": {"pod-template-hash": "aaa"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"uid": "dep-uid"}],
        },
        "spec": {"template": rs_template},
        "status": {"replicas": 2},
    }
    return view_workload(body, [], [replica_set])


def test_a_paused_deployments_new_template_is_pending_until_a_replica_set_has_it() -> None:
    old = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app"}]}}
    rs = {"metadata": {"labels": {"app": "web", "pod-template-hash": "aaa"}}, "spec": old["spec"]}
    assert not deployment_with(old, rs).template_pending  # the hash label is the RS's own
    new = {**old, "spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "1"}]}]}}
    view = deployment_with(new, rs)
    assert view.template_pending and not view.held_for_rollout
    held = deployment_with(new, rs, annotations={"rebalancer.dev/held-for-rollout": "true"})
    assert held.held_for_rollout


@pytest.mark.parametrize(
    ("value", "replicas", "round_up", "count"),
    [
        (None, 10, True, 3),
        (None, 10, False, 2),
        (2, 10, True, 2),
        ("50%", 5, False, 2),
        ("1", 4, True, 1),
    ],
)
def test_int_or_percent(value: object, replicas: int, round_up: bool, count: int) -> None:
    assert resolve_int_or_percent(value, replicas, "25%", round_up=round_up) == count


def test_selector_string() -> None:
    selector = {
        "matchLabels": {"app": "orders", "tier": "consumer"},
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    assert selector_string(selector) == "app=orders,tier=consumer,zone in (a,b),!canary"


def test_gate_patch_adds_the_container_once() -> None:
    body = statefulset(template={"spec": {"containers": [{"name": "app"}]}})
    body["metadata"]["resourceVersion"] = "41"
    options = GateOptions(image="img:1", timeout_seconds=600, bypass_after_seconds=120)
    ops = render_gate_patch(body, options)
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}
    assert ops[1]["path"] == "/spec/template/spec/initContainers"
    container = ops[1]["value"][0]
    assert container["name"] == GATE_CONTAINER
    assert container["args"] == ["gate", "--timeout", "600", "--bypass-after", "120"]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert render_gate_patch(statefulset(), options) == []  # already there


def test_gate_goes_after_the_other_init_containers() -> None:
    body = statefulset(
        template={"spec": {"initContainers": [{"name": "migrate"}], "containers": []}}
    )
    ops = render_gate_patch(body, GateOptions(env={"REBALANCER_API_SERVER": "http://lab:1"}))
    assert ops == [
        {
            "op": "add",
            "path": "/spec/template/spec/initContainers/-",
            "value": gate_container(GateOptions(env={"REBALANCER_API_SERVER": "http://lab:1"})),
        }
    ]
    assert {"name": "REBALANCER_API_SERVER", "value": "http://lab:1"} in ops[0]["value"]["env"]


def test_a_join_holding_gate_is_a_sidecar_sharing_a_volume_with_every_container() -> None:
    body = statefulset(
        template={
            "spec": {
                "containers": [
                    {"name": "app", "env": [{"name": "A", "value": "1"}]},
                    {"name": "side"},
                ]
            }
        }
    )
    ops = render_gate_patch(body, GateOptions(hold=GateHold.JOIN))
    gate = ops[0]["value"][0]
    assert gate["restartPolicy"] == "Always"
    assert gate["args"][-2:] == ["--hold-join", JOIN_GATE_DIR]
    assert gate["volumeMounts"] == [{"name": JOIN_GATE_VOLUME, "mountPath": JOIN_GATE_DIR}]
    by_path = {op["path"]: op["value"] for op in ops[1:]}
    assert by_path["/spec/template/spec/volumes"][0]["name"] == JOIN_GATE_VOLUME
    file = {"name": "REBALANCER_JOIN_GATE", "value": f"{JOIN_GATE_DIR}/open"}
    assert by_path["/spec/template/spec/containers/0/env/-"] == file
    assert by_path["/spec/template/spec/containers/1/env"] == [file]
    mount = by_path["/spec/template/spec/containers/1/volumeMounts"][0]
    assert mount == {"name": JOIN_GATE_VOLUME, "mountPath": JOIN_GATE_DIR, "readOnly": True}
    gated = statefulset(template={"spec": {"initContainers": [gate], "containers": []}})
    assert view_workload(gated, []).gate_holds_join
    assert not view_workload(statefulset(), []).gate_holds_join


@pytest.mark.parametrize(
    ("node", "scheduled", "unnoticed"),
    [
        (None, None, True),  # no scheduler has looked at it
        (None, {"status": "False", "reason": "Unschedulable"}, False),  # judged: no room
        ("node-1", {"status": "True"}, False),
        ("node-1", None, False),  # bound by hand (spec.nodeName) without a scheduler
    ],
)
def test_a_pod_no_scheduler_looked_at_is_unnoticed(
    node: str | None, scheduled: dict[str, str] | None, unnoticed: bool
) -> None:
    body = pod("web-1")
    if node is not None:
        body["spec"]["nodeName"] = node
    if scheduled is not None:
        body["status"]["conditions"].append({"type": "PodScheduled", **scheduled})
    [view] = view_workload(statefulset(), [body]).pods
    assert view.unnoticed is unnoticed
