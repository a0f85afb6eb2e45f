"""Closing the loop: the learning job's recommendation, shown or applied per policy."""

from __future__ import annotations

import time
from typing import Any

import kopf

from rebalancer.clients.patching import patch_policy
from rebalancer.handlers.dependencies import Dependencies
from rebalancer.planning.recommendation_policies import (
    applied_at,
    nothing_to_apply,
    policy_patch,
    settings_in_force,
)
from rebalancer.planning.recommendations import (
    LearningAction,
    decide_learning,
    render_learning_status,
)
from rebalancer.planning.statuses import rfc3339
from rebalancer.structs.specs import ConsumerGroupSpec


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
        else:
            decision = nothing_to_apply(decision)
    return render_learning_status(decision, recommendation, rfc3339(last) if last else None)
