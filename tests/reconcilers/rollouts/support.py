"""What the rollout tests build on the session's cluster: parked pods and workloads, the gate's
permissions, and a wait for what the cluster's controllers and kubelet do.

Pods that a test only reads, annotates or deletes are parked: a scheduling gate keeps them
Pending and bound to no node, so no kubelet runs them (the lab kubelet would otherwise start
their join gate itself), and deleting one takes effect at once, as for any pod no node has
accepted. (A pod bound to a node without a kubelet would stay Terminating when deleted, and the
pod garbage collector deletes such pods some 40 s after they appear.) The StatefulSets and
Deployments built here park their pods the same way, so their controllers create, replace and
count pods that never run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from kubernetes import client
from tests import polling

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer_lab.manifests import gate_rbac

T = TypeVar("T")

# A scheduling gate, not the join gate: the scheduler leaves the pod alone while it is set.
PARKED = [{"name": "rebalancer.dev/parked-by-test"}]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def gated_pod(name: str, labels: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "orders"}, **metadata},
        "spec": parked_spec(),
    }


def parked_spec() -> dict[str, Any]:
    """A pod spec with the join gate as init container, that no kubelet will run."""
    return {
        "schedulingGates": PARKED,
        "initContainers": [{"name": GATE_CONTAINER, "image": "rebalancer"}],
        "containers": [{"name": "app", "image": "consumer:1"}],
    }


def create_pods(kube: KubernetesApi, namespace: str, *names: str) -> None:
    for name in names:
        kube.core.create_namespaced_pod(namespace, gated_pod(name), _preload_content=False)


def statefulset(name: str = "orders", replicas: int = 3, **spec: Any) -> dict[str, Any]:
    """A StatefulSet whose pods are parked (`spec` overrides its fields)."""
    body_spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": name,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": name}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"schedulingGates": PARKED, "containers": [{"name": "app", "image": "c:1"}]},
        },
    }
    body_spec.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": body_spec,
    }


def deployment(name: str = "web", replicas: int = 4) -> dict[str, Any]:
    """A Deployment whose pods are parked."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulingGates": PARKED,
                    "containers": [{"name": "app", "image": "consumer:1"}],
                },
            },
        },
    }


async def until(
    probe: Callable[[], T | Literal[False] | None], what: str, within: float = 60.0
) -> T:
    """`probe()`'s first true answer (asked off the event loop); the test fails after `within`
    seconds."""
    answer: T = await polling.eventually_async(probe, what, within, in_thread=True, not_yet=())
    return answer


def grant_gates(kube: KubernetesApi, namespace: str) -> None:
    """What the chart gives a gated fleet's ServiceAccount: the gates of pods that the lab
    kubelet runs act as the pod's `default` ServiceAccount and list and watch their pod."""
    rbac = client.RbacAuthorizationV1Api(kube.api_client)
    role, binding = gate_rbac(namespace)
    rbac.create_namespaced_role(namespace, role, _preload_content=False)
    rbac.create_namespaced_role_binding(namespace, binding, _preload_content=False)
