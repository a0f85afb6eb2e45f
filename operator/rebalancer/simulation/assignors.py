"""Partition assignment as the group leader computes it, reduced to what costs processing time.

Partitions are plain integers (one subscription); members are names. The model keeps only what
decides how many partitions stop: round-robin reshuffles everything, sticky keeps what each member
had as far as balance allows, and cooperative-sticky (KIP-429) additionally withholds every
partition that changes owner, so its owner revokes it first and a second rebalance hands it over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from rebalancer.simulation.scenarios import Assignor


@dataclass(frozen=True)
class Assignment:
    """What each member receives now, and what is withheld until its old owner lets go."""

    granted: Mapping[str, frozenset[int]]
    withheld: frozenset[int]


_EMPTY: frozenset[int] = frozenset()
# Assignments already computed, by everything they depend on: a run repeats the same few member
# sets and ownerships at every generation, and the scoring job repeats whole runs with other
# timings. Bounded, so a long-lived process does not grow; dropping it only costs recomputation.
_MEMO: dict[tuple[object, ...], Assignment] = {}
_MEMO_LIMIT = 8192


def assign_partitions(
    members: Sequence[str],
    partitions: Sequence[int],
    assignor: Assignor,
    previous: Mapping[str, frozenset[int]],
) -> Assignment:
    """Assign `partitions` over `members`; `previous` is what each member owned before.

    The result depends only on the members, the partitions in order, the assignor and, except
    for round-robin, what each of these members owned; it is shared between calls with the same
    inputs (its `granted` is read-only).
    """
    ordered = tuple(sorted(members))
    held = tuple([previous.get(member, _EMPTY) for member in ordered])
    return assign_sorted(ordered, tuple(partitions), assignor, held)


def assign_sorted(
    ordered: tuple[str, ...],
    partitions: tuple[int, ...],
    assignor: Assignor,
    held: tuple[frozenset[int], ...],
) -> Assignment:
    """`assign_partitions` for members already in sorted order, `held[i]` what `ordered[i]`
    owned before (the coordinator keeps its members sorted, so it skips the sort and mapping)."""
    key: tuple[object, ...]
    if assignor == "round-robin":
        key = (assignor, ordered, partitions)
    else:
        key = (assignor, ordered, partitions, held)
    assignment = _MEMO.get(key)
    if assignment is None:
        # Only the members' own entries are read, so this mapping stands for `previous`.
        assignment = _assign(ordered, partitions, assignor, dict(zip(ordered, held, strict=True)))
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = assignment
    return assignment


def _assign(
    ordered: Sequence[str],
    partitions: Sequence[int],
    assignor: Assignor,
    previous: Mapping[str, frozenset[int]],
) -> Assignment:
    if not ordered:
        return Assignment(granted=MappingProxyType({}), withheld=frozenset())
    if assignor == "round-robin":
        granted = {
            member: frozenset(partitions[index :: len(ordered)])
            for index, member in enumerate(ordered)
        }
        return Assignment(granted=MappingProxyType(granted), withheld=frozenset())
    target = _balance_keeping_owners(ordered, partitions, previous)
    if assignor == "sticky":
        return Assignment(granted=MappingProxyType(target), withheld=frozenset())
    return _withhold_moves(ordered, target, previous)


def _balance_keeping_owners(
    members: Sequence[str], partitions: Sequence[int], previous: Mapping[str, frozenset[int]]
) -> dict[str, frozenset[int]]:
    base, extra = divmod(len(partitions), len(members))
    valid = set(partitions)
    # The members that already hold the most get the extra slots, so fewer partitions move.
    by_holdings = sorted(
        members, key=lambda member: (-len(previous.get(member, frozenset()) & valid), member)
    )
    quotas = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(by_holdings)}
    kept: dict[str, list[int]] = {member: [] for member in members}
    taken: set[int] = set()
    for member in members:
        for partition in sorted(previous.get(member, frozenset()) & valid):
            if partition not in taken and len(kept[member]) < quotas[member]:
                kept[member].append(partition)
                taken.add(partition)
    free = [partition for partition in partitions if partition not in taken]
    for member in members:
        while len(kept[member]) < quotas[member]:
            kept[member].append(free.pop(0))
    return {member: frozenset(owned) for member, owned in kept.items()}


def _withhold_moves(
    members: Sequence[str],
    target: Mapping[str, frozenset[int]],
    previous: Mapping[str, frozenset[int]],
) -> Assignment:
    owners = {partition: member for member in members for partition in previous.get(member, ())}
    withheld = frozenset(
        partition
        for member in members
        for partition in target[member]
        if owners.get(partition, member) != member
    )
    granted = {member: target[member] - withheld for member in members}
    return Assignment(granted=MappingProxyType(granted), withheld=withheld)
