"""The lab's control plane is Kubernetes' own: controllers, garbage collection, CEL, RBAC."""

from __future__ import annotations

import json
import os
import signal
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from tests.lab.controlplane.conftest import Kubectl, eventually, get_json, wait_established

from rebalancer_lab.controlplane import ControlPlane, building

# A cold build of the control plane runs inside the first test's setup.
pytestmark = pytest.mark.timeout(3600)

STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: sts}
spec:
  serviceName: web
  replicas: 2
  podManagementPolicy: Parallel   # OrderedReady would wait for web-0 to be Ready, which never is
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: lab.invalid/web:1}]
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ranges.lab.rebalancer.dev}
spec:
  group: lab.rebalancer.dev
  scope: Namespaced
  names: {plural: ranges, singular: range, kind: Range}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                min: {type: integer}
                max: {type: integer}
              x-kubernetes-validations:
                - rule: self.min <= self.max
                  message: min must not exceed max
"""


def test_namespaces_are_listed(kubectl: Kubectl) -> None:
    names = kubectl("get", "ns", "-o", "name").stdout.split()
    assert "namespace/default" in names
    assert "namespace/kube-system" in names


def test_statefulset_pods_come_from_the_controller_and_are_collected(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "sts")
    kubectl("apply", "-f", "-", input=STATEFULSET)
    statefulset = get_json(kubectl, "statefulset", "web", "-n", "sts")

    def pods() -> list[Any]:
        items: list[Any] = get_json(kubectl, "pods", "-n", "sts", "-l", "app=web")["items"]
        return items

    eventually(lambda: len(pods()) == 2, "the StatefulSet controller creating web-0 and web-1")
    for pod in pods():
        assert pod["metadata"]["name"] in {"web-0", "web-1"}
        # No Node exists, so nothing can run them; they are only created.
        assert pod["status"]["phase"] == "Pending"
        [owner] = pod["metadata"]["ownerReferences"]
        assert owner["kind"] == "StatefulSet"
        assert owner["name"] == "web"
        assert owner["uid"] == statefulset["metadata"]["uid"]
        assert owner["controller"] is True

    # kubectl deletes with background propagation: the garbage collector removes the pods.
    kubectl("delete", "statefulset", "web", "-n", "sts", "--wait=true")
    eventually(lambda: pods() == [], "the garbage collector deleting the StatefulSet's pods")


def test_crd_cel_rule_rejects_bad_objects(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CRD)
    wait_established(kubectl, "ranges.lab.rebalancer.dev")

    def apply(name: str, low: int, high: int) -> Any:
        document = {
            "apiVersion": "lab.rebalancer.dev/v1",
            "kind": "Range",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"min": low, "max": high},
        }
        return kubectl("apply", "-f", "-", input=json.dumps(document), check=False)

    good = apply("good", 1, 3)
    assert good.returncode == 0, good.stderr
    bad = apply("bad", 5, 2)
    assert bad.returncode != 0
    assert "min must not exceed max" in bad.stderr
    assert "Invalid value" in bad.stderr


def test_service_account_token_needs_rbac(control_plane: ControlPlane, kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "rbac")
    kubectl("create", "serviceaccount", "reader", "-n", "rbac")
    token = kubectl("create", "token", "reader", "-n", "rbac").stdout.strip()
    context = ssl.create_default_context(cafile=str(control_plane.ca_file))

    def list_secrets() -> int:
        request = urllib.request.Request(
            f"{control_plane.server}/api/v1/namespaces/rbac/secrets",
            headers={"Authorization": f"Bearer {token}"},
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return error.code

    assert list_secrets() == 403
    kubectl(
        "create", "role", "secret-reader", "-n", "rbac", "--verb=get,list", "--resource=secrets"
    )
    kubectl(
        "create",
        "rolebinding",
        "reader-reads-secrets",
        "-n",
        "rbac",
        "--role=secret-reader",
        "--serviceaccount=rbac:reader",
    )
    # The RBAC authorizer reads Roles from an informer: a grant takes effect within moments.
    eventually(lambda: list_secrets() == 200, "the RoleBinding allowing the list", timeout=30)


def test_node_identity_may_register_only_its_own_node(
    control_plane: ControlPlane, kubectl: Kubectl
) -> None:
    node = control_plane.node_credentials()

    def register(name: str) -> Any:
        document = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        return kubectl(
            f"--kubeconfig={node.kubeconfig}",
            "create",
            "-f",
            "-",
            input=json.dumps(document),
            check=False,
        )

    own = register(node.name)
    assert own.returncode == 0, own.stderr
    # NodeRestriction admission: a kubelet may only create the Node object of its own name.
    other = register("someone-else")
    assert other.returncode != 0
    assert "Forbidden" in other.stderr or "forbidden" in other.stderr
    kubectl("delete", "node", node.name)


def test_a_ctrl_c_in_the_labs_terminal_reaches_the_lab_alone(control_plane: ControlPlane) -> None:
    # The terminal signals its foreground process group; each of the control plane's processes
    # leads a session of its own, so the lab stops them after the operator and the pods, which
    # need the API server to stop promptly.
    assert {child.name for child in control_plane.children} >= {"etcd", "kube-apiserver"}
    for child in control_plane.children:
        assert child.pid is not None
        assert os.getsid(child.pid) == child.pid != os.getsid(0), child.name


def test_the_api_server_reports_the_release_it_was_built_from(kubectl: Kubectl) -> None:
    # Clients check it: helm against a chart's kubeVersion, kubectl for version skew.
    major, minor, patch = building.kubernetes_version(building.source_dir())
    server = json.loads(kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == f"v{major}.{minor}.{patch}"
    assert (server["major"], server["minor"]) == (str(major), str(minor))


def test_a_component_that_exits_is_started_again_as_a_kubelet_would(
    control_plane: ControlPlane, kubectl: Kubectl
) -> None:
    # kube-scheduler exits on purpose when its cache is corrupted (an API server restart in the
    # middle of a StatefulSet rollout does it); a cluster's kubelet starts it again.
    [scheduler] = [child for child in control_plane.children if child.name == "kube-scheduler"]
    first = scheduler.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    eventually(
        lambda: scheduler.pid != first and scheduler.exit_code is None,
        "kube-scheduler started again",
        timeout=30,
    )
    [restart] = [r for r in control_plane.restarts if r.name == "kube-scheduler"]
    assert restart.exit_code == -signal.SIGKILL
    assert restart.restarted_at - restart.exited_at < 5.0  # the first restart is at once
    # ... and it schedules: with no Node, a new pod is judged Unschedulable by it.
    kubectl("create", "namespace", "sched")
    kubectl("run", "probe", "-n", "sched", "--image=registry.example/none", "--restart=Never")

    def judged() -> bool:
        pod = get_json(kubectl, "pod", "probe", "-n", "sched")
        conditions = pod["status"].get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    eventually(judged, "the restarted kube-scheduler judging a new pod", timeout=60)
    kubectl("delete", "namespace", "sched", "--wait=false")
