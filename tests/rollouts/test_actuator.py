"""The rollout actuator against the lab's API emulator: reading workloads, carrying out actions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.rollouts.support import deployment, gated_pod, statefulset

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import ActuationFailed, Actuator, read_workload
from rebalancer.lab.apiserver import ApiServerThread
from rebalancer.planning.gate_templates import GateOptions
from rebalancer.planning.rollout_actions import (
    RELEASE_LEAD_SECONDS,
    DeletePods,
    HoldGates,
    InstallGate,
    MarkDegraded,
    OpenGate,
    PauseDeployment,
    RecordProgress,
    ResumeDeployment,
    ScaleWorkload,
    SetStatefulSetPartition,
    Wait,
)
from rebalancer.structs.gates import GATE_CONTAINER, GateState
from rebalancer.structs.specs import WorkloadKind

NS = "default"


def raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def make_statefulset(kube: KubernetesApi, replicas: int = 3) -> dict[str, Any]:
    body = statefulset(replicas=replicas)
    body["spec"]["template"]["spec"]["initContainers"] = [{"name": GATE_CONTAINER, "image": "g"}]
    created = raw(kube.apps.create_namespaced_stateful_set(NS, body, _preload_content=False))
    kube.apps.patch_namespaced_stateful_set_status(
        "orders",
        NS,
        {
            "status": {
                "replicas": replicas,
                "readyReplicas": 1,
                "updatedReplicas": 1,
                "currentRevision": "orders-1",
                "updateRevision": "orders-2",
                "observedGeneration": created["metadata"]["generation"],
            }
        },
        _content_type="application/merge-patch+json",
        _preload_content=False,
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "orders",
        "uid": created["metadata"]["uid"],
        "controller": True,
    }
    for ordinal in range(replicas):
        revision = "orders-2" if ordinal == replicas - 1 else "orders-1"
        pod = gated_pod(
            f"orders-{ordinal}",
            labels={"app": "orders", "controller-revision-hash": revision},
            ownerReferences=[owner],
        )
        kube.core.create_namespaced_pod(NS, pod, _preload_content=False)
        kube.core.patch_namespaced_pod_status(
            f"orders-{ordinal}",
            NS,
            {
                "status": {
                    "initContainerStatuses": [
                        {
                            "name": GATE_CONTAINER,
                            "state": {"running": {}}
                            if ordinal == replicas - 1
                            else {"terminated": {"exitCode": 0}},
                            "ready": False,
                            "restartCount": 0,
                            "image": "g",
                            "imageID": "",
                        }
                    ]
                }
            },
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )
    return created


async def test_read_workload_sees_revisions_and_gates(
    api: ApiServerThread, kube: KubernetesApi
) -> None:
    make_statefulset(kube)
    kube.core.create_namespaced_pod(NS, gated_pod("unrelated", labels={"app": "other"}))
    view = await read_workload(kube, NS, WorkloadKind.STATEFULSET, "orders")
    assert view is not None
    assert (view.replicas, view.partition, view.update_revision) == (3, 0, "orders-2")
    assert view.gate_installed and view.caught_up
    assert [(p.name, p.updated, p.gate) for p in view.pods] == [
        ("orders-0", False, GateState.PASSED),
        ("orders-1", False, GateState.PASSED),
        ("orders-2", True, GateState.WAITING),
    ]
    assert await read_workload(kube, NS, WorkloadKind.DEPLOYMENT, "absent") is None


async def test_actions_are_carried_out_and_can_be_repeated(
    api: ApiServerThread, kube: KubernetesApi
) -> None:
    make_statefulset(kube)
    stale_uid = "not-the-pods-uid"
    current = raw(kube.core.read_namespaced_pod("orders-0", NS, _preload_content=False))
    actuator = Actuator(kube, NS, WorkloadKind.STATEFULSET, "orders", clock=lambda: 1.7e9)
    actions = [
        SetStatefulSetPartition(2),
        OpenGate("abc/1", ("orders-2", "orders-9")),  # orders-9 does not exist: no error
        HoldGates(("orders-1",)),
        DeletePods(("orders-0", "orders-1"), (current["metadata"]["uid"], stale_uid)),
        ScaleWorkload(4),
        Wait(1.0),
        RecordProgress("BatchReleased", 1, 2, 0, 0, "x"),
        MarkDegraded("R", "m"),
    ]
    done = await actuator.apply(actions)
    assert done == actions[:5]  # conditions, Events and waits are the handler's
    again = await actuator.apply(actions)
    assert again == done
    sts = raw(kube.apps.read_namespaced_stateful_set("orders", NS, _preload_content=False))
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert sts["spec"]["replicas"] == 4
    opened = raw(kube.core.read_namespaced_pod("orders-2", NS, _preload_content=False))
    annotations = opened["metadata"]["annotations"]
    assert annotations["rebalancer.dev/gate"] == "open"
    assert annotations["rebalancer.dev/gate-batch"] == "abc/1"
    held = raw(kube.core.read_namespaced_pod("orders-1", NS, _preload_content=False))
    assert held["metadata"]["annotations"]["rebalancer.dev/gate-held-at"] == (
        "2023-11-14T22:13:20.000Z"
    )
    names = {
        item["metadata"]["name"]
        for item in raw(kube.core.list_namespaced_pod(NS, _preload_content=False))["items"]
    }
    # orders-0 deleted; orders-1 kept: the uid it was deleted for is not its own.
    assert names == {"orders-1", "orders-2"}


async def test_the_gate_is_installed_once(api: ApiServerThread, kube: KubernetesApi) -> None:
    kube.apps.create_namespaced_stateful_set(NS, statefulset(), _preload_content=False)
    actuator = Actuator(
        kube, NS, WorkloadKind.STATEFULSET, "orders", gate=GateOptions(image="gate:1")
    )
    await actuator.apply([InstallGate()])
    await actuator.apply([InstallGate()])
    sts = raw(kube.apps.read_namespaced_stateful_set("orders", NS, _preload_content=False))
    inits = sts["spec"]["template"]["spec"]["initContainers"]
    assert [item["name"] for item in inits] == [GATE_CONTAINER]
    assert inits[0]["image"] == "gate:1"
    assert sts["metadata"]["generation"] == 2  # a template change: the workload will roll
    view = await read_workload(kube, NS, WorkloadKind.STATEFULSET, "orders")
    assert view is not None and view.gate_installed


async def test_deployment_pause_resume_and_replica_sets(
    api: ApiServerThread, kube: KubernetesApi
) -> None:
    created = raw(kube.apps.create_namespaced_deployment(NS, deployment(), _preload_content=False))
    for hash_, revision in (("aaa", "1"), ("bbb", "2")):
        kube.apps.create_namespaced_replica_set(
            NS,
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"web-{hash_}",
                    "labels": {"app": "web", "pod-template-hash": hash_},
                    "annotations": {"deployment.kubernetes.io/revision": revision},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "web",
                            "uid": created["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "web", "pod-template-hash": hash_}},
                    "template": {
                        "metadata": {"labels": {"app": "web", "pod-template-hash": hash_}},
                        "spec": {"containers": [{"name": "app", "image": "consumer"}]},
                    },
                },
            },
            _preload_content=False,
        )
    actuator = Actuator(kube, NS, WorkloadKind.DEPLOYMENT, "web")
    await actuator.apply([PauseDeployment()])
    view = await read_workload(kube, NS, WorkloadKind.DEPLOYMENT, "web")
    assert view is not None
    assert view.paused
    assert view.update_revision == "bbb"
    assert (view.max_surge, view.max_unavailable) == (1, 1)
    await actuator.apply([ResumeDeployment()])
    view = await read_workload(kube, NS, WorkloadKind.DEPLOYMENT, "web")
    assert view is not None and not view.paused


async def test_a_refused_action_names_itself(api: ApiServerThread, kube: KubernetesApi) -> None:
    kube.apps.create_namespaced_stateful_set(NS, statefulset(), _preload_content=False)
    api.faults.inject(status=500, method="PATCH", path_regex="statefulsets", message="disk full")
    actuator = Actuator(kube, NS, WorkloadKind.STATEFULSET, "orders")
    with pytest.raises(ActuationFailed) as caught:
        await actuator.apply([SetStatefulSetPartition(1)])
    assert caught.value.action == SetStatefulSetPartition(1)
    assert "SetStatefulSetPartition: HTTP 500" in str(caught.value)


async def test_a_batch_lets_go_at_one_moment_and_a_single_pod_at_once(
    api: ApiServerThread, kube: KubernetesApi
) -> None:
    make_statefulset(kube)
    actuator = Actuator(kube, NS, WorkloadKind.STATEFULSET, "orders", clock=lambda: 1.7e9)
    await actuator.apply([OpenGate("abc/1", ("orders-0", "orders-1"))])
    moments = {
        raw(kube.core.read_namespaced_pod(name, NS, _preload_content=False))["metadata"][
            "annotations"
        ].get("rebalancer.dev/gate-open-at")
        for name in ("orders-0", "orders-1")
    }
    assert len(moments) == 1
    (moment,) = moments
    assert moment is not None and float(moment) >= 1.7e9 + RELEASE_LEAD_SECONDS
    await actuator.apply([OpenGate("abc/2", ("orders-2",))])
    alone = raw(kube.core.read_namespaced_pod("orders-2", NS, _preload_content=False))
    assert alone["metadata"]["annotations"]["rebalancer.dev/gate"] == "open"
    assert "rebalancer.dev/gate-open-at" not in alone["metadata"]["annotations"]
