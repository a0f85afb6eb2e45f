"""A ConsumerGroup's spec checked on every change: conditions, an Event and metrics say whether
the operator can act on it (every problem named with its field and fix), before anything acts."""

from __future__ import annotations

import time

import kopf

from rebalancer import metrics
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.patching import patch_status
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.reconcilers.sharding import served_by_here
from rebalancer.structs.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    merge_conditions,
)
from rebalancer.structs.consumer_group import (
    declared_group_id,
    read_consumer_group,
    written_status,
)
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.times import format_rfc3339


async def validate(deps: Dependencies, body: kopf.Body, namespace: str, name: str) -> None:
    """Read the spec, and say in conditions, an Event and metrics whether it is usable."""
    status = written_status(body)
    generation = body.metadata.get("generation")
    try:
        read_consumer_group(body, namespace=namespace)
    except SpecInvalid as error:
        message = error.summary()
        kopf.warn(body, reason="InvalidSpec", message=message)
        conditions = [
            Condition(ConditionType.READY, ConditionStatus.FALSE, "InvalidSpec", message),
            Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, "InvalidSpec", message),
        ]
    else:
        conditions = [
            Condition(
                ConditionType.PROGRESSING,
                ConditionStatus.TRUE,
                "Observing",
                "spec accepted; observing the group",
            )
        ]
        degraded = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Degraded"), None
        )
        if degraded is not None and degraded.get("reason") == "InvalidSpec":
            conditions.append(
                Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, "SpecFixed", "spec valid")
            )
    # An invalid spec may lack a usable groupId; its series carry what it says, or nothing.
    group_id = declared_group_id(body)
    metrics.publish_conditions(namespace, name, group_id, conditions)
    merged = merge_conditions(
        status.get("conditions") or [],
        conditions,
        now=format_rfc3339(time.time()),
        generation=generation,
    )
    fields: dict[str, object] = {"observedGeneration": generation, "conditions": merged}
    served_by = served_by_here(deps, namespace, name, body.metadata.labels)
    if served_by is not None and status.get("servedBy") != served_by:
        # With sharding this handler runs where the group is served: said in the same write.
        fields["servedBy"] = served_by
    try:
        await patch_status(deps.kube, namespace, name, status, fields)
    except PermissionDenied as error:
        # Told once in the log and an Event; the observer keeps trying to write status.
        report_denied(deps, body, namespace, name, "status", error)
