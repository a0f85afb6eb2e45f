"""Pod-start and pod-stop history records from what Kubernetes says about the consumer pods.
Pure.

Every run of a pod's consumer container (structs.history_pods) is one start and, once it ends,
one stop. A start is `state.running.startedAt`; a stop is the earliest of the pod's
`deletionTimestamp` (it was told to stop: `departure` `leave`) and the run's
`terminated.finishedAt` (exit code 0: `leave`; any other: `crash`), or, for a run that ended
before a restart, `lastState.terminated`. The start of a pod's first run also carries, as its
`started_at`, when the pod reached its join gate (the gate's init container started), if it has
one. A pod that vanished between two looks stopped when its member reported `stopped`
(`leave`: it closed cleanly), or else at the look that missed it (`departure` unknown). Each
record carries a key (`pod-start/<uid>/<run>`, `pod-stop/<uid>/<run>`): the same fact always
gets the same key, so an operator that reads the same pods again, or restarts, writes nothing
twice (reconcilers.learning checks the store once per process) and readers can drop a repeat.

A start waits up to PAIR_WAIT_SECONDS for the member's join, to share its batch (the stagger
batch, or the start-up burst: planning.history_records), so the learning job can pair them
into a start-up latency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rebalancer.planning.history_records import JoinContext, RecordedJoin
from rebalancer.planning.raw_fields import field_at as _get
from rebalancer.planning.sidecar_templates import SIDECAR_CONTAINER
from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer.structs.history import RebalanceEvent, RecordType, SettingsInForce, member_event
from rebalancer.structs.history_pods import PodLifecycle
from rebalancer.structs.times import read_rfc3339
from rebalancer.structs.workloads import PodView

KUBERNETES_SOURCE = "kubernetes"
# A start is written once its member joined, or this long after it started without a join.
PAIR_WAIT_SECONDS = 120.0
# Members' clocks and the kubelet's differ a little: a join this much before a start is its.
CLOCK_SLACK_SECONDS = 1.0
# Starts waiting for their joins, at most (one per pod run; more pods than this are a fleet
# whose starts are written unpaired).
MAX_WAITING = 2048


def _time(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return read_rfc3339(value)


def _code(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def pod_lifecycle(pod: Mapping[str, Any]) -> PodLifecycle:
    """The consumer container's runs as the pod's status gives them."""
    containers = _get(pod, "spec", "containers") or []
    names = [_get(item, "name") for item in containers if isinstance(item, Mapping)]
    consumer = next((n for n in names if isinstance(n, str) and n != SIDECAR_CONTAINER), None)
    statuses = _get(pod, "status", "containerStatuses") or []
    status = next(
        (item for item in statuses if consumer is not None and _get(item, "name") == consumer),
        None,
    )
    restarts = _get(status, "restartCount")
    terminated = _get(status, "state", "terminated")
    previous = _get(status, "lastState", "terminated")
    started = _get(status, "state", "running", "startedAt") or _get(terminated, "startedAt")
    gates = _get(pod, "status", "initContainerStatuses") or []
    gate = next((item for item in gates if _get(item, "name") == GATE_CONTAINER), None)
    gate_started = _get(gate, "state", "running", "startedAt") or _get(
        gate, "state", "terminated", "startedAt"
    )
    return PodLifecycle(
        container=consumer,
        scheduled_at=_time(_get(pod, "status", "startTime")),
        restarts=restarts if isinstance(restarts, int) and restarts >= 0 else 0,
        started_at=_time(started),
        finished_at=_time(_get(terminated, "finishedAt")),
        exit_code=_code(_get(terminated, "exitCode")),
        previous_finished_at=_time(_get(previous, "finishedAt")),
        previous_exit_code=_code(_get(previous, "exitCode")),
        deleting_at=_time(_get(pod, "metadata", "deletionTimestamp")),
        gate_started_at=_time(gate_started),
    )


@dataclass(frozen=True)
class PodMemory:
    """What the operator wrote about one pod (by uid) so far."""

    name: str
    run: int  # the run seen last
    started: int = -1  # the last run whose start is written or waiting
    stopped: int = -1  # the last run whose stop is written
    since: float | None = None  # when the run seen last started


@dataclass(frozen=True)
class PodTracking:
    """Pods seen at the last look (bounded by the workload's pods) and starts awaiting a join."""

    pods: Mapping[str, PodMemory] = field(default_factory=dict)
    waiting: tuple[RebalanceEvent, ...] = ()
    looked: bool = False


@dataclass(frozen=True)
class PodRecordContext:
    group: JoinContext
    members: int
    state: str
    partitions: int | None
    settings: SettingsInForce


def start_key(uid: str, run: int) -> str:
    return f"pod-start/{uid}/{run}"


def stop_key(uid: str, run: int) -> str:
    return f"pod-stop/{uid}/{run}"


def _event(
    record_type: RecordType,
    context: PodRecordContext,
    member: str,
    at: float,
    key: str,
    departure: str | None = None,
) -> RebalanceEvent:
    return member_event(
        record_type,
        namespace=context.group.namespace,
        name=context.group.name,
        group_id=context.group.group_id,
        cluster=context.group.cluster,
        member=member,
        at=at,
        members=context.members,
        state=context.state,
        source=KUBERNETES_SOURCE,
        departure=departure,
        partitions=context.partitions,
        settings=context.settings,
        record_key=key,
    )


def _departure_at(life: PodLifecycle) -> tuple[float, str] | None:
    """When and how the current run ended or was told to end, if it did."""
    finished, deleting = life.finished_at, life.deleting_at
    if finished is not None and (deleting is None or finished < deleting):
        return finished, "leave" if life.exit_code == 0 else "crash"
    if deleting is not None:
        return deleting, "leave"
    return None


def _look(
    pod: PodView, memory: PodMemory | None, context: PodRecordContext
) -> tuple[list[RebalanceEvent], list[RebalanceEvent], PodMemory]:
    """(stops, starts, memory) for one pod at one look."""
    life = pod.lifecycle
    run = life.restarts
    memory = memory or PodMemory(pod.name, run)
    stops: list[RebalanceEvent] = []
    starts: list[RebalanceEvent] = []
    started, stopped = memory.started, memory.stopped
    if run >= 1 and life.previous_finished_at is not None and stopped < run - 1:
        departure = "leave" if life.previous_exit_code == 0 else "crash"
        stops.append(
            _event(
                RecordType.POD_STOP,
                context,
                pod.name,
                life.previous_finished_at,
                stop_key(pod.uid, run - 1),
                departure,
            )
        )
        stopped = run - 1
    if life.started_at is not None and started < run:
        start = _event(
            RecordType.POD_START, context, pod.name, life.started_at, start_key(pod.uid, run)
        )
        if run == 0 and life.gate_started_at is not None:
            # The first run passed the gate: when the pod reached it, for the planner's
            # measured arrivals (planning.startup_history).
            start = replace(start, started_at=life.gate_started_at)
        starts.append(start)
        started = run
    ended = _departure_at(life)
    if ended is not None and stopped < run and life.started_at is not None:
        at, departure = ended
        stops.append(
            _event(RecordType.POD_STOP, context, pod.name, at, stop_key(pod.uid, run), departure)
        )
        stopped = run
    return stops, starts, PodMemory(pod.name, run, started, stopped, life.started_at)


def _paired(start: RebalanceEvent, joins: Sequence[RecordedJoin]) -> RecordedJoin | None:
    """The member's first join after `start`, if it came within PAIR_WAIT_SECONDS."""
    after = [
        join
        for join in joins
        if join.identity == start.member
        and start.detected_at - CLOCK_SLACK_SECONDS
        <= join.at
        <= start.detected_at + PAIR_WAIT_SECONDS
    ]
    return min(after, key=lambda join: join.at, default=None)


def track_pods(
    tracking: PodTracking,
    pods: Sequence[PodView] | None,
    *,
    now: float,
    context: PodRecordContext,
    joins: Sequence[RecordedJoin],
    stopped: Mapping[str, float] | None = None,
) -> tuple[list[RebalanceEvent], PodTracking]:
    """Records to write now, and the tracking to keep.

    `pods` are the workload's pods at this look, or None when the operator did not look this
    time (only starts waiting for their joins are settled then). Pods of an absent workload are
    an empty list: each running one stopped. `stopped` holds each member's last `stopped`
    report's time.
    """
    closed = stopped or {}
    events: list[RebalanceEvent] = []
    waiting = list(tracking.waiting)
    memories = dict(tracking.pods)
    if pods is not None:
        seen: dict[str, PodMemory] = {}
        for pod in pods:
            if not pod.uid:
                continue
            stops, starts, seen[pod.uid] = _look(pod, memories.get(pod.uid), context)
            events.extend(stops)
            waiting.extend(starts)
        for uid, memory in memories.items():
            if uid in seen or memory.started < memory.run or memory.stopped >= memory.run:
                continue
            # Gone between two looks while its container ran. Its member said it stopped (a
            # clean close), or else it stopped by the look that missed it, how unknown.
            at, departure = now, None
            said = closed.get(memory.name)
            if said is not None and said >= (memory.since or 0.0) - CLOCK_SLACK_SECONDS:
                at, departure = min(said, now), "leave"
            key = stop_key(uid, memory.run)
            events.append(_event(RecordType.POD_STOP, context, memory.name, at, key, departure))
        memories = seen
    still: list[RebalanceEvent] = []
    for start in waiting:
        join = _paired(start, joins)
        if join is not None:
            events.append(replace(start, batch_id=join.batch_id, rollout_id=join.rollout_id))
        elif now - start.detected_at >= PAIR_WAIT_SECONDS or len(waiting) > MAX_WAITING:
            events.append(start)
        else:
            still.append(start)
    events.sort(key=lambda event: (event.detected_at, event.record_type.value))
    looked = tracking.looked or pods is not None
    return events, PodTracking(pods=memories, waiting=tuple(still), looked=looked)
