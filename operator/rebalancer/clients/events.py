"""Events posted and awaited, for the ones that must be in the API before status says so.

kopf queues its Events and posts them in the background: a status written right after can
reach the API first, and an operator killed in between loses the Event for good (a restarted
operator resumes from status, so it never posts it again). A rollout's transitions are what a
user reads to follow it, so they go through here before the status that records them; the rest
keep kopf's queue. An Event that cannot be posted here goes to kopf's queue instead.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import kopf

from rebalancer.clients.kubernetes_api import KubernetesApi

# What kopf writes for the Events it posts, so `kubectl describe` shows one source for all.
REPORTING_COMPONENT = "kopf"
EVENT_NAME_PREFIX = "kopf-event-"
# The API refuses longer messages; kopf shortens them alike.
MAX_MESSAGE_LENGTH = 1024
logger = logging.getLogger(__name__)


def event_body(
    involved: dict[str, Any], event_type: str, reason: str, message: str, now: datetime
) -> dict[str, Any]:
    """A core/v1 Event about `involved` (an object reference with its namespace)."""
    stamp = now.isoformat()
    return {
        "metadata": {"namespace": involved["namespace"], "generateName": EVENT_NAME_PREFIX},
        "type": event_type,
        "reason": reason,
        "message": shortened(message),
        "action": "Action?",
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": "dev",
        "source": {"component": REPORTING_COMPONENT},
        "involvedObject": involved,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "eventTime": stamp,
    }


def shortened(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    half = (MAX_MESSAGE_LENGTH - 3) // 2
    return f"{message[:half]}...{message[-half:]}"


def reference(body: kopf.Body) -> dict[str, Any]:
    metadata = body.metadata
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "name": metadata.name,
        "uid": metadata.uid,
        "namespace": metadata.namespace or "default",
    }


async def post_event(
    kube: KubernetesApi, body: kopf.Body, *, warning: bool, reason: str, message: str
) -> None:
    """The Event in the API when this returns, or handed to kopf's queue when the API refused
    or could not be reached (logged; an Event never fails the step that reports it)."""
    involved = reference(body)
    event_type = "Warning" if warning else "Normal"
    event = event_body(involved, event_type, reason, message, datetime.now(UTC))
    try:
        await asyncio.to_thread(kube.core.create_namespaced_event, involved["namespace"], event)
    except Exception as error:  # auxiliary: kopf's queue retries it in the background
        logger.warning("posting the %s Event failed, queued instead: %s", reason, error)
        post = kopf.warn if warning else kopf.info
        post(body, reason=reason, message=message)
