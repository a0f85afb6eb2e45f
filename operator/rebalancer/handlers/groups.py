"""kopf handlers for ConsumerGroup: validate on change, observe with a daemon."""

from __future__ import annotations

import time
from typing import Any

import kopf

from rebalancer import metrics
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.patching import patch_status
from rebalancer.handlers.dependencies import Dependencies
from rebalancer.handlers.observing import Observer, observe_forever, tracking_from_status
from rebalancer.handlers.ownership import ClaimIndex
from rebalancer.handlers.permissions import report_denied
from rebalancer.planning.observing import coordinator_from_status
from rebalancer.planning.statuses import rfc3339
from rebalancer.structs.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    merge_conditions,
)
from rebalancer.structs.consumer_group import (
    GROUP,
    PLURAL,
    VERSION,
    declared_group_id,
    read_consumer_group,
    written_status,
)
from rebalancer.structs.problems import SpecInvalid


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def validate(
    body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    deps: Dependencies = memo.deps
    namespace = namespace or "default"
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
        status.get("conditions") or [], conditions, now=rfc3339(time.time()), generation=generation
    )
    try:
        await patch_status(
            deps.kube,
            namespace,
            name,
            status,
            {"observedGeneration": generation, "conditions": merged},
        )
    except PermissionDenied as error:
        # Told once in the log and an Event; the observer keeps trying to write status.
        report_denied(deps, body, namespace, name, "status", error)


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0)
async def observe(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    deps: Dependencies = memo.deps
    namespace = namespace or "default"
    status = written_status(body)
    tracking = tracking_from_status(status, since=time.time() - 1.0)
    observer = Observer(
        deps=deps,
        namespace=namespace,
        name=name,
        tracking=tracking,
        coordinator=coordinator_from_status(status),
        claims=claims,
    )
    await observe_forever(observer, body, stopped)
