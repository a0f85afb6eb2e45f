"""The rollout actuator on the real control plane: reading workloads, carrying out actions.

The StatefulSet and Deployment controllers own the workloads' status, revisions and pods; the
tests bring workloads into the state they need through their specs and read what the
controllers (and, where pods run, the lab kubelet) made of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client
from tests.kube_clusters import SharedCluster
from tests.reconcilers.rollouts.support import (
    SLEEPER,
    deployment,
    gated_pod,
    parked_spec,
    statefulset,
    until,
)

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import ActuationFailed, Actuator, read_workload
from rebalancer.planning.gate_templates import GateOptions
from rebalancer.planning.rollout_actions import (
    RELEASE_LEAD_SECONDS,
    Action,
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
from rebalancer_lab.api_faults import FaultyApi

STRATEGIC = "application/strategic-merge-patch+json"
REVISION = "controller-revision-hash"


def raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def read_sts(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    return raw(kube.apps.read_namespaced_stateful_set("orders", ns, _preload_content=False))


def read_pod(kube: KubernetesApi, ns: str, name: str) -> dict[str, Any]:
    return raw(kube.core.read_namespaced_pod(name, ns, _preload_content=False))


def live_pods(kube: KubernetesApi, ns: str) -> dict[str, dict[str, Any]]:
    items = raw(kube.core.list_namespaced_pod(ns, _preload_content=False))["items"]
    return {
        item["metadata"]["name"]: item
        for item in items
        if item["metadata"].get("deletionTimestamp") is None
    }


def uids(kube: KubernetesApi, ns: str) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in live_pods(kube, ns).items()}


def settled(kube: KubernetesApi, ns: str, replicas: int) -> bool:
    """The StatefulSet controller has seen the latest spec and created every pod."""
    sts = read_sts(kube, ns)
    status = sts.get("status") or {}
    return (
        status.get("observedGeneration") == sts["metadata"]["generation"]
        and status.get("replicas") == replicas
        and len(live_pods(kube, ns)) == replicas
    )


async def parked_statefulset(kube: KubernetesApi, ns: str, replicas: int = 3) -> None:
    """A gated StatefulSet whose pods exist and never run."""
    body = statefulset(replicas=replicas)
    body["spec"]["template"]["spec"] = parked_spec()
    kube.apps.create_namespaced_stateful_set(ns, body, _preload_content=False)
    await until(lambda: settled(kube, ns, replicas), f"{replicas} parked pods")


def gate_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or ()
    return next((s["state"] for s in statuses if s["name"] == GATE_CONTAINER), {})


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def statefulset_mid_update(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    """Three running pods, the last of them replaced by a template change and held at its gate.

    Revision 1's gate init container exits at once, revision 2's waits: so orders-0 and
    orders-1 (revision 1) are through their gates and orders-2 waits at its own, and the
    controller, which replaces the highest ordinal first and waits for it to become Ready,
    leaves the update there. Returns the StatefulSet as it is then.
    """
    body = statefulset(replicas=3)
    body["spec"]["template"]["spec"] = {
        "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": GATE_CONTAINER, "image": "g", "command": ["true"]}],
        "containers": [{"name": "app", "image": "c", "command": SLEEPER}],
    }
    kube.apps.create_namespaced_stateful_set(ns, body, _preload_content=False)
    await until(
        lambda: len(found := live_pods(kube, ns)) == 3 and all(map(ready, found.values())),
        "three Ready pods",
    )
    waiting_gate = {"name": GATE_CONTAINER, "command": SLEEPER}
    patch = {"spec": {"template": {"spec": {"initContainers": [waiting_gate]}}}}
    kube.apps.patch_namespaced_stateful_set(
        "orders", ns, patch, _content_type=STRATEGIC, _preload_content=False
    )

    def held_at_its_gate() -> dict[str, Any] | None:
        sts = read_sts(kube, ns)
        status = sts.get("status") or {}
        if status.get("observedGeneration") != sts["metadata"]["generation"]:
            return None
        pod = live_pods(kube, ns).get("orders-2")
        if pod is None or pod["metadata"]["labels"].get(REVISION) != status["updateRevision"]:
            return None
        return sts if "running" in gate_status(pod) else None

    return await until(held_at_its_gate, "orders-2 replaced and waiting at its gate")


async def test_read_workload_sees_revisions_and_gates(kube: KubernetesApi, ns: str) -> None:
    sts = await statefulset_mid_update(kube, ns)
    kube.core.create_namespaced_pod(ns, gated_pod("unrelated", labels={"app": "other"}))
    view = await read_workload(kube, ns, WorkloadKind.STATEFULSET, "orders")
    assert view is not None
    update_revision = sts["status"]["updateRevision"]
    assert update_revision != sts["status"]["currentRevision"]
    assert (view.replicas, view.partition, view.update_revision) == (3, 0, update_revision)
    assert view.gate_installed and view.caught_up
    assert [(p.name, p.updated, p.gate) for p in view.pods] == [
        ("orders-0", False, GateState.PASSED),
        ("orders-1", False, GateState.PASSED),
        ("orders-2", True, GateState.WAITING),
    ]
    assert await read_workload(kube, ns, WorkloadKind.DEPLOYMENT, "absent") is None


async def test_actions_are_carried_out_and_can_be_repeated(kube: KubernetesApi, ns: str) -> None:
    await parked_statefulset(kube, ns)
    before = uids(kube, ns)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "orders", clock=lambda: 1.7e9)
    actions: list[Action] = [
        SetStatefulSetPartition(2),
        OpenGate("abc/1", ("orders-2", "orders-9")),  # orders-9 does not exist: no error
        HoldGates(("orders-1",)),
        DeletePods(("orders-0", "orders-1"), (before["orders-0"], "not-the-pods-uid")),
        ScaleWorkload(4),
        Wait(1.0),
        RecordProgress("BatchReleased", 1, 2, 0, 0, "x"),
        MarkDegraded("R", "m"),
    ]
    done = await actuator.apply(actions)
    assert done == actions[:5]  # conditions, Events and waits are the handler's
    # The controller answers: orders-0 again under a new uid, and orders-3 for the new scale.
    replaced = await until(
        lambda: (
            (now := uids(kube, ns)).keys() == {f"orders-{i}" for i in range(4)}
            and now["orders-0"] != before["orders-0"]
            and now
        ),
        "orders-0 recreated and orders-3 created",
    )
    again = await actuator.apply(actions)
    assert again == done
    # The repeat deleted nothing: the new orders-0 is not the uid it was deleted for, and
    # orders-1 was never deleted (the uid it was deleted for is not its own).
    assert uids(kube, ns) == replaced
    assert replaced["orders-1"] == before["orders-1"]
    sts = read_sts(kube, ns)
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert sts["spec"]["replicas"] == 4
    annotations = read_pod(kube, ns, "orders-2")["metadata"]["annotations"]
    assert annotations["rebalancer.dev/gate"] == "open"
    assert annotations["rebalancer.dev/gate-batch"] == "abc/1"
    held = read_pod(kube, ns, "orders-1")["metadata"]["annotations"]
    assert held["rebalancer.dev/gate-held-at"] == "2023-11-14T22:13:20.000Z"


async def test_a_partition_written_on_condition_is_not_written_over_a_change(
    kube: KubernetesApi, ns: str
) -> None:
    await parked_statefulset(kube, ns)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "orders")
    seen = await read_workload(kube, ns, WorkloadKind.STATEFULSET, "orders")
    assert seen is not None and seen.resource_version
    # Someone (here a label; for the contest, the controller's status) changes it after the read.
    patch = {"metadata": {"labels": {"touched": "yes"}}}
    kube.apps.patch_namespaced_stateful_set("orders", ns, patch, _preload_content=False)
    assert seen.partition == 0
    stale = SetStatefulSetPartition(2, seen.resource_version)
    assert await actuator.apply([stale]) == []
    assert read_sts(kube, ns)["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
    now = await read_workload(kube, ns, WorkloadKind.STATEFULSET, "orders")
    assert now is not None and now.resource_version != seen.resource_version
    fresh = SetStatefulSetPartition(2, now.resource_version)
    assert await actuator.apply([fresh]) == [fresh]
    assert read_sts(kube, ns)["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2


async def test_the_gate_is_installed_once(kube: KubernetesApi, ns: str) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(), _preload_content=False)
    # The controller's status writes right after the create would make the guarded patch lose
    # its race (which the planner meets by asking again); the test wants the patch itself.
    await until(lambda: settled(kube, ns, 3), "the controller's first status")
    actuator = Actuator(
        kube, ns, WorkloadKind.STATEFULSET, "orders", gate=GateOptions(image="gate:1")
    )
    await actuator.apply([InstallGate()])
    await actuator.apply([InstallGate()])
    sts = read_sts(kube, ns)
    inits = sts["spec"]["template"]["spec"]["initContainers"]
    assert [item["name"] for item in inits] == [GATE_CONTAINER]
    assert inits[0]["image"] == "gate:1"
    assert sts["metadata"]["generation"] == 2  # a template change: the workload will roll
    view = await read_workload(kube, ns, WorkloadKind.STATEFULSET, "orders")
    assert view is not None and view.gate_installed


def template_hashes(kube: KubernetesApi, ns: str) -> dict[str, str]:
    """The Deployment's ReplicaSets: revision -> pod-template-hash."""
    items = raw(kube.apps.list_namespaced_replica_set(ns, _preload_content=False))["items"]
    return {
        item["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: item["metadata"][
            "labels"
        ]["pod-template-hash"]
        for item in items
    }


