"""kopf registration for ownership: the index of claims, the admission webhook, the check.

planning.ownership decides; this module files every ConsumerGroup's claims in a kopf index
(kept current by kopf's watch), refuses a conflicting create or update in a validating
webhook, and lets the daemons and timers ask whether their resource owns its fleet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import kopf

from rebalancer.clients.receiving import ReportHub
from rebalancer.planning.ownership import (
    GROUP_MISMATCH,
    NOT_OWNER,
    Claim,
    Conflict,
    Sighting,
    admission_refusal,
    claim_keys,
    claim_of,
    group_mismatch,
    group_mismatch_message,
    not_owner_message,
    sightings_by_workload,
    yielding_to,
)
from rebalancer.structs.consumer_group import read_consumer_group
from rebalancer.structs.problems import SpecInvalid

# A resource being created has no timestamp yet in some admission paths: it is the newest.
NOT_YET_CREATED = "9999-12-31T23:59:59Z"

ClaimIndex = kopf.Index[tuple[str, ...], Claim]
# What the claims index files for one resource: its claim under each of its keys.
ClaimsByKey = dict[tuple[str, ...], Claim]


def claim_from_body(body: kopf.Body | dict[str, Any], namespace: str | None) -> Claim | None:
    """The resource's claim, None while its spec is invalid (it then claims nothing: the
    spec handler reports what to fix, and no action is taken on an unparsed spec anyway)."""
    try:
        group = read_consumer_group(body, namespace=namespace)
    except SpecInvalid:
        return None
    metadata = body.get("metadata") or {}
    return claim_of(
        namespace or group.namespace,
        group.name,
        str(metadata.get("uid") or ""),
        str(metadata.get("creationTimestamp") or NOT_YET_CREATED),
        group.spec,
    )


def rivals(claim: Claim, claims: ClaimIndex | None) -> list[Claim]:
    """Every claim filed under any of this claim's keys (itself included)."""
    if claims is None:
        return []
    found: list[Claim] = []
    for key in claim_keys(claim):
        if key in claims:
            found.extend(claims[key])
    return found


def conflicts_of(
    body: kopf.Body, namespace: str | None, claims: ClaimIndex | None
) -> tuple[Claim | None, list[Conflict]]:
    """The resource's claim and the older resources it yields to (none: it owns its fleet)."""
    claim = claim_from_body(body, namespace)
    if claim is None:
        return None, []
    return claim, yielding_to(claim, rivals(claim, claims))


# Reports read at most this often for every check together: the checks run before each step
# of every resource, and reading every report each time would grow with groups times members.
SIGHTINGS_MAX_AGE_SECONDS = 1.0


@dataclass
class _Sightings:
    at: float = float("-inf")
    by_workload: dict[tuple[str, str], list[tuple[float, Sighting]]] = field(default_factory=dict)


_cache: dict[int, _Sightings] = {}


def sightings(hub: ReportHub, kind: str, name: str, now: float, ttl: float) -> list[Sighting]:
    """The consumers that reported within `ttl` from pods named as the workload's, with the
    group id each uses. The books are read, not pruned: each group's observer prunes its own
    with its own TTL."""
    cached = _cache.setdefault(id(hub), _Sightings())
    if now - cached.at > SIGHTINGS_MAX_AGE_SECONDS:
        received: dict[Sighting, float] = {}
        for book in list(hub.books.values()):
            for key, report in list(book.latest.items()):
                if key not in book.stopped_at:
                    seen = Sighting(report.group_id, report.namespace, report.host)
                    received[seen] = max(received.get(seen, 0.0), report.received_at)
        filed = sightings_by_workload(received)
        cached.by_workload = {
            key: [(received[seen], seen) for seen in found] for key, found in filed.items()
        }
        cached.at = now
    return [seen for at, seen in cached.by_workload.get((kind, name), []) if now - at <= ttl]


def refusal_of(
    body: kopf.Body, namespace: str | None, claims: ClaimIndex | None, hub: ReportHub
) -> tuple[str, str] | None:
    """(reason, message) when this resource must take no action on its group or workload: an
    older resource owns them, or the workload's consumers use another group id. None: act."""
    claim, conflicts = conflicts_of(body, namespace, claims)
    if claim is None:
        return None
    if conflicts:
        return NOT_OWNER, not_owner_message(claim, conflicts)
    ttl = float(read_consumer_group(body).spec.policy.observe.report_ttl_seconds)
    seen = sightings(hub, claim.workload_kind, claim.workload_name, time.time(), ttl)
    mismatch = group_mismatch(claim, seen)
    if mismatch is not None:
        return GROUP_MISMATCH, group_mismatch_message(claim, *mismatch)
    return None


def claims_by_key(body: kopf.Body, namespace: str | None) -> ClaimsByKey | None:
    """Each ConsumerGroup filed under its group and its workload."""
    if body.metadata.get("deletionTimestamp"):
        # A resource on its way out hands its fleet over now: its delete handler gives the
        # workload back, and a successor applied meanwhile is not refused or held back.
        return None
    claim = claim_from_body(body, namespace)
    if claim is None:
        return None
    return {key: claim for key in claim_keys(claim)}


def refuse_conflicts(
    body: kopf.Body,
    namespace: str | None,
    claims: ClaimIndex | None,
    old: kopf.Body | None,
) -> None:
    """Refuse (409) a resource that claims a group or workload an older one owns."""
    claim = claim_from_body(body, namespace)
    if claim is None:
        return
    if old is not None and claim_from_body(old, namespace) == claim:
        # An update that changes no claim (status, annotations, a policy) is not judged
        # again: a conflict that already exists is the run-time check's to report.
        return
    refusal = admission_refusal(claim, rivals(claim, claims))
    if refusal is not None:
        raise kopf.AdmissionError(refusal, code=409)
