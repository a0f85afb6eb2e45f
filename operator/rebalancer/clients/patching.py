"""Write ConsumerGroup status with JSON patches (a merge patch would replace the whole list).

Every status write passes `checked_status` first: the API server prunes, silently, a field the
CRD's schema does not declare, so what the status model does not declare is left out here, with
an error logged and counted (rebalancer_status_fields_dropped_total), rather than lost unseen.
With REBALANCER_STRICT_STATUS=1 (the test suite sets it) such a write raises instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping

from kubernetes.client.exceptions import ApiException

from rebalancer import metrics
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.status_patches import StatusUndeclared, check_status_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


STRICT_STATUS_VARIABLE = "REBALANCER_STRICT_STATUS"

logger = logging.getLogger(__name__)


class ResourceGone(RebalancerError):
    """The ConsumerGroup was deleted while we were working on it."""


def checked_status(
    namespace: str, name: str, new_fields: Mapping[str, object]
) -> dict[str, object]:
    """`new_fields` without what the status model does not declare (structs/status_patches.py).

    A write is not refused for one bad key: the rest of it is what users and a restarted
    operator read. Each key left out is logged as an error naming its path and counted; in
    strict mode (REBALANCER_STRICT_STATUS=1) the write raises StatusUndeclared instead."""
    check = check_status_patch(new_fields)
    if not check.violations:
        return check.fields
    if os.environ.get(STRICT_STATUS_VARIABLE) == "1":
        raise StatusUndeclared(check.violations)
    for violation in check.violations:
        logger.error("%s/%s: status field not written: %s", namespace, name, violation)
        metrics.record_status_field_dropped(violation.field)
    return check.fields


def status_patch_ops(
    current_status: Mapping[str, object] | None, new_fields: Mapping[str, object]
) -> list[dict[str, object]]:
    """JSON-patch ops that set each top-level status field, creating /status if needed."""
    if not current_status:
        return [{"op": "add", "path": "/status", "value": dict(new_fields)}]
    return _field_ops(new_fields)


def _field_ops(new_fields: Mapping[str, object]) -> list[dict[str, object]]:
    return [
        {"op": "add", "path": f"/status/{key}", "value": value} for key, value in new_fields.items()
    ]


async def _json_patch_status(
    api: KubernetesApi, namespace: str, name: str, ops: list[dict[str, object]]
) -> None:
    await _patch_status_as(api, namespace, name, ops, JSON_PATCH)


async def _patch_status_as(
    api: KubernetesApi, namespace: str, name: str, body: object, content_type: str
) -> None:
    """One PATCH of a ConsumerGroup's status subresource, of the patch type `content_type`."""
    await asyncio.to_thread(
        api.custom.patch_namespaced_custom_object_status,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        name,
        body,
        _content_type=content_type,
    )


async def patch_status(
    api: KubernetesApi,
    namespace: str,
    name: str,
    current_status: Mapping[str, object] | None,
    new_fields: Mapping[str, object],
) -> None:
    new_fields = checked_status(namespace, name, new_fields)
    if not new_fields:
        return
    # Field by field even when our snapshot has no status: the create handler and the observer
    # both start from the new resource's empty status, and whichever added /status whole last
    # wiped the other's fields (status.group was missing for one observe interval on 22 of 50
    # new ConsumerGroups in bench/scale.py). /status is created, empty, only when it is not there.
    if not current_status and not _has_null(new_fields):
        # A new resource's first writes: a merge patch keeps the other writers' fields and
        # creates /status if need be, in one request (a JSON patch to a missing /status is
        # refused 422 and cost three). Nothing null in it, so it deletes nothing.
        await _merge_patch_status(api, namespace, name, {"status": dict(new_fields)})
        return
    try:
        await _json_patch_status(api, namespace, name, _field_ops(new_fields))
    except ApiException as error:
        if error.status == 404:
            raise ResourceGone(f"{namespace}/{name}") from None
        if error.status != 422:
            raise
    else:
        return
    # No /status yet, or it vanished (a replace by the user). An empty merge patch creates it
    # and keeps whatever another handler wrote meanwhile; the fields then go in as JSON patches,
    # because a merge patch would drop every field whose value is null (null means "delete").
    await _merge_patch_status(api, namespace, name, {"status": {}})
    try:
        await _json_patch_status(api, namespace, name, _field_ops(new_fields))
    except ApiException as error:
        if error.status == 404:
            raise ResourceGone(f"{namespace}/{name}") from None
        raise


async def _merge_patch_status(
    api: KubernetesApi, namespace: str, name: str, patch: Mapping[str, object]
) -> None:
    try:
        await _patch_status_as(api, namespace, name, patch, MERGE_PATCH)
    except ApiException as error:
        if error.status == 404:
            raise ResourceGone(f"{namespace}/{name}") from None
        raise


def _has_null(value: object) -> bool:
    """Whether a null is anywhere in `value`: in a merge patch it would delete, not set."""
    if value is None:
        return True
    if isinstance(value, Mapping):
        return any(_has_null(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_null(item) for item in value)
    return False


async def workload_exists(api: KubernetesApi, namespace: str, kind: str, name: str) -> bool:
    return await workload_replicas(api, namespace, kind, name) is not None


async def workload_replicas(api: KubernetesApi, namespace: str, kind: str, name: str) -> int | None:
    """The workload's spec.replicas (what it is scaled to), or None when it does not exist."""
    reader = (
        api.apps.read_namespaced_stateful_set
        if kind == "StatefulSet"
        else api.apps.read_namespaced_deployment
    )
    try:
        body = await asyncio.to_thread(reader, name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    replicas = getattr(getattr(body, "spec", None), "replicas", None)
    # The API server defaults an unset spec.replicas to 1.
    return 1 if replicas is None else int(replicas)


async def patch_policy(
    api: KubernetesApi, namespace: str, name: str, policy: Mapping[str, object]
) -> None:
    """Merge `policy` into spec.policy: how learned settings reach the settings and rollouts."""
    await asyncio.to_thread(
        api.custom.patch_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        name,
        {"spec": {"policy": dict(policy)}},
        _content_type="application/merge-patch+json",
    )


async def write_served_by(
    api: KubernetesApi, namespace: str, name: str, served_by: str, *, clear_first: bool
) -> bool:
    """status.servedBy set to `served_by` (cleared first when asked, so that the same value
    still makes a watch event); False when the group is gone or the write failed (logged)."""
    try:
        if clear_first:
            await patch_status(api, namespace, name, {}, {"servedBy": None})
        await patch_status(api, namespace, name, {}, {"servedBy": served_by})
    except ResourceGone:
        return False
    except (ApiException, OSError) as error:
        logger.warning("%s/%s: status.servedBy not written: %s", namespace, name, error)
        return False
    return True