async def test_deployment_pause_resume_and_replica_sets(kube: KubernetesApi, ns: str) -> None:
    kube.apps.create_namespaced_deployment(ns, deployment(), _preload_content=False)
    await until(lambda: "1" in template_hashes(kube, ns), "the first ReplicaSet")
    image = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "c:2"}]}}}}
    kube.apps.patch_namespaced_deployment(
        "web", ns, image, _content_type=STRATEGIC, _preload_content=False
    )
    hashes = await until(
        lambda: "2" in (found := template_hashes(kube, ns)) and found, "the second ReplicaSet"
    )
    actuator = Actuator(kube, ns, WorkloadKind.DEPLOYMENT, "web")
    await actuator.apply([PauseDeployment()])
    view = await read_workload(kube, ns, WorkloadKind.DEPLOYMENT, "web")
    assert view is not None
    assert view.paused
    assert view.update_revision == hashes["2"] != hashes["1"]
    assert (view.max_surge, view.max_unavailable) == (1, 1)
    await actuator.apply([ResumeDeployment()])
    view = await read_workload(kube, ns, WorkloadKind.DEPLOYMENT, "web")
    assert view is not None and not view.paused


@contextmanager
def client_through(faulty: FaultyApi) -> Iterator[KubernetesApi]:
    """A client whose requests pass the proxy (which presents the admin's certificate)."""
    configuration = client.Configuration()
    configuration.host = faulty.url
    api_client = client.ApiClient(configuration)
    try:
        yield KubernetesApi(
            core=client.CoreV1Api(api_client),
            apps=client.AppsV1Api(api_client),
            custom=client.CustomObjectsApi(api_client),
            api_client=api_client,
        )
    finally:
        api_client.close()


