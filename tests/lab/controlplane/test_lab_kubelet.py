"""The lab kubelet on the real control plane: its Node, the scheduler's bindings, real controllers.

The kubelet authenticates as its node (CN=system:node:lab), so the Node authorizer and the
NodeRestriction admission plugin check everything it writes, as on a real cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import yaml
from tests.lab.controlplane.conftest import Kubectl, eventually, get_json

from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.structs.gates import GATE_ANNOTATION, GATE_OPEN
from rebalancer_lab.cluster import LabCluster
from rebalancer_lab.controlplane import ControlPlane
from rebalancer_lab.manifests import gate_rbac

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


@pytest.fixture(scope="module")
def lab_cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabCluster]:
    node = control_plane.node_credentials()
    cluster = LabCluster(
        node.kubeconfig,
        tmp_path_factory.mktemp("kubelet"),
        service_account_tokens=True,
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
    eventually(lambda: ready_replicas() == 2, "both pods Ready", timeout=90)
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
    eventually(
        lambda: pods() == [], "the garbage collector and the kubelet removing the pods", timeout=90
    )
    assert lab_cluster.kubelet is not None
    eventually(
        lambda: not any(w.alive() for w in lab_cluster.kubelet.workers.values()),
        "every container process stopping",
        timeout=30,
    )


# Exit 0: listed pods as the expected ServiceAccount; 3: forbidden; 4: someone else; 5: no
# credentials at all.
WHO_AND_LIST = """
import os, sys
if "KUBECONFIG" not in os.environ:
    sys.exit(5)
from kubernetes import client, config
config.load_kube_config()
api = client.ApiClient()
review = client.AuthenticationV1Api(api).create_self_subject_review(
    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
)
if review.status.user_info.username != sys.argv[1]:
    sys.exit(4)
try:
    client.CoreV1Api(api).list_namespaced_pod(sys.argv[2])
except client.ApiException as error:
    sys.exit(3 if error.status == 403 else 1)
"""


def lister_pod(name: str, account: str, *, automount: bool = True) -> str:
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    spec: dict[str, Any] = {
        "serviceAccountName": account,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "lister",
                "image": "lab.invalid/lister:1",
                "command": ["python", "-c", WHO_AND_LIST, user, NAMESPACE],
            }
        ],
    }
    if not automount:
        spec["automountServiceAccountToken"] = False
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    return json.dumps(pod)


def test_pods_act_as_their_service_account_with_its_rbac(
    lab_cluster: LabCluster, kubectl: Kubectl
) -> None:
    kubectl("create", "namespace", NAMESPACE, check=False)
    kubectl("create", "serviceaccount", "lister", "-n", NAMESPACE)

    def exit_code(name: str) -> int | None:
        pod = get_json(kubectl, "pod", name, "-n", NAMESPACE)
        if pod["status"].get("phase") not in ("Succeeded", "Failed"):
            return None
        [state] = pod["status"]["containerStatuses"]
        return int(state["state"]["terminated"]["exitCode"])

    def finished(name: str) -> int:
        code: int = eventually(
            lambda: exit_code(name) is not None and [exit_code(name)], name, timeout=90
        )[0]
        return code

    kubectl("apply", "-f", "-", input=lister_pod("without-rbac", "lister"))
    assert finished("without-rbac") == 3, "a ServiceAccount without a Role may not list pods"

    kubectl("create", "role", "pod-lister", "-n", NAMESPACE, "--verb=list", "--resource=pods")
    kubectl(
        "create",
        "rolebinding",
        "lister-lists",
        "-n",
        NAMESPACE,
        "--role=pod-lister",
        f"--serviceaccount={NAMESPACE}:lister",
    )
    time.sleep(1)  # the RBAC authorizer reads bindings through an informer
    kubectl("apply", "-f", "-", input=lister_pod("with-rbac", "lister"))
    assert finished("with-rbac") == 0

    kubectl("apply", "-f", "-", input=lister_pod("opted-out", "lister", automount=False))
    assert finished("opted-out") == 5, "automountServiceAccountToken: false gives no credentials"


def gated_pod(name: str, account: str) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "serviceAccountName": account,
            "initContainers": [gate_container(GateOptions(timeout_seconds=300))],
            "containers": [
                {
                    "name": "app",
                    "image": "lab.invalid/app:1",
                    "command": ["python", "-c", "import time; time.sleep(3600)"],
                }
            ],
        },
    }
    return json.dumps(pod)


def test_the_gate_names_the_permission_it_lacks_and_waits_with_it(
    lab_cluster: LabCluster, kubectl: Kubectl
) -> None:
    kubectl("create", "namespace", NAMESPACE, check=False)
    kubectl("create", "serviceaccount", "consumers", "-n", NAMESPACE)
    kubectl("apply", "-f", "-", input=gated_pod("gated", "consumers"))
    uid = get_json(kubectl, "pod", "gated", "-n", NAMESPACE)["metadata"]["uid"]
    logs = lab_cluster.state_dir / "logs" / "pods" / f"{NAMESPACE}_gated_{uid}"

    def gate_said() -> str:
        return "\n".join(p.read_text(errors="replace") for p in logs.rglob("*.log"))

    needs = f"may not list pods in namespace {NAMESPACE}"
    eventually(lambda: needs in gate_said(), "the gate naming the missing permission", timeout=90)
    assert get_json(kubectl, "pod", "gated", "-n", NAMESPACE)["status"]["phase"] == "Pending"

    # What the chart's gate.serviceAccounts grants; then the operator's annotation opens it.
    kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump_all(gate_rbac(NAMESPACE, "consumers")),
    )
    time.sleep(2)
    kubectl("annotate", "pod", "gated", "-n", NAMESPACE, f"{GATE_ANNOTATION}={GATE_OPEN}")

    def running() -> bool:
        pod = get_json(kubectl, "pod", "gated", "-n", NAMESPACE)
        return bool(pod["status"].get("phase") == "Running")

    eventually(running, "the gate letting the pod start once it may watch it", timeout=60)
    [gate] = get_json(kubectl, "pod", "gated", "-n", NAMESPACE)["status"]["initContainerStatuses"]
    assert gate["state"]["terminated"]["exitCode"] == 0
