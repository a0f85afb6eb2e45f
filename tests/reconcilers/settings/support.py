"""Builders the settings tests share: a Strimzi-like Kafka CRD and a consumer StatefulSet."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.reconcilers.settings_delivery import SettingsTarget
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer_lab.crd_install import install_crds

# Strimzi's Kafka kind as far as this feature touches it: spec.kafka.config is free-form.
_KAFKA_SCHEMA: dict[str, Any] = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "kafka": {
                        "type": "object",
                        "properties": {
                            "replicas": {"type": "integer"},
                            "config": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            },
            "status": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    }
}
# Served at v1 and v1beta2, as Strimzi 0.49 to 0.51 serve it (1.0 and later serve v1 alone,
# before 0.49 v1beta2 alone): v1 first, the version users write today; v1beta2 stores, so a test
# can stop serving v1 (STRIMZI_V1) to stand for a Strimzi older than 0.49.
STRIMZI_V1 = 0
STRIMZI_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "kafkas.kafka.strimzi.io"},
    "spec": {
        "group": "kafka.strimzi.io",
        "scope": "Namespaced",
        "names": {
            "kind": "Kafka",
            "listKind": "KafkaList",
            "plural": "kafkas",
            "singular": "kafka",
        },
        "versions": [
            {
                "name": name,
                "served": True,
                "storage": name == "v1beta2",
                "subresources": {"status": {}},
                "schema": _KAFKA_SCHEMA,
            }
            for name in ("v1", "v1beta2")
        ],
    },
}


def crds(kube: KubernetesApi, *bodies: dict[str, Any]) -> None:
    """Install CRDs the session's cluster may have already (tests share it), and wait for them."""
    install_crds(kube.api_client, bodies)


def statefulset(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "orders-consumer", "namespace": ns},
        "spec": {
            "replicas": 3,
            "serviceName": "orders-consumer",
            "selector": {"matchLabels": {"app": "orders"}},
            "template": {
                "metadata": {"labels": {"app": "orders"}},
                "spec": {
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "example/consumer:1",
                            "env": [{"name": "KAFKA_GROUP_ID", "value": "orders"}],
                        }
                    ]
                },
            },
        },
    }


def settings_target(bootstrap: str, ns: str, **changes: Any) -> SettingsTarget:
    """The `orders` ConsumerGroup's reconcile target on its StatefulSet, with no policy set."""
    base = SettingsTarget(
        namespace=ns,
        name="orders",
        uid=None,
        group_id="orders",
        bootstrap_servers=(bootstrap,),
        workload_kind=WorkloadKind.STATEFULSET,
        workload_name="orders-consumer",
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        profile=None,
        settings=None,
        delay=None,
    )
    return replace(base, **changes)