async def test_a_refused_action_names_itself(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    kube.apps.create_namespaced_stateful_set(ns, statefulset(), _preload_content=False)
    with FaultyApi(cluster.plane) as faulty, client_through(faulty) as through:
        faulty.inject(status=500, method="PATCH", path_regex="statefulsets", message="disk full")
        actuator = Actuator(through, ns, WorkloadKind.STATEFULSET, "orders")
        with pytest.raises(ActuationFailed) as caught:
            await actuator.apply([SetStatefulSetPartition(1)])
    assert caught.value.action == SetStatefulSetPartition(1)
    assert "SetStatefulSetPartition: HTTP 500: disk full" in str(caught.value)


async def test_a_batch_lets_go_at_one_moment_and_a_single_pod_at_once(
    kube: KubernetesApi, ns: str
) -> None:
    await parked_statefulset(kube, ns, replicas=5)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "orders", clock=lambda: 1.7e9)
    await actuator.apply([OpenGate("abc/1", ("orders-0", "orders-1"))])
    moments = {
        read_pod(kube, ns, name)["metadata"]["annotations"].get("rebalancer.dev/gate-open-at")
        for name in ("orders-0", "orders-1")
    }
    assert len(moments) == 1
    (moment,) = moments
    assert moment is not None and float(moment) >= 1.7e9 + RELEASE_LEAD_SECONDS
    await actuator.apply([OpenGate("abc/2", ("orders-2",))])
    alone = read_pod(kube, ns, "orders-2")["metadata"]["annotations"]
    assert alone["rebalancer.dev/gate"] == "open"
    assert "rebalancer.dev/gate-open-at" not in alone
    # Pods released on arrival go each at once, whoever else is opened with them.
    await actuator.apply([OpenGate("abc/3", ("orders-3", "orders-4"), together=False)])
    for name in ("orders-3", "orders-4"):
        apart = read_pod(kube, ns, name)["metadata"]["annotations"]
        assert apart["rebalancer.dev/gate"] == "open"
        assert "rebalancer.dev/gate-open-at" not in apart
