"""The lab kubelet on the real control plane: its Node, the scheduler's bindings, real controllers.

The kubelet authenticates as its node (CN=system:node:lab), so the Node authorizer and the
NodeRestriction admission plugin check everything it writes, as on a real cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tests.controlplane.conftest import Kubectl

from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(3600)

NAMESPACE = "kubelet"


def statefulset(version: str) -> str:
    # A process that runs until SIGTERM, and a readiness probe that runs a real command.
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "sleeper", "namespace": NAMESPACE},
            "spec": {
                "serviceName": "sleeper",
                "replicas": 2,
                "selector": {"matchLabels": {"app": "sleeper"}},
                "template": {
                    "metadata": {"labels": {"app": "sleeper"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "containers": [
                            {
                                "name": "sleeper",
                                "image": "lab.invalid/sleeper:1",
                                "command": ["python", "-c", "import time; time.sleep(3600)"],
                                "env": [{"name": "VERSION", "value": version}],
                                "readinessProbe": {
                                    "exec": {"command": ["python", "-c", "pass"]},
                                    "periodSeconds": 1,
                                },
                            }
                        ],
                    },
                },
            },
        }
    )


def eventually(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.5)


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def lab_cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabCluster]:
    node = control_plane.node_credentials()
    cluster = LabCluster(
        node.kubeconfig,
        tmp_path_factory.mktemp("kubelet"),
        controllers=False,
        scheduled=True,
        pod_kubeconfig=Path(control_plane.kubeconfig),
        stop_grace=5,
    )
    with cluster:
        yield cluster


def test_the_node_registers_ready_and_renews_its_lease(
    lab_cluster: LabCluster, kubectl: Kubectl
) -> None:
    node = get_json(kubectl, "node", "lab")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"
    assert int(node["status"]["allocatable"]["pods"]) == 110
    # A new Node is tainted not-ready until the node lifecycle controller sees it Ready; the
    # cluster waits for that before it says it started.
    assert not node["spec"].get("taints")

    def renewed_at() -> datetime:
        lease = get_json(kubectl, "lease", "lab", "-n", "kube-node-lease")
        assert lease["spec"]["holderIdentity"] == "lab"
        [owner] = lease["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Node", node["metadata"]["uid"])
        return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))

    first = renewed_at()
    eventually(lambda: renewed_at() > first, "the kubelet renewing its lease", timeout=25)


def test_statefulset_runs_and_rolls_through_the_real_controller(
    lab_cluster: LabCluster, kubectl: Kubectl
) -> None:
    kubectl("create", "namespace", NAMESPACE)
    kubectl("apply", "-f", "-", input=statefulset("1"))

    def pods() -> list[Any]:
        found: list[Any] = get_json(kubectl, "pods", "-n", NAMESPACE, "-l", "app=sleeper")["items"]
        return found

    def ready_replicas() -> int:
        status = get_json(kubectl, "statefulset", "sleeper", "-n", NAMESPACE)["status"]
        return int(status.get("readyReplicas") or 0)

    # OrderedReady: sleeper-1 is created only once sleeper-0 is Ready, so both Ready means the
    # kubelet's readiness reached the StatefulSet controller.
    eventually(lambda: ready_replicas() == 2, "both pods Ready")
    first = {p["metadata"]["name"]: p for p in pods()}
    assert set(first) == {"sleeper-0", "sleeper-1"}
    for pod in first.values():
        # Bound by the scheduler (its Scheduled event), not by the kubelet.
        assert pod["spec"]["nodeName"] == "lab"
        [state] = pod["status"]["containerStatuses"]
        assert state["ready"] is True and "running" in state["state"]
    events = get_json(kubectl, "events", "-n", NAMESPACE)["items"]
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert {e["involvedObject"]["name"] for e in scheduled} >= {"sleeper-0", "sleeper-1"}
    assert all(e.get("reportingComponent") != "kubelet" for e in scheduled)

    # A template change: the controller replaces pods one by one, highest ordinal first, each
    # after the previous one is Ready again; the kubelet stops the old processes and deletes.
    kubectl("apply", "-f", "-", input=statefulset("2"))

    def rolled() -> bool:
        status = get_json(kubectl, "statefulset", "sleeper", "-n", NAMESPACE)["status"]
        return bool(
            status.get("updateRevision") == status.get("currentRevision")
            and status.get("updatedReplicas") == 2
            and status.get("readyReplicas") == 2
        )

    eventually(rolled, "the rolling update finishing", timeout=120)
    second = {p["metadata"]["name"]: p for p in pods()}
    for name, pod in second.items():
        assert pod["metadata"]["uid"] != first[name]["metadata"]["uid"]
        [env] = pod["spec"]["containers"][0]["env"]
        assert env["value"] == "2"

    kubectl("delete", "statefulset", "sleeper", "-n", NAMESPACE, "--wait=true")
    eventually(lambda: pods() == [], "the garbage collector and the kubelet removing the pods")
    assert lab_cluster.kubelet is not None
    eventually(
        lambda: not any(w.alive() for w in lab_cluster.kubelet.workers.values()),
        "every container process stopping",
        timeout=30,
    )
