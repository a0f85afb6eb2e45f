"""Sharding ConsumerGroups across replicas (docs/sharding.md): which shard a group is in, and
which shard Leases a replica should take, keep and give back.

A group's shard is a stable hash of "namespace/name" (the same on every replica and across
restarts, unlike Python's hash()), unless its label rebalancer.dev/shard names one. Each shard
is guarded by a Lease; a replica holds at most its fair share (the shard count over the live
replicas, rounded up), so that a replica that joins is given shards by the others and a replica
that dies leaves its shards to be taken by those below their share.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from rebalancer.structs.errors import RebalancerError

SHARD_LABEL = "rebalancer.dev/shard"


class ShardLabelInvalid(RebalancerError):
    """A ConsumerGroup's rebalancer.dev/shard label is not a shard of this operator."""


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def hashed_shard(namespace: str, name: str, shards: int) -> int:
    """The shard of "namespace/name" among `shards`: the same everywhere, every time."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    return _digest(f"{namespace}/{name}") % shards


def shard_of(namespace: str, name: str, labels: Mapping[str, str] | None, shards: int) -> int:
    """The shard that serves this ConsumerGroup: its label's, else the hash's."""
    value = (labels or {}).get(SHARD_LABEL)
    if value is None:
        return hashed_shard(namespace, name, shards)
    text = str(value).strip()
    if not text.isdigit() or int(text) >= shards:
        raise ShardLabelInvalid(
            f"ConsumerGroup {namespace}/{name}: label {SHARD_LABEL}={value!r} is not a shard of "
            f"this operator (a number from 0 to {shards - 1}, the operator's --shards "
            f"{shards}); set it to one of those, or remove it to place the group by its name"
        )
    return int(text)


@dataclass(frozen=True)
class LeaseView:
    """What a Lease says about its holder; `holder` is empty when the Lease was given back."""

    holder: str
    renewed_at: float  # epoch seconds of its renewTime (or acquireTime), 0 when neither
    duration_seconds: float

    def live(self, now: float) -> bool:
        return bool(self.holder) and now < self.renewed_at + self.duration_seconds

    def held_by(self, identity: str, now: float) -> bool:
        return self.holder == identity and self.live(now)


@dataclass(frozen=True)
class ShardMoves:
    """What a replica does with the shard Leases this round."""

    renew: tuple[int, ...]  # held: keep them
    take: tuple[int, ...]  # unheld or expired: try to take them (the write may lose a race)
    release: tuple[int, ...]  # above the fair share: give them back


def fair_share(shards: int, replicas: int) -> int:
    """The most shards one replica holds when `replicas` are live: every shard has room."""
    return math.ceil(shards / max(replicas, 1))


def target_holders(shards: int, replicas: Iterable[str]) -> dict[int, str]:
    """Where each shard would sit with these replicas live: rendezvous hashing (each replica
    ranks every shard by a hash of both) with room for a fair share each. Every replica works
    out the same map, so replicas racing for free shards try different ones first, and most
    shards stay where they are as replicas come and go."""
    live = sorted(set(replicas))
    share = fair_share(shards, len(live))
    pairs = sorted(
        (
            (_digest(f"{replica}/{shard}"), replica, shard)
            for replica in live
            for shard in range(shards)
        ),
        reverse=True,
    )
    targets: dict[int, str] = {}
    load = dict.fromkeys(live, 0)
    for _, replica, shard in pairs:
        if shard not in targets and load[replica] < share:
            targets[shard] = replica
            load[replica] += 1
    return targets


def plan_shards(
    identity: str,
    shards: int,
    leases: Mapping[int, LeaseView],
    members: Iterable[str],
    now: float,
) -> ShardMoves:
    """The moves of replica `identity` given every shard's Lease (absent: never taken) and the
    live replicas (`members`, this one counted in any case)."""
    live = sorted(set(members) | {identity})
    share = fair_share(shards, len(live))
    targets = target_holders(shards, live)
    held = [shard for shard in range(shards) if _lease(leases, shard).held_by(identity, now)]
    free = [shard for shard in range(shards) if not _lease(leases, shard).live(now)]

    def mine_first(shard: int) -> tuple[bool, int]:
        return (targets.get(shard) != identity, shard)

    surplus = max(len(held) - share, 0)
    # Given back first: those meant for another replica.
    release = sorted(held, key=mine_first, reverse=True)[:surplus]
    room = max(share - len(held), 0)
    take = sorted(free, key=mine_first)[:room]
    return ShardMoves(
        renew=tuple(shard for shard in held if shard not in release),
        take=tuple(sorted(take)),
        release=tuple(sorted(release)),
    )


def _lease(leases: Mapping[int, LeaseView], shard: int) -> LeaseView:
    return leases.get(shard) or LeaseView(holder="", renewed_at=0.0, duration_seconds=0.0)


def shard_lease_name(prefix: str, shard: int) -> str:
    return f"{prefix}-shard-{shard}"


def member_lease_name(prefix: str, identity: str) -> str:
    """A replica's presence Lease; its identity made a valid object name (host/pid outside a
    pod has a slash)."""
    safe = "".join(char if char.isalnum() or char in "-." else "-" for char in identity.lower())
    return f"{prefix}-member-{safe.strip('-.')}"[:253]


def shard_of_lease(prefix: str, name: str) -> int | None:
    """The shard a Lease named `<prefix>-shard-<i>` guards; None for any other name."""
    head = f"{prefix}-shard-"
    tail = name[len(head) :] if name.startswith(head) else ""
    return int(tail) if tail.isdigit() else None


# A holder stops acting on a shard this long before the others may take it, so that a replica
# whose renewals fail lets go before another starts (clocks a second apart included).
STOP_MARGIN_SECONDS = 2.0


def serving_deadline(renewed_at: float, duration_seconds: float) -> float:
    """Until when a replica acts on a shard it last renewed at `renewed_at` (its own clock)."""
    return renewed_at + duration_seconds - STOP_MARGIN_SECONDS


@dataclass(frozen=True)
class Member:
    """A live replica as its member Lease tells it."""

    identity: str
    shards: int | None  # its --shards; None from a Lease that does not say
    joined_at: float  # its member Lease's acquireTime


def waits_for(identity: str, shards: int, members: Iterable[Member]) -> list[str]:
    """The live replicas that count shards differently and joined before this one: while one
    lives, this replica holds no shard. A group's shard depends on the count, so replicas of two
    counts would serve some groups twice; the older count keeps serving until its last replica
    is gone (a rolling update of sharding.shards), then the newer takes over."""
    found = list(members)
    own = [member for member in found if member.identity == identity]
    joined = own[0].joined_at if own else float("inf")
    return sorted(
        member.identity
        for member in found
        if member.identity != identity
        and member.shards is not None
        and member.shards != shards
        and (member.joined_at, member.identity) < (joined, identity)
    )


@dataclass(frozen=True)
class ShardedGroup:
    """A ConsumerGroup as the shard index files it: where it is, and who its status says
    serves it."""

    namespace: str
    name: str
    served_by: str | None


@dataclass(frozen=True)
class TakeUp:
    """One status.servedBy write that makes kopf start a group's daemons on this replica.
    `clear_first`: the status already names this replica (a replica restarted under its pod's
    name), so the same value alone would be no change and no watch event."""

    namespace: str
    name: str
    clear_first: bool


def groups_to_take_up(
    groups: Iterable[ShardedGroup],
    served_by: str,
    running: Container[tuple[str, str]],
    *,
    just_taken: bool,
) -> list[TakeUp]:
    """The groups of a held shard whose daemons this replica must get kopf to start: those
    whose status names another replica (or none), and, right after the shard was taken, also
    those that name this one but run no daemon here. Groups with their daemons here are left
    alone: their observer writes what it must."""
    wanted = []
    for group in groups:
        if (group.namespace, group.name) in running:
            continue
        if group.served_by != served_by:
            wanted.append(TakeUp(group.namespace, group.name, clear_first=False))
        elif just_taken:
            wanted.append(TakeUp(group.namespace, group.name, clear_first=True))
    return sorted(wanted, key=lambda one: (one.namespace, one.name))
