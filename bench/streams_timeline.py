"""What a Kafka Streams fleet's own events say about one change: which instance ran which task
when, so how long tasks had no running owner, how often tasks moved, and what restoring cost.

The example application (`examples/streams-app`) prints a JSON line on each KafkaStreams state
change, with the instance's active tasks when the new state is RUNNING, and one per restored
store partition. An instance holds the tasks of its last RUNNING state while it is RUNNING or
REBALANCING (Kafka Streams rebalances cooperatively: the tasks it keeps go on being processed),
and none from PENDING_SHUTDOWN on. A task has an owner while any instance holds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HOLDING = frozenset({"RUNNING", "REBALANCING"})


@dataclass(frozen=True)
class Incarnation:
    """One pod's life: its name (the same across a StatefulSet's replacements) and events."""

    pod: str
    events: Sequence[dict[str, Any]]


@dataclass(frozen=True)
class Change:
    at: float
    incarnation: int
    holds: frozenset[str]


@dataclass(frozen=True)
class Figures:
    stable_at: float | None  # the last state change in the window, when every task had an owner
    unowned_task_s: float
    tasks_moved: int
    restored_tasks: int
    restored_records: int
    restore_s: float
    state_changes: int


def changes(lives: Sequence[Incarnation]) -> list[Change]:
    """Every change of what an incarnation holds, in time order."""
    found: list[Change] = []
    for index, life in enumerate(lives):
        held: frozenset[str] = frozenset()
        for event in life.events:
            if event.get("event") != "state":
                continue
            state = str(event.get("to"))
            if state == "RUNNING":
                held = frozenset(str(task) for task in event.get("active") or [])
            found.append(
                Change(float(event["at"]), index, held if state in HOLDING else frozenset())
            )
    return sorted(found, key=lambda change: change.at)


def owners_at(lives: Sequence[Incarnation], moments: Sequence[Change], at: float) -> dict[str, str]:
    """Task -> the pod that held it at `at` (any one, where two did)."""
    holding: dict[int, frozenset[str]] = {}
    for change in moments:
        if change.at > at:
            break
        holding[change.incarnation] = change.holds
    return {task: lives[i].pod for i, tasks in sorted(holding.items()) for task in tasks}


def unowned_task_seconds(
    moments: Sequence[Change], tasks: frozenset[str], t0: float, end: float
) -> float:
    holding: dict[int, frozenset[str]] = {}
    total, last = 0.0, t0
    for change in [*moments, Change(end, -1, frozenset())]:
        at = min(max(change.at, t0), end)
        if at > last:
            owned = frozenset().union(*holding.values()) if holding else frozenset()
            total += (at - last) * len(tasks - owned)
            last = at
        if change.incarnation >= 0:
            holding[change.incarnation] = change.holds
    return total


def moves(lives: Sequence[Incarnation], moments: Sequence[Change], t0: float, end: float) -> int:
    """How often a task came to run on another pod than the one that ran it last; a task's
    first owner (a cold start's) is no move."""
    last = owners_at(lives, moments, t0)
    count = 0
    for change in moments:
        if not t0 < change.at <= end:
            continue
        pod = lives[change.incarnation].pod
        for task in change.holds:
            if last.get(task, pod) != pod:
                count += 1
            last[task] = pod
    return count


def restored(lives: Iterable[Incarnation], t0: float, end: float) -> tuple[int, int, float]:
    """(task stores restored with records, records restored, seconds spent) in the window."""
    tasks = records = 0
    seconds = 0.0
    for life in lives:
        for event in life.events:
            if event.get("event") != "restored" or not t0 <= float(event["at"]) <= end:
                continue
            count = int(event.get("records") or 0)
            tasks += count > 0
            records += count
            seconds += float(event.get("seconds") or 0.0)
    return tasks, records, seconds


def figures(lives: Sequence[Incarnation], tasks: frozenset[str], t0: float, end: float) -> Figures:
    moments = changes(lives)
    window = [change for change in moments if t0 < change.at <= end]
    covered = set(owners_at(lives, moments, end)) >= tasks
    stable_at = max((change.at for change in window), default=t0) if covered else None
    restored_tasks, records, seconds = restored(lives, t0, end)
    return Figures(
        stable_at=stable_at,
        unowned_task_s=unowned_task_seconds(moments, tasks, t0, stable_at or end),
        tasks_moved=moves(lives, moments, t0, end),
        restored_tasks=restored_tasks,
        restored_records=records,
        restore_s=seconds,
        state_changes=len(window),
    )
