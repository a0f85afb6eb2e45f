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
    remembered: float | None = None,
) -> tuple[dict[str, Any], float | None]:
    """status.learning after reading the latest recommendation, applying it when due, and the
    time of the last apply. `remembered` is the last apply this process made: the body's status
    may not show it yet, and the interval must hold even then."""
    raw_spec = dict(body.get("spec") or {})
    status = dict(body.get("status") or {})
    recommendation = await deps.recommender.read(namespace, name)
    known = [stamp for stamp in (applied_at(status), remembered) if stamp is not None]
    last = max(known) if known else None
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
    rendered = render_learning_status(decision, recommendation, rfc3339(last) if last else None)
    return rendered, last
