"""A model of a KIP-848 consumer group (group.protocol=consumer) taking new members.

What it models (KIP-848; Apache Kafka's GroupMetadataManager and the client's membership
manager, Kafka 4.x):
- no join barrier and no initial delay: a member's first heartbeat is its join;
- each join bumps the group epoch and the coordinator computes a new target assignment with the
  uniform assignor (each member an even share, members keeping what they have where they can),
  no sooner than ASSIGNMENT_INTERVAL_MS after the last one (consumer.assignment.interval.ms,
  KIP-1263), so joins close together share a target;
- members learn their target only at their own heartbeats (consumer.heartbeat.interval.ms): a
  member first revokes what it no longer owns (the partition is then unowned), and a partition
  goes to its new owner at that owner's next heartbeat after it was revoked.
A run counts from the change; its members already in the group own even shares then.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rebalancer.simulation.results import RunCost

# consumer.assignment.interval.ms's default (KIP-1263, Kafka 4.3+).
ASSIGNMENT_INTERVAL_MS = 1000.0
# Nothing is simulated this long after the last join: a guard against a model bug.
HORIZON_AFTER_LAST_JOIN_MS = 3_600_000.0
_Push = Callable[[float, str, str], None]


@dataclass
class _Member:
    name: str
    owned: set[int] = field(default_factory=set)
    target: set[int] = field(default_factory=set)


@dataclass
class _Group:
    partitions: int
    members: dict[str, _Member] = field(default_factory=dict)
    owner: dict[int, str] = field(default_factory=dict)
    ever_owned: set[int] = field(default_factory=set)
    last_assignment_ms: float | None = None
    assignment_due_ms: float | None = None
    assignments: int = 0
    # The epochs at which some member's own partitions changed: what members see of the
    # rebalances (an epoch that reaches nobody before the next is not one).
    seen_epochs: set[int] = field(default_factory=set)
    unowned_ps: float = 0.0
    stop_the_world_ps: float = 0.0
    clock_ms: float = 0.0
    last_change_ms: float = 0.0

    def advance(self, now_ms: float) -> None:
        """Count the partition-seconds without an owner since the last event."""
        span_s = max(now_ms - self.clock_ms, 0.0) / 1000.0
        unowned = [p for p in range(self.partitions) if p not in self.owner]
        self.unowned_ps += span_s * len(unowned)
        self.stop_the_world_ps += span_s * sum(1 for p in unowned if p in self.ever_owned)
        self.clock_ms = max(self.clock_ms, now_ms)

    def assign(self) -> None:
        """The uniform assignor's target: even shares, each member keeping what it can.

        The shares one partition larger than the others go to the members that hold the most
        already (Kafka's uniform assignor balances by moving as few partitions as it can): a
        new member takes its share from the fullest, and the others keep theirs.
        """
        if not self.members:
            return
        base, extra = divmod(self.partitions, len(self.members))
        fullest = sorted(self.members, key=lambda name: (-len(self.members[name].target), name))
        quota = {name: base + (1 if index < extra else 0) for index, name in enumerate(fullest)}
        names = sorted(self.members)
        taken: set[int] = set()
        for name in names:
            member = self.members[name]
            kept = sorted(member.target)[: quota[name]]
            member.target = set(kept)
            taken.update(kept)
        free = [p for p in range(self.partitions) if p not in taken]
        for name in names:
            member = self.members[name]
            while len(member.target) < quota[name] and free:
                member.target.add(free.pop(0))
        self.assignments += 1

    def heartbeat(self, member: _Member, now_ms: float) -> None:
        before = set(member.owned)
        for partition in sorted(member.owned - member.target):
            member.owned.discard(partition)
            self.owner.pop(partition, None)
        for partition in sorted(member.target - member.owned):
            if partition not in self.owner:
                member.owned.add(partition)
                self.owner[partition] = member.name
                self.ever_owned.add(partition)
        if member.owned != before:
            self.last_change_ms = now_ms
            self.seen_epochs.add(self.assignments)

    def reconciled(self) -> bool:
        return self.assignment_due_ms is None and all(
            member.owned == member.target for member in self.members.values()
        )


def run_kip848(
    *,
    members: int,
    joins_ms: Sequence[float],
    partitions: int,
    heartbeat_ms: float,
    seed: int,
) -> RunCost:
    """`members` already in the group at the change, then one new member per join time."""
    rng = random.Random(seed)
    group = _Group(partitions)
    events: list[tuple[float, int, str, str]] = []  # (time, order, kind, member)
    order = 0

    def push(at_ms: float, kind: str, name: str) -> None:
        nonlocal order
        heapq.heappush(events, (at_ms, order, kind, name))
        order += 1

    for index in range(members):
        name = f"member-{index}"
        group.members[name] = _Member(name)
        push(rng.uniform(0.0, heartbeat_ms), "heartbeat", name)
    if members:
        group.assign()
        for member in group.members.values():
            member.owned = set(member.target)
            for partition in member.owned:
                group.owner[partition] = member.name
                group.ever_owned.add(partition)
        group.assignments = 0
        group.last_assignment_ms = -ASSIGNMENT_INTERVAL_MS
    for index, at_ms in enumerate(sorted(joins_ms)):
        push(at_ms, "join", f"joiner-{index}")
    last_join = max(joins_ms, default=0.0)
    waiting = len(joins_ms)
    while events:
        now_ms, _, kind, name = heapq.heappop(events)
        if now_ms > last_join + HORIZON_AFTER_LAST_JOIN_MS:
            break
        group.advance(now_ms)
        if kind == "assign":
            group.assignment_due_ms = None
            group.last_assignment_ms = now_ms
            group.assign()
            continue
        if kind == "join":
            waiting -= 1
            group.members[name] = _Member(name)
            _ask_for_assignment(group, now_ms, push)
        group.heartbeat(group.members[name], now_ms)
        push(now_ms + heartbeat_ms, "heartbeat", name)
        if not waiting and group.reconciled():
            break
    return RunCost(
        unowned_ps=group.unowned_ps,
        stop_the_world_ps=group.stop_the_world_ps,
        rebalances=len(group.seen_epochs),
        stable_s=group.last_change_ms / 1000.0,
    )


def _ask_for_assignment(group: _Group, now_ms: float, push: _Push) -> None:
    """A join bumps the epoch: a new target now, or once the assignment interval has passed."""
    if group.assignment_due_ms is not None:
        return
    last = group.last_assignment_ms
    if last is None or now_ms - last >= ASSIGNMENT_INTERVAL_MS:
        group.last_assignment_ms = now_ms
        group.assign()
        return
    group.assignment_due_ms = last + ASSIGNMENT_INTERVAL_MS
    push(group.assignment_due_ms, "assign", "")
