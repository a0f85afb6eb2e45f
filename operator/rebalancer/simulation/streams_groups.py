"""A model of a Kafka Streams group (KIP-1071, group.protocol=streams) starting from Empty.

What it models (Apache Kafka 4.4's GroupMetadataManager.streamsGroupHeartbeat and
streams/assignor/StickyTaskAssignor):
- no join barrier: a member's first heartbeat is its join, and bumps the group epoch;
- the first join of an Empty group schedules the group's initial delay
  (streams.initial.rebalance.delay.ms) with `scheduleIfAbsent`: later joins do not restart it.
  While it runs the target is empty (status ASSIGNMENT_DELAYED); when it fires the target is
  computed for every member present. With a delay of 0 the first join is assigned at once;
- after that each join asks for a new target, computed no sooner than ASSIGNMENT_INTERVAL_MS
  after the last (group.streams.assignment.interval.ms, 1000 ms by default), as KIP-848's;
- the sticky task assignor balances the active tasks: in partition order each task stays with
  its previous owner while that owner is under the quota (the tasks per member, rounded up,
  recomputed for the rest as members fill up), and the rest go to the least-loaded member;
- members learn their target at their own heartbeats (the group's heartbeat interval): an owner
  first revokes what it no longer has (the task stops being processed), and the task goes to its
  new owner at that owner's next heartbeat after the revocation. A task that moved is processed
  again only after its new owner has restored its store from the changelog (`restore_ms`).
  A task's first owner restores what it would at any delay: that is left out.

Not modelled: standby and warm-up tasks (a member within group.streams.acceptable.recovery.lag of
a store takes its task at once, as small stores are), stateless tasks, several stream threads per
instance. Times are milliseconds in, seconds out, counted from the first join.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rebalancer.simulation.kip848_groups import ASSIGNMENT_INTERVAL_MS, HORIZON_AFTER_LAST_JOIN_MS


@dataclass(frozen=True)
class StreamsStartup:
    """What a streams group's start-up cost, from the first join.

    time_to_stable_s: when the last task was processed by its final owner (its restoration done)
    and every member held its target; None if the horizon passed first.
    tasks_moved: tasks handed from one owner to another. unowned_task_s: task-seconds no member
    processed, from the first join; moved_unowned_task_s: the part of it after a task had first
    been processed (each move's revocation, hand-over and restoration). assignments: targets
    computed.
    """

    time_to_stable_s: float | None
    tasks_moved: int
    unowned_task_s: float
    moved_unowned_task_s: float
    assignments: int


def sticky_targets(
    tasks: int, members: Sequence[str], previous: Mapping[str, set[int]]
) -> dict[str, set[int]]:
    """The sticky assignor's active tasks per member (one member per process, stateful tasks of
    one subtopology): previous owners keep theirs up to the quota, the rest go to the least
    loaded (ties: the earlier member in `members`)."""
    target: dict[str, set[int]] = {name: set() for name in members}
    if not members:
        return target
    order = {name: index for index, name in enumerate(members)}
    owner_of = {task: name for name, owned in previous.items() if name in target for task in owned}
    total, capacity = tasks, len(members)
    quota = math.ceil(total / capacity)
    left: list[int] = []
    for task in range(tasks):
        owner = owner_of.get(task)
        if owner is None or len(target[owner]) >= quota:
            left.append(task)
            continue
        target[owner].add(task)
        if len(target[owner]) == quota:
            # A member at the quota leaves the pool; the rest share what is left.
            capacity -= 1
            total -= quota
            quota = math.ceil(total / capacity) if capacity else 0
    for task in left:
        least = min(target, key=lambda name: (len(target[name]), order[name]))
        target[least].add(task)
    return target


@dataclass
class _Group:
    tasks: int
    heartbeat_ms: float
    restore_ms: float
    order: list[str] = field(default_factory=list)
    owned: dict[str, set[int]] = field(default_factory=dict)
    target: dict[str, set[int]] = field(default_factory=dict)
    owner: dict[int, str] = field(default_factory=dict)
    processing: set[int] = field(default_factory=set)
    ever_processed: set[int] = field(default_factory=set)
    # (time, order, kind, name or task): kinds join, heartbeat, assign, delay, ready.
    events: list[tuple[float, int, str, str]] = field(default_factory=list)
    sequence: int = 0
    delay_running: bool = False
    assignment_due: bool = False
    last_assignment_ms: float | None = None
    assignments: int = 0
    moves: int = 0
    # A moved task whose store its new owner restores: the token of that hand-over's event.
    restoring: dict[int, int] = field(default_factory=dict)
    unowned_ms: float = 0.0
    moved_unowned_ms: float = 0.0
    clock_ms: float = 0.0
    last_change_ms: float = 0.0

    def push(self, at_ms: float, kind: str, name: str = "") -> None:
        heapq.heappush(self.events, (at_ms, self.sequence, kind, name))
        self.sequence += 1

    def advance(self, now_ms: float) -> None:
        span = max(now_ms - self.clock_ms, 0.0)
        idle = [task for task in range(self.tasks) if task not in self.processing]
        self.unowned_ms += span * len(idle)
        self.moved_unowned_ms += span * sum(1 for task in idle if task in self.ever_processed)
        self.clock_ms = max(self.clock_ms, now_ms)

    def assign(self, now_ms: float) -> None:
        self.target = sticky_targets(self.tasks, self.order, self.target)
        self.last_assignment_ms = now_ms
        self.assignments += 1

    def heartbeat(self, name: str, now_ms: float) -> None:
        owned, target = self.owned[name], self.target.get(name, set())
        for task in sorted(owned - target):
            owned.discard(task)
            self.owner.pop(task, None)
            self.processing.discard(task)
            self.restoring.pop(task, None)
            self.last_change_ms = now_ms
        for task in sorted(target - owned):
            if task in self.owner:
                continue  # its owner has not revoked it yet
            owned.add(task)
            self.owner[task] = name
            self.last_change_ms = now_ms
            if task in self.ever_processed:
                self.moves += 1
                self.restoring[task] = self.sequence
                self.push(now_ms + self.restore_ms, "ready", f"{task}:{self.sequence}")
            else:
                self._start(task, now_ms)

    def ready(self, event: str, now_ms: float) -> None:
        """A restoration done: the task is processed, unless it moved on meanwhile."""
        task, token = (int(part) for part in event.split(":"))
        if self.restoring.get(task) == token:
            del self.restoring[task]
            self._start(task, now_ms)

    def _start(self, task: int, now_ms: float) -> None:
        self.processing.add(task)
        self.ever_processed.add(task)
        self.last_change_ms = now_ms

    def settled(self) -> bool:
        return (
            not self.delay_running
            and not self.assignment_due
            and self.assignments > 0
            and len(self.processing) == self.tasks
            and all(self.owned[name] == self.target.get(name, set()) for name in self.order)
        )


def run_streams_startup(
    *,
    joins_ms: Sequence[float],
    tasks: int,
    initial_delay_ms: float,
    heartbeat_ms: float,
    restore_ms: float,
) -> StreamsStartup:
    """An Empty streams group taking one new member per join time (ms after the first)."""
    if not joins_ms:
        raise ValueError("joins_ms: a start-up needs at least one join")
    group = _Group(tasks=max(tasks, 1), heartbeat_ms=heartbeat_ms, restore_ms=restore_ms)
    first = min(joins_ms)
    for index, at_ms in enumerate(sorted(joins_ms)):
        group.push(at_ms - first, "join", f"member-{index}")
    horizon = max(joins_ms) - first + HORIZON_AFTER_LAST_JOIN_MS
    waiting = len(joins_ms)
    while group.events:
        now_ms, _, kind, name = heapq.heappop(group.events)
        if now_ms > horizon:
            return _result(group, settled=False)
        group.advance(now_ms)
        if kind == "join":
            waiting -= 1
            _join(group, name, now_ms, initial_delay_ms)
        elif kind in ("assign", "delay"):
            group.assignment_due = group.delay_running = False
            group.assign(now_ms)
        elif kind == "ready":
            group.ready(name, now_ms)
        else:
            group.heartbeat(name, now_ms)
            group.push(now_ms + heartbeat_ms, "heartbeat", name)
        if not waiting and group.settled():
            return _result(group, settled=True)
    return _result(group, settled=False)


def _join(group: _Group, name: str, now_ms: float, initial_delay_ms: float) -> None:
    """A member's first heartbeat: it joins, and the epoch it bumps wants a new target."""
    empty = not group.order
    group.order.append(name)
    group.owned[name] = set()
    if empty and initial_delay_ms > 0:
        group.delay_running = True
        group.push(now_ms + initial_delay_ms, "delay")
    elif not group.delay_running and not group.assignment_due:
        last = group.last_assignment_ms
        if last is None or now_ms - last >= ASSIGNMENT_INTERVAL_MS:
            group.assign(now_ms)
        else:
            group.assignment_due = True
            group.push(last + ASSIGNMENT_INTERVAL_MS, "assign")
    group.heartbeat(name, now_ms)
    group.push(now_ms + group.heartbeat_ms, "heartbeat", name)


def _result(group: _Group, *, settled: bool) -> StreamsStartup:
    return StreamsStartup(
        time_to_stable_s=group.last_change_ms / 1000.0 if settled else None,
        tasks_moved=group.moves,
        unowned_task_s=group.unowned_ms / 1000.0,
        moved_unowned_task_s=group.moved_unowned_ms / 1000.0,
        assignments=group.assignments,
    )
