"""Objects the gate and actuator tests create in the emulator."""

from __future__ import annotations

from typing import Any

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.structs.gates import GATE_CONTAINER


def gated_pod(name: str, labels: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "orders"}, **metadata},
        "spec": {
            "initContainers": [{"name": GATE_CONTAINER, "image": "rebalancer"}],
            "containers": [{"name": "app", "image": "consumer"}],
        },
    }


def create_pods(kube: KubernetesApi, *names: str, namespace: str = "default") -> None:
    for name in names:
        kube.core.create_namespaced_pod(namespace, gated_pod(name), _preload_content=False)


def statefulset(name: str = "orders", replicas: int = 3, **spec: Any) -> dict[str, Any]:
    body_spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": name,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {"app": name}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "consumer:1"}]},
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
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "consumer:1"}]},
            },
        },
    }
