"""Who owns a consumer group and a workload: one ConsumerGroup each, the oldest.

Two ConsumerGroups that name the same group on the same Kafka cluster, or the same workload,
would both act on one fleet (park it, gate it, enforce, write its settings) and report each
other's members. The admission webhook refuses the second one; when one exists anyway (made
while the webhook was down, or two applied in the same instant), the older resource keeps the
fleet and the newer one takes no action. Age is the creation timestamp, ties broken by
namespace and name, so every reader of the same claims picks the same owner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.specs import ConsumerGroupSpec

# The condition reason a resource that is not the owner carries.
NOT_OWNER = "NotOwner"


class ClaimedField(StrEnum):
    GROUP = "spec.groupId"
    WORKLOAD = "spec.workload"


@dataclass(frozen=True)
class Claim:
    """What one ConsumerGroup lays claim to: a group on a cluster and a workload."""

    namespace: str
    name: str
    uid: str
    # RFC 3339 in UTC as the API server writes it: ordered as text.
    created: str
    group_id: str
    # Normalised bootstrap servers: two lists that share a broker name the same cluster.
    servers: frozenset[str]
    workload_kind: str
    workload_name: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload(self) -> str:
        return f"{self.workload_kind}/{self.workload_name}"

    def precedes(self, other: Claim) -> bool:
        """Whether this claim is older: it keeps the fleet when both claim it."""
        return (self.created, self.namespace, self.name, self.uid) < (
            other.created,
            other.namespace,
            other.name,
            other.uid,
        )


@dataclass(frozen=True)
class Conflict:
    field: ClaimedField
    other: Claim

    def message(self, claim: Claim) -> str:
        """What is claimed twice, by whom, and what to change."""
        other = self.other
        if self.field is ClaimedField.GROUP:
            return (
                f"spec.groupId {claim.group_id!r} on Kafka cluster "
                f"{','.join(sorted(claim.servers & other.servers))} is already managed by "
                f"ConsumerGroup {other.ref}; one ConsumerGroup manages a group: use another "
                f"spec.groupId, or change or delete {other.ref} first"
            )
        return (
            f"spec.workload {claim.workload} in namespace {claim.namespace} is already managed "
            f"by ConsumerGroup {other.ref} (group {other.group_id!r}); one ConsumerGroup "
            f"manages a workload: point spec.workload at this group's own workload, or change "
            f"or delete {other.ref} first"
        )


def normalise_servers(servers: Iterable[str]) -> frozenset[str]:
    return frozenset(server.strip().lower() for server in servers if server.strip())


def claim_of(namespace: str, name: str, uid: str, created: str, spec: ConsumerGroupSpec) -> Claim:
    return Claim(
        namespace=namespace,
        name=name,
        uid=uid,
        created=created,
        group_id=spec.group_id,
        servers=normalise_servers(spec.kafka.bootstrap_servers),
        workload_kind=spec.workload.kind.value,
        workload_name=spec.workload.name,
    )


def workload_key(namespace: str, kind: str, name: str) -> tuple[str, ...]:
    """The index key of the claims on one workload ("StatefulSet" or "Deployment" `kind`)."""
    return ("workload", namespace, kind, name)


def claim_keys(claim: Claim) -> list[tuple[str, ...]]:
    """The index keys a claim is filed under: one lookup finds every possible rival."""
    return [
        ("group", claim.group_id),
        workload_key(claim.namespace, claim.workload_kind, claim.workload_name),
    ]


def find_conflicts(claim: Claim, others: Iterable[Claim]) -> list[Conflict]:
    """Every other resource that claims the same group on the same cluster or the same
    workload, oldest first; the claim itself (same uid) is no rival."""
    found: dict[tuple[str, str], Conflict] = {}
    for other in sorted(set(others), key=lambda c: (c.created, c.namespace, c.name, c.uid)):
        if other.uid == claim.uid:
            continue
        if other.group_id == claim.group_id and other.servers & claim.servers:
            found.setdefault((other.uid, ClaimedField.GROUP), Conflict(ClaimedField.GROUP, other))
        same_workload = (
            other.namespace == claim.namespace
            and other.workload_kind == claim.workload_kind
            and other.workload_name == claim.workload_name
        )
        if same_workload:
            found.setdefault(
                (other.uid, ClaimedField.WORKLOAD), Conflict(ClaimedField.WORKLOAD, other)
            )
    return list(found.values())


def admission_refusal(claim: Claim, others: Iterable[Claim]) -> str | None:
    """Why the API server should refuse this create or update, None to admit it.

    Any rival refuses it, older or not: an update that points an old resource at a younger
    one's group would otherwise take the fleet away from the resource that runs it.
    """
    conflicts = find_conflicts(claim, others)
    if not conflicts:
        return None
    return "; ".join(conflict.message(claim) for conflict in conflicts)


def yielding_to(claim: Claim, others: Iterable[Claim]) -> list[Conflict]:
    """The older rivals this claim yields to at run time; empty when it owns its fleet."""
    return [c for c in find_conflicts(claim, others) if c.other.precedes(claim)]


def not_owner_message(claim: Claim, conflicts: list[Conflict]) -> str:
    """The condition's and the Event's message for a resource that takes no action."""
    reasons = "; ".join(conflict.message(claim) for conflict in conflicts)
    return (
        f"{reasons}. This resource is newer, so it takes no action on the group or the "
        "workload (no rollout, gate, enforcement or settings) and reports no group status "
        "until the conflict is resolved"
    )


# The reason a resource whose workload's consumers use another group id carries.
GROUP_MISMATCH = "GroupMismatch"


@dataclass(frozen=True)
class Sighting:
    """One consumer seen running: the group id it uses and the pod it runs in."""

    group_id: str
    namespace: str | None
    host: str


def workload_pod(kind: str, name: str, host: str) -> bool:
    """Whether a pod name is one the workload's controller makes: `<name>-<ordinal>` for a
    StatefulSet, `<name>-<template hash>-<suffix>` for a Deployment's ReplicaSets."""
    if not host.startswith(f"{name}-"):
        return False
    rest = host[len(name) + 1 :]
    if kind == "StatefulSet":
        return rest.isdigit()
    parts = rest.split("-")
    return len(parts) == 2 and all(part.isalnum() and part.islower() for part in parts)


