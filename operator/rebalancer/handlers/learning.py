"""Closing the loop: the learning job's recommendation, shown or applied per policy."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Mapping
from typing import Any

import kopf

from rebalancer.clients.patching import patch_policy
from rebalancer.handlers.dependencies import Dependencies
from rebalancer.planning.recommendations import (
    CurrentSettings,
    LearningAction,
    LearningDecision,
    decide_learning,
    render_learning_status,
)
from rebalancer.planning.statuses import rfc3339
from rebalancer.structs.specs import ConsumerGroupSpec


def settings_in_force(spec: Mapping[str, Any], status: Mapping[str, Any]) -> CurrentSettings:
    """What is in force as far as spec and status tell; None where nobody set it."""
    policy = spec.get("policy") or {}
    delivered = status.get("settings") or {}
    delay = (delivered.get("brokerDelay") or {}).get("clusterMs")
    if delay is None:
        delay = (policy.get("brokerDelay") or {}).get("delayMs")
    session = delivered.get("sessionTimeoutMs") or (policy.get("settings") or {}).get(
        "sessionTimeoutMs"
    )
    return CurrentSettings(
        initial_rebalance_delay_ms=None if delay is None else float(delay),
        batch_size=(policy.get("rollout") or {}).get("maxBatchSize"),
        session_timeout_ms=None if session is None else float(session),
    )


def applied_at(status: Mapping[str, Any]) -> float | None:
    stamp = (status.get("learning") or {}).get("lastAppliedTime")
    if not isinstance(stamp, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return None


def policy_patch(decision: LearningDecision, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec.policy changes that carry a decision out through the existing machinery.

    Only the blocks the user turned on are touched: a learned batch size needs managed rollouts,
    a session timeout needs managed settings, a delay needs a broker-delay policy.
    """
    policy = spec.get("policy") or {}
    wanted = decision.settings
    patch: dict[str, Any] = {}
    if wanted.batch_size is not None and (policy.get("rollout") or {}).get("enabled"):
        patch["rollout"] = {"maxBatchSize": int(wanted.batch_size)}
    if wanted.session_timeout_ms is not None and policy.get("settings") is not None:
        patch["settings"] = {"sessionTimeoutMs": int(wanted.session_timeout_ms)}
    if wanted.initial_rebalance_delay_ms is not None and policy.get("brokerDelay") is not None:
        patch["brokerDelay"] = {"delayMs": int(wanted.initial_rebalance_delay_ms)}
    return patch


async def learning_status(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    spec: ConsumerGroupSpec,
) -> dict[str, Any]:
    """status.learning after reading the latest recommendation, applying it when due."""
    raw_spec = dict(body.get("spec") or {})
    status = dict(body.get("status") or {})
    recommendation = await deps.recommender.read(namespace, name)
    last = applied_at(status)
    now = time.time()
    decision = decide_learning(
        spec.policy.learning, recommendation, settings_in_force(raw_spec, status), last, now
    )
    if decision.action is LearningAction.APPLY:
        patch = policy_patch(decision, raw_spec)
        if patch:
            await patch_policy(deps.kube, namespace, name, patch)
            kopf.info(body, reason="RecommendationApplied", message=decision.message)
            last = now
    return render_learning_status(decision, recommendation, rfc3339(last) if last else None)
