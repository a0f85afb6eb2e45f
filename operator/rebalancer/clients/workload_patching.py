"""Kubernetes writes of the consumers' settings: the settings ConfigMap and the workload's pod
template. The brokers' delay in a Strimzi Kafka resource is written by clients.strimzi_configs.

I/O only; what to write is decided in rebalancer.planning.consumer_settings_plans. Each call sets
an end state and reads first, so repeating it changes nothing and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi, PermissionDenied
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.specs import WorkloadKind

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"

Body = dict[str, Any]


class ConfiguringFailed(RebalancerError):
    """A write the settings need was refused; the message names the object and the reason."""


class ConfigMapOutcome(StrEnum):
    CREATED = "created"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"


def _json(response: Any) -> Body:
    data = response.data if hasattr(response, "data") else response
    parsed = json.loads(data)
    return parsed if isinstance(parsed, dict) else {}


def _detail(error: ApiException) -> str:
    try:
        message = json.loads(error.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        message = str(error.body or "")[:300]
    return f"HTTP {error.status}: {message or error.reason}"


def _failed(what: str, error: ApiException) -> Exception:
    """A refusal for a missing grant stays PermissionDenied (the handler names the grant);
    any other is ConfiguringFailed."""
    if isinstance(error, PermissionDenied):
        return error
    return ConfiguringFailed(f"{what}: {_detail(error)}")


def _same_configmap(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    metadata, wanted_meta = current.get("metadata") or {}, wanted.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    return (
        (current.get("data") or {}) == (wanted.get("data") or {})
        and all(labels.get(k) == v for k, v in (wanted_meta.get("labels") or {}).items())
        and all(annotations.get(k) == v for k, v in (wanted_meta.get("annotations") or {}).items())
        and (metadata.get("ownerReferences") or []) == (wanted_meta.get("ownerReferences") or [])
    )


async def apply_configmap(api: KubernetesApi, body: Mapping[str, Any]) -> ConfigMapOutcome:
    """Create the ConfigMap, or replace it (PUT, guarded by its resourceVersion) if it differs.

    Labels and annotations others added are kept; data and ownerReferences are the operator's.
    """
    metadata = body["metadata"]
    namespace, name = metadata["namespace"], metadata["name"]
    try:
        current = _json(
            await asyncio.to_thread(
                api.core.read_namespaced_config_map, name, namespace, _preload_content=False
            )
        )
    except ApiException as error:
        if error.status != 404:
            raise _failed(f"reading ConfigMap {namespace}/{name}", error) from None
        current = {}
    if not current:
        try:
            await asyncio.to_thread(
                api.core.create_namespaced_config_map,
                namespace,
                dict(body),
                _preload_content=False,
            )
        except ApiException as error:
            if error.status == 409:  # created meanwhile; the next reconcile compares it
                return ConfigMapOutcome.UNCHANGED
            raise _failed(f"creating ConfigMap {namespace}/{name}", error) from None
        return ConfigMapOutcome.CREATED
    if _same_configmap(current, body):
        return ConfigMapOutcome.UNCHANGED
    old_meta = current.get("metadata") or {}
    replacement = dict(body)
    replacement["metadata"] = {
        **metadata,
        "labels": {**(old_meta.get("labels") or {}), **(metadata.get("labels") or {})},
        "annotations": {
            **(old_meta.get("annotations") or {}),
            **(metadata.get("annotations") or {}),
        },
        "resourceVersion": old_meta.get("resourceVersion"),
    }
    try:
        await asyncio.to_thread(
            api.core.replace_namespaced_config_map,
            name,
            namespace,
            replacement,
            _preload_content=False,
        )
    except ApiException as error:
        raise _failed(f"replacing ConfigMap {namespace}/{name}", error) from None
    return ConfigMapOutcome.REPLACED


async def stored_workload(
    api: KubernetesApi, namespace: str, kind: WorkloadKind, name: str
) -> Body | None:
    """The StatefulSet or Deployment as stored, its kind set; None if absent. Any other refusal
    is the client's ApiException."""
    reader = (
        api.apps.read_namespaced_stateful_set
        if kind is WorkloadKind.STATEFULSET
        else api.apps.read_namespaced_deployment
    )
    try:
        body = _json(await asyncio.to_thread(reader, name, namespace, _preload_content=False))
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    body.setdefault("kind", kind.value)
    return body


async def read_workload_body(
    api: KubernetesApi, namespace: str, kind: WorkloadKind, name: str
) -> Body | None:
    """The StatefulSet or Deployment as stored (None if absent), for the template patch."""
    try:
        return await stored_workload(api, namespace, kind, name)
    except ApiException as error:
        raise _failed(f"reading {kind.value} {namespace}/{name}", error) from None


async def patch_workload(
    api: KubernetesApi,
    namespace: str,
    kind: WorkloadKind,
    name: str,
    ops: Sequence[Mapping[str, Any]],
) -> bool:
    """Apply a resourceVersion-guarded JSON patch; False when the workload changed meanwhile.

    A lost race is not an error: the next reconcile reads the workload again and plans anew.
    """
    if not ops:
        return True
    patcher = (
        api.apps.patch_namespaced_stateful_set
        if kind is WorkloadKind.STATEFULSET
        else api.apps.patch_namespaced_deployment
    )
    try:
        await asyncio.to_thread(
            patcher,
            name,
            namespace,
            [dict(op) for op in ops],
            _content_type=JSON_PATCH,
            _preload_content=False,
        )
    except ApiException as error:
        if error.status == 409:
            return False
        if error.status == 422 and await _moved_on(api, namespace, kind, name, ops):
            return False
        raise _failed(f"patching {kind.value} {namespace}/{name}", error) from None
    return True


async def _moved_on(
    api: KubernetesApi,
    namespace: str,
    kind: WorkloadKind,
    name: str,
    ops: Sequence[Mapping[str, Any]],
) -> bool:
    """Whether a refused patch lost the race its resourceVersion test guards against.

    kube-apiserver answers a failed `test` op with a bare 422 ("the server rejected our request
    due to an error in our request", no details), as it answers any patch it cannot apply; only
    a fresh read tells whether the workload changed since it was read."""
    guard = next(
        (
            op.get("value")
            for op in ops
            if op.get("op") == "test" and op.get("path") == "/metadata/resourceVersion"
        ),
        None,
    )
    if guard is None:
        return False
    current = await read_workload_body(api, namespace, kind, name)
    return current is None or (current.get("metadata") or {}).get("resourceVersion") != guard
