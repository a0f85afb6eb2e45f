"""The autoscaler adapter on the real API server, with KEDA's own ScaledObject CRD installed.

What the lab test cannot show cheaply: the write is guarded by the resourceVersion the planner
decided on (a ScaledObject changed meanwhile, say its owner paused it, is not written), a
resume removes only the operator's pause and mark (an owner's paused-replicas stays), and an
HPA and a ScaledObject of another workload are not taken for the workload's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes import client
from tests.autoscaler_support import GROUP, KEDA_CRD, PLURAL, VERSION, annotations_of, scaled_object
from tests.reconcilers.settings.support import crds

from rebalancer.clients.autoscaling import (
    pause_scaled_object,
    read_autoscalers,
    resume_scaled_object,
)
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.autoscalers import autoscaler_actions
from rebalancer.planning.rollout_actions import PauseScaledObject
from rebalancer.structs.autoscalers import (
    KEDA_PAUSED_ANNOTATION,
    KEDA_PAUSED_REPLICAS_ANNOTATION,
    PAUSED_FOR_ROLLOUT_ANNOTATION,
)
from rebalancer.structs.specs import WorkloadKind

STS = WorkloadKind.STATEFULSET


def create(kube: KubernetesApi, ns: str, body: dict[str, Any]) -> None:
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def annotate(kube: KubernetesApi, ns: str, name: str, values: dict[str, str | None]) -> None:
    kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        name,
        {"metadata": {"annotations": values}},
        _content_type="application/merge-patch+json",
    )


def test_pause_and_resume_touch_only_the_operators_annotations(
    kube: KubernetesApi, ns: str
) -> None:
    crds(kube, KEDA_CRD)
    create(kube, ns, scaled_object("orders-so", "orders", "kafka:9092", "orders"))
    create(kube, ns, scaled_object("other-so", "payments", "kafka:9092", "payments"))
    autoscaling = client.AutoscalingV2Api(kube.api_client)
    autoscaling.create_namespaced_horizontal_pod_autoscaler(
        ns,
        {
            "metadata": {"name": "payments-hpa"},
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "payments",
                },
                "maxReplicas": 3,
            },
        },
    )
    found = asyncio.run(read_autoscalers(kube, ns, STS, "orders"))
    assert found.hpa is None  # the HPA is the other workload's
    assert found.scaled_object is not None and found.scaled_object.name == "orders-so"
    (pause,) = autoscaler_actions(True, "ab12", found)
    assert isinstance(pause, PauseScaledObject)

    # Its owner changed it since it was read: the stale write is not made.
    annotate(kube, ns, "orders-so", {"team": "payments"})
    assert not asyncio.run(
        pause_scaled_object(kube, ns, "orders-so", "ab12", pause.resource_version)
    )
    assert KEDA_PAUSED_ANNOTATION not in annotations_of(kube.api_client, ns, "orders-so")

    fresh = asyncio.run(read_autoscalers(kube, ns, STS, "orders")).scaled_object
    assert fresh is not None
    assert asyncio.run(pause_scaled_object(kube, ns, "orders-so", "ab12", fresh.resource_version))
    marks = annotations_of(kube.api_client, ns, "orders-so")
    assert marks[KEDA_PAUSED_ANNOTATION] == "true"
    assert marks[PAUSED_FOR_ROLLOUT_ANNOTATION] == "ab12"
    assert KEDA_PAUSED_ANNOTATION not in annotations_of(kube.api_client, ns, "other-so")

    # The owner pins replicas meanwhile; the resume removes only the operator's two.
    annotate(kube, ns, "orders-so", {KEDA_PAUSED_REPLICAS_ANNOTATION: "2"})
    current = asyncio.run(read_autoscalers(kube, ns, STS, "orders")).scaled_object
    assert current is not None and current.paused_for == "ab12"
    assert asyncio.run(resume_scaled_object(kube, ns, "orders-so", current.resource_version))
    marks = annotations_of(kube.api_client, ns, "orders-so")
    assert marks == {"team": "payments", KEDA_PAUSED_REPLICAS_ANNOTATION: "2"}, marks
    # Now the owner's pause: nothing to do for a rollout, active or not.
    owned = asyncio.run(read_autoscalers(kube, ns, STS, "orders"))
    assert autoscaler_actions(True, "cd34", owned) == []
    assert autoscaler_actions(False, "cd34", owned) == []
    # A ScaledObject deleted before the resume is no error.
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "other-so")
    assert not asyncio.run(resume_scaled_object(kube, ns, "other-so", ""))
    listed = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, _preload_content=False
    )
    assert [i["metadata"]["name"] for i in json.loads(listed.data)["items"]] == ["orders-so"]
