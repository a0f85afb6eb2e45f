"""The autoscalers of a managed workload: KEDA ScaledObjects and HorizontalPodAutoscalers.

I/O only: which of them target the workload, and what that means for a rollout, is decided in
rebalancer.planning.autoscalers. Both kinds are listed in the workload's namespace (their names
are the user's, only spec.scaleTargetRef ties them to the workload); a cluster without KEDA has
no ScaledObject resource, which reads as no ScaledObject. Writes touch only the ScaledObject's
pause annotation and the operator's mark beside it, and only the object version the planner
saw: a pause its owner added in between is never taken over.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.autoscalers import view_autoscalers
from rebalancer.structs.autoscalers import (
    KEDA_PAUSED_ANNOTATION,
    PAUSED_FOR_ROLLOUT_ANNOTATION,
    Autoscalers,
)
from rebalancer.structs.specs import WorkloadKind

KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
MERGE_PATCH = "application/merge-patch+json"


def _items(response: Any) -> list[dict[str, Any]]:
    parsed = json.loads(response.data)
    items = parsed.get("items") if isinstance(parsed, dict) else None
    return list(items or [])


def _list_scaled_objects(api: KubernetesApi, namespace: str) -> list[dict[str, Any]]:
    try:
        return _items(
            api.custom.list_namespaced_custom_object(
                KEDA_GROUP, KEDA_VERSION, namespace, KEDA_PLURAL, _preload_content=False
            )
        )
    except ApiException as error:
        if error.status == 404:  # KEDA is not installed: its resource does not exist
            return []
        raise


def _list_hpas(api: KubernetesApi, namespace: str) -> list[dict[str, Any]]:
    autoscaling = client.AutoscalingV2Api(api.api_client)
    return _items(
        autoscaling.list_namespaced_horizontal_pod_autoscaler(namespace, _preload_content=False)
    )


async def read_autoscalers(
    api: KubernetesApi, namespace: str, kind: WorkloadKind, name: str
) -> Autoscalers:
    """The ScaledObject and the HPA whose scaleTargetRef names the workload, if any. A refusal
    raises PermissionDenied (the grant is named by the caller)."""
    scaled_objects, hpas = await asyncio.gather(
        asyncio.to_thread(_list_scaled_objects, api, namespace),
        asyncio.to_thread(_list_hpas, api, namespace),
    )
    return view_autoscalers(scaled_objects, hpas, kind, name)


def _annotate(
    api: KubernetesApi, namespace: str, name: str, version: str, values: dict[str, str | None]
) -> bool:
    """Merge `values` into the ScaledObject's annotations if it is still at `version`; False when
    it changed or is gone (the next step reads it again and decides anew)."""
    metadata: dict[str, Any] = {"annotations": values}
    if version:
        metadata["resourceVersion"] = version
    try:
        api.custom.patch_namespaced_custom_object(
            KEDA_GROUP,
            KEDA_VERSION,
            namespace,
            KEDA_PLURAL,
            name,
            {"metadata": metadata},
            _content_type=MERGE_PATCH,
            _preload_content=False,
        )
    except ApiException as error:
        if error.status in (404, 409):
            return False
        raise
    return True


async def pause_scaled_object(
    api: KubernetesApi, namespace: str, name: str, rollout_id: str, version: str
) -> bool:
    values: dict[str, str | None] = {
        KEDA_PAUSED_ANNOTATION: "true",
        PAUSED_FOR_ROLLOUT_ANNOTATION: rollout_id,
    }
    return await asyncio.to_thread(_annotate, api, namespace, name, version, values)


async def resume_scaled_object(api: KubernetesApi, namespace: str, name: str, version: str) -> bool:
    values: dict[str, str | None] = {
        KEDA_PAUSED_ANNOTATION: None,
        PAUSED_FOR_ROLLOUT_ANNOTATION: None,
    }
    return await asyncio.to_thread(_annotate, api, namespace, name, version, values)
