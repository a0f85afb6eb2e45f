"""Refusals by the Kubernetes API, reported where a user looks: the log, a Warning Event on the
ConsumerGroup and its Degraded condition (the observer writes it, from deps.denials)."""

from __future__ import annotations

import logging

import kopf

from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.planning.permissions import REASON
from rebalancer.reconcilers.dependencies import Dependencies

logger = logging.getLogger(__name__)


def report_denied(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    work: str,
    error: PermissionDenied,
    group_id: str | None = None,
) -> None:
    """Log and post a refusal once (the same refusal again is only remembered), and wake the
    observer so that the group's status names it at once."""
    denial = error.denial
    if not deps.denials.record(namespace, name, work, denial):
        return
    logger.error("%s/%s: %s", namespace, name, denial.message())
    kopf.warn(body, reason=REASON, message=denial.message())
    if group_id is not None:
        deps.hub.wakeup(group_id).set()
