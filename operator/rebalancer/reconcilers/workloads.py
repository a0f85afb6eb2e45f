"""A change to a workload's spec, or to the pods its status counts, wakes the rollout planner of
every ConsumerGroup that claims it (planning.workload_changes says which changes count)."""

from __future__ import annotations

import kopf

from rebalancer.clients.workload_cache import replicas_of
from rebalancer.planning.ownership import workload_key
from rebalancer.planning.workload_changes import pod_progress, spec_unobserved
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex


def _key(body: kopf.Body, namespace: str | None) -> tuple[str, ...]:
    return workload_key(namespace or "default", str(body.get("kind")), body.metadata.name or "")


def claimed_and_changed(
    deps: Dependencies | None,
    body: kopf.Body,
    namespace: str | None,
    claims: ClaimIndex | None,
    event_type: str | None = None,
) -> bool:
    """Whether a ConsumerGroup names this workload and its spec changed since last observed, or
    its pods since this operator's last event of it.

    The counts of a workload that is deleted or no longer claimed are forgotten: an operator
    that runs for months sees many workloads come and go."""
    if claims is None:
        return False
    key = _key(body, namespace)
    if deps is not None:
        _cache(deps, key, body, namespace, claimed=key in claims, deleted=event_type == "DELETED")
    if key not in claims or event_type == "DELETED":
        if deps is not None:
            deps.workload_progress.pop(key, None)
        return False
    progress = pod_progress(body)
    moved = False
    if deps is not None:
        moved = deps.workload_progress.get(key) != progress
        deps.workload_progress[key] = progress
    return spec_unobserved(body) or moved


def _cache(
    deps: Dependencies,
    key: tuple[str, ...],
    body: kopf.Body,
    namespace: str | None,
    *,
    claimed: bool,
    deleted: bool,
) -> None:
    """Keep the observers' copy of a claimed workload's spec.replicas (clients.workload_cache):
    every event of it passes here, so no observer GETs it."""
    if not claimed:
        deps.workloads.forget(key)
        return
    replicas = None if deleted else replicas_of(body)
    deps.workloads.seen(
        namespace or "default", str(body.get("kind")), body.metadata.name or "", replicas
    )


def wake_claimants(
    deps: Dependencies, body: kopf.Body, namespace: str | None, claims: ClaimIndex | None
) -> None:
    if claims is None:
        return
    for claim in claims.get(_key(body, namespace), ()):
        deps.rollout_wakeup(claim.namespace, claim.name).set()