def sightings_by_workload(
    sightings: Iterable[Sighting],
) -> dict[tuple[str, str], list[Sighting]]:
    """Sightings filed under each (kind, workload name) their pod name could belong to, so
    that a check looks up its own workload instead of reading every report."""
    found: dict[tuple[str, str], list[Sighting]] = {}
    for sighting in sightings:
        for kind, parts in (("StatefulSet", 1), ("Deployment", 2)):
            pieces = sighting.host.rsplit("-", parts)
            if len(pieces) == parts + 1 and workload_pod(kind, pieces[0], sighting.host):
                found.setdefault((kind, pieces[0]), []).append(sighting)
    return found


def group_mismatch(
    claim: Claim, sightings: Iterable[Sighting]
) -> tuple[str, tuple[str, ...]] | None:
    """The group id the workload's consumers use instead of spec.groupId, with the pods seen
    using it; None while any of its pods consumes as spec.groupId (a change of group under
    way) or none is seen at all (nothing to say yet)."""
    elsewhere: dict[str, set[str]] = {}
    for sighting in sightings:
        if sighting.namespace not in (None, claim.namespace):
            continue
        if not workload_pod(claim.workload_kind, claim.workload_name, sighting.host):
            continue
        if sighting.group_id == claim.group_id:
            return None
        elsewhere.setdefault(sighting.group_id, set()).add(sighting.host)
    if not elsewhere:
        return None
    group_id, pods = max(elsewhere.items(), key=lambda item: (len(item[1]), item[0]))
    return group_id, tuple(sorted(pods))


def group_mismatch_message(claim: Claim, other_group: str, pods: tuple[str, ...]) -> str:
    shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
    return (
        f"the consumers of {claim.workload} consume as group {other_group!r}, not spec.groupId "
        f"{claim.group_id!r} (member reports of {shown}); this resource takes no action on the "
        "workload (no rollout, gate, enforcement or settings) and reports no group until they "
        f"match: set spec.groupId to {other_group!r} or spec.workload to this group's workload"
    )
