"""kopf registration for the workloads ConsumerGroups name: a change to one's spec wakes the
rollout planner of every ConsumerGroup that claims it (planning.workload_changes says why).

Registered at start, for each kind the operator may list and watch (handlers.startup): kopf
stops the whole operator when a watch stays refused, and the planner's resting poll sees the
change anyway, only later.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

from rebalancer.handlers.dependencies import Dependencies
from rebalancer.handlers.ownership import ClaimIndex
from rebalancer.planning.ownership import workload_key
from rebalancer.planning.workload_changes import spec_unobserved


def _key(body: kopf.Body, namespace: str | None) -> tuple[str, ...]:
    return workload_key(namespace or "default", str(body.get("kind")), body.metadata.name or "")


def _claimed_and_changed(
    body: kopf.Body, namespace: str | None, claims: ClaimIndex | None = None, **_: Any
) -> bool:
    # A filter, so that the many events of workloads no ConsumerGroup names (and the status
    # updates of those it does) neither run the handler nor log its success.
    return claims is not None and _key(body, namespace) in claims and spec_unobserved(body)


def workload_changed(
    body: kopf.Body,
    namespace: str | None,
    memo: kopf.Memo,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    deps: Dependencies = memo.deps
    if claims is None:
        return
    for claim in claims.get(_key(body, namespace), ()):
        deps.rollout_wakeup(claim.namespace, claim.name).set()


_registered: set[str] = set()


def register(plurals: Iterable[str]) -> None:
    """Follow these kinds of workload ("statefulsets", "deployments"); once each, however
    often the startup handler runs."""
    for plural in set(plurals) - _registered:
        kopf.on.event("apps", "v1", plural, when=_claimed_and_changed)(workload_changed)
        _registered.add(plural)
