"""Who owns which partition as member reports tell it, and how long partitions went without
an owner in each rebalance: the stop-the-world estimate of a rebalance record. Pure.

A member's report carries its whole assignment after the event (docs/member-reports.md), so
two reports of one member differ by what it gave up (revoked, lost, stopped) and what it was
given (assigned). A partition given up at t1 and assigned again at t2 stood still for t2 - t1;
those partition-seconds count on the rebalance (generation) whose assignment ended the wait.
With the eager protocol that is the rebalance that revoked them; with cooperative-sticky, the
follow-up rebalance that hands the revoked partitions to their new owners.

A partition assigned without a timed release is unknown: its previous owner crashed (no
report gives it up; its heartbeats just stopped), the operator started after the release, or
the partition is new. A generation with any unknown partition has no estimate, nor has one
whose assignments, as reported so far, do not cover every partition of the group (a member
has not reported it yet: what it was given is not known).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from rebalancer.structs.brokers import TopicPartition


@dataclass(frozen=True)
class StallTally:
    """What the assignments of one generation ended: partition-seconds without an owner."""

    generation: int
    partition_seconds: float = 0.0
    # Partitions assigned in this generation that had an owner before it (released or not).
    moved: int = 0
    # Among them, those whose release no report timed (yet): the estimate is unknown.
    unknown: int = 0
    # How many partitions each member was assigned in this generation, as it reported.
    assigned: Mapping[str, int] = field(default_factory=dict)

    def estimate(self, partitions: int | None) -> float | None:
        """Partition-seconds the generation's assignments ended, or None when not known: some
        release untimed, or the assignments reported so far short of the group's `partitions`.
        """
        if self.unknown or partitions is None or sum(self.assigned.values()) < partitions:
            return None
        return round(self.partition_seconds, 3)


class PartitionStalls:
    """Partition owners and per-generation stall tallies for one Kafka group, bounded: one
    entry per partition and member, and the tallies of the last `max_generations`."""

    def __init__(self, max_generations: int = 256) -> None:
        self._max_generations = max_generations
        self._holdings: dict[str, frozenset[TopicPartition]] = {}
        # The member id each member reported last: a new one is a new incarnation (a restart).
        self._incarnations: dict[str, str] = {}
        self._owner: dict[TopicPartition, str] = {}
        # Partitions given up and not assigned again yet, since when (the member's clock).
        self._free_since: dict[TopicPartition, float] = {}
        # Assigned before the previous owner's report of giving it up arrived (reports of
        # different members arrive in any order): (previous owner, generation, assigned at).
        self._awaiting: dict[TopicPartition, tuple[str, int, float]] = {}
        self._tallies: OrderedDict[int, StallTally] = OrderedDict()

    def note(
        self,
        member: str,
        *,
        incarnation: str,
        assigned: bool,
        generation: int,
        partitions: Iterable[TopicPartition],
        at: float,
    ) -> None:
        """One report of `member`: its whole assignment after the event, at its own clock.

        `assigned` marks an assignment of `generation` (the end of a rebalance for it); any
        other report (revoked, lost, stopped, heartbeat) only says what the member holds.
        `incarnation` is its member id: under a new one (a restarted consumer) what the old
        one held was never given up by a report, and stays unknown to whoever got it.
        """
        if incarnation and self._incarnations.get(member, incarnation) != incarnation:
            self._drop(member)
        if incarnation:
            self._incarnations[member] = incarnation
        old = self._holdings.get(member, frozenset())
        new = frozenset(partitions)
        for partition in sorted(old - new):
            self._release(member, partition, at)
        counted = assigned and generation >= 0
        if counted:
            tally = self._tally(generation)
            self._tallies[generation] = replace(
                tally, assigned={**tally.assigned, member: len(new)}
            )
        for partition in sorted(new - old):
            if counted:
                self._assign(member, partition, generation, at)
            else:
                # A heartbeat showing a partition the book did not know the member had: its
                # assignment was missed (the operator started since). Only the owner is news.
                self._owner[partition] = member
                self._free_since.pop(partition, None)
        if new:
            self._holdings[member] = new
        else:
            self._holdings.pop(member, None)

    def forget(self, alive: Iterable[str]) -> None:
        """Drop members no longer reporting: what they held stays unknown to whoever gets it."""
        keep = set(alive)
        for member in {*self._holdings, *self._incarnations} - keep:
            self._drop(member)
            self._incarnations.pop(member, None)

    def _drop(self, member: str) -> None:
        self._holdings.pop(member, None)
        for partition in [p for p, owner in self._owner.items() if owner == member]:
            del self._owner[partition]
        for partition, (owner, _, _) in list(self._awaiting.items()):
            if owner == member:
                del self._awaiting[partition]

    def tallies(self) -> dict[int, StallTally]:
        return dict(self._tallies)

    def _tally(self, generation: int) -> StallTally:
        tally = self._tallies.get(generation)
        if tally is None:
            tally = StallTally(generation)
            self._tallies[generation] = tally
            while len(self._tallies) > self._max_generations:
                self._tallies.popitem(last=False)
        return tally

    def _add(self, generation: int, seconds: float, moved: int, unknown: int) -> None:
        tally = self._tally(generation)
        self._tallies[generation] = replace(
            tally,
            partition_seconds=tally.partition_seconds + max(seconds, 0.0),
            moved=tally.moved + moved,
            unknown=max(tally.unknown + unknown, 0),
        )

    def _release(self, member: str, partition: TopicPartition, at: float) -> None:
        waiting = self._awaiting.get(partition)
        if waiting is not None and waiting[0] == member:
            # Its new owner reported first: the wait ran from this release to that assignment.
            del self._awaiting[partition]
            _, generation, assigned_at = waiting
            if generation in self._tallies:
                self._add(generation, assigned_at - at, 0, -1)
            return
        if self._owner.get(partition) == member:
            del self._owner[partition]
            self._free_since[partition] = at

    def _assign(self, member: str, partition: TopicPartition, generation: int, at: float) -> None:
        previous = self._owner.get(partition)
        self._owner[partition] = member
        released = self._free_since.pop(partition, None)
        if released is not None:
            self._add(generation, at - released, 1, 0)
        elif previous is not None and previous != member:
            self._awaiting[partition] = (previous, generation, at)
            self._add(generation, 0.0, 1, 1)
        elif previous is None:
            # Never owned as far as the book knows: a new group's first assignment, a new
            # partition, or one released before the operator started.
            self._add(generation, 0.0, 1, 1)
