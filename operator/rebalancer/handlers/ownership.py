"""kopf handlers for ownership: the claims index, and the validating webhook that uses it."""

from __future__ import annotations

from typing import Any

import kopf

from rebalancer.reconcilers import ownership
from rebalancer.reconcilers.ownership import ClaimIndex, ClaimsByKey
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


@kopf.index(GROUP, VERSION, PLURAL)
def claims(body: kopf.Body, namespace: str | None, **_: Any) -> ClaimsByKey | None:
    """Each ConsumerGroup filed under its group and its workload."""
    return ownership.claims_by_key(body, namespace)


def refuse_conflicts(
    body: kopf.Body,
    namespace: str | None,
    claims: ClaimIndex | None = None,
    **kwargs: Any,
) -> None:
    # `old`: the stored object on UPDATE (not in kopf's typed protocol).
    ownership.refuse_conflicts(body, namespace, claims, kwargs.get("old"))


def register_webhook() -> None:
    """Register the validating webhook's handler, for a run that serves it: kopf stops an
    operator whose registry holds admission handlers but that has no webhook server."""
    # failurePolicy Ignore: an operator that is down or unreachable never blocks a write to a
    # ConsumerGroup (not even removing a finalizer by hand); what slips through meanwhile is
    # caught at run time, where the newer resource takes no action (docs/ownership.md).
    kopf.on.validate(
        GROUP,
        VERSION,
        PLURAL,
        id="ownership",
        operations=["CREATE", "UPDATE"],
        ignore_failures=True,
        side_effects=False,
    )(refuse_conflicts)
