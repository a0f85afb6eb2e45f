"""kopf registration for the workloads ConsumerGroups name: a change to one's spec or to its
pods wakes the rollout planner of every ConsumerGroup that claims it (reconcilers.workloads).

Registered at start, for each kind the operator may list and watch (handlers.startup): kopf
stops the whole operator when a watch stays refused, and the planner's resting poll sees the
change anyway, only later.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

from rebalancer.reconcilers import workloads
from rebalancer.reconcilers.ownership import ClaimIndex


def _claimed_and_changed(
    body: kopf.Body,
    namespace: str | None,
    memo: kopf.Memo,
    claims: ClaimIndex | None = None,
    type: str | None = None,  # kopf passes the watch event's type by this name
    **_: Any,
) -> bool:
    # A filter, so that the many events of workloads no ConsumerGroup names (and the status
    # updates of those it does that change no pod) neither run the handler nor log its success.
    deps = getattr(memo, "deps", None)
    return workloads.claimed_and_changed(deps, body, namespace, claims, type)


def workload_changed(
    body: kopf.Body,
    namespace: str | None,
    memo: kopf.Memo,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    workloads.wake_claimants(memo.deps, body, namespace, claims)


_registered: set[str] = set()


def register(plurals: Iterable[str]) -> None:
    """Follow these kinds of workload ("statefulsets", "deployments"); once each, however
    often the startup handler runs."""
    for plural in set(plurals) - _registered:
        kopf.on.event("apps", "v1", plural, when=_claimed_and_changed)(workload_changed)
        _registered.add(plural)
