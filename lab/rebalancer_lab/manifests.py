"""The manifests the lab installs: the CRDs and the example fleet, adapted to the lab's ports."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

EXAMPLES = ("orders-consumers.yaml", "orders-consumergroup.yaml")


def _load(folder: str, filename: str) -> list[dict[str, Any]]:
    text = resources.files("rebalancer").joinpath("data", folder, filename).read_text("utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def crds() -> list[dict[str, Any]]:
    folder = resources.files("rebalancer").joinpath("data", "crds")
    documents: list[dict[str, Any]] = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".yaml"):
            documents += _load("crds", entry.name)
    return documents


def examples(bootstrap: str, report_url: str, replicas: int) -> list[dict[str, Any]]:
    """The example fleet with the lab's broker and report addresses filled in."""
    documents: list[dict[str, Any]] = []
    for filename in EXAMPLES:
        for doc in _load("examples", filename):
            if doc["kind"] == "ConsumerGroup":
                doc["spec"]["kafka"]["bootstrapServers"] = [bootstrap]
            if doc["kind"] == "StatefulSet":
                doc["spec"]["replicas"] = replicas
                for container in doc["spec"]["template"]["spec"]["containers"]:
                    for variable in container.get("env", []):
                        if variable["name"] == "KAFKA_BOOTSTRAP_SERVERS":
                            variable["value"] = bootstrap
                        if variable["name"] == "REBALANCER_REPORT_URL":
                            variable["value"] = report_url
            documents.append(doc)
    return documents


# What the join gate needs, as the chart grants it (charts/rebalancer/templates/gate-rbac.yaml,
# value gate.serviceAccounts): it lists and watches its own pod.
GATE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
]


def gate_rbac(namespace: str, service_account: str = "default") -> list[dict[str, Any]]:
    """The Role and RoleBinding the chart gives a gated fleet's ServiceAccount."""
    name = "rebalancer-gate"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": GATE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
            ],
        },
    ]
