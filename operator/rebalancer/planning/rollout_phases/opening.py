"""The rollout planner's BatchOpening phase: a batch released by the gate queue, a StatefulSet
replace, a Deployment step or a scale step."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.planning.autoscalers import hpa_quiet_at
from rebalancer.planning.identity_slots import (
    encode_slots,
    hand_out,
    remembered_slots,
)
from rebalancer.planning.rollout_actions import (
    Action,
    DeletePods,
    OpenGate,
    PauseDeployment,
    ResumeDeployment,
    ScaleWorkload,
    SetStatefulSetPartition,
)
from rebalancer.planning.rollout_choices import lets_go_together, released_on_arrival
from rebalancer.planning.rollout_phases.common import (
    Observation,
    Outcome,
    Phase,
    batch_size,
    chunk,
    label,
    later_ordinals,
    missing,
    names,
)
from rebalancer.planning.rollout_phases.stopped import fail
from rebalancer.planning.rollout_plans import gated, held_pods, through_pods
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutState
from rebalancer.structs.gates import GateState
from rebalancer.structs.workloads import PodView, WorkloadView

# A batch's new pod that no scheduler has looked at for this long is created again (see
# unnoticed_replacements); a scheduler judges a new pod within a second or two.
UNNOTICED_POD_SECONDS = 20.0


def opening(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """BatchOpening -> BatchJoining once the batch is released by its mechanism, or Failed
    past the batch's deadline."""
    match state.mechanism:
        case Mechanism.STATEFULSET_REPLACE:
            opener = open_statefulset
        case Mechanism.DEPLOYMENT_STEPS:
            opener = open_deployment_step
        case Mechanism.SCALE_STEPS:
            opener = open_scale_step
        case _:
            opener = open_gates
    after, actions = opener(state, observation, now, workload)
    if after.phase is Phase.BATCH_OPENING and state.deadline and now >= state.deadline:
        return fail(
            state,
            observation,
            now,
            "BatchNotReleased",
            f"batch {state.batch} of {state.batches} could not be released within "
            f"{observation.setup.policy.batch_deadline_seconds} s: {missing(state, workload)}",
            actions,
        )
    return after, actions


def released(
    state: RolloutState, observation: Observation, now: float, pods: Sequence[str]
) -> RolloutState:
    """The batch of `pods` released: on to BatchJoining, its deadline set."""
    group = observation.group
    return state.moved(
        phase=Phase.BATCH_JOINING,
        opened=tuple(pods),
        phase_since=now,
        opened_at=now,
        deadline=now + observation.setup.policy.batch_deadline_seconds,
        generation_at_open=group.generation if group is not None else None,
    )


def open_gates(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """The gate queue: the batch opened once its pods wait at their gates."""
    batch = label(state)
    adopted = [
        pod.name
        for pod in workload.live_pods
        if pod.gate_batch == batch and pod.gate in (GateState.OPEN, GateState.PASSED)
    ]
    if adopted:
        return released(state, observation, now, adopted), []
    remaining = max(workload.replicas - len(through_pods(workload)), 0)
    if remaining == 0:
        return state.moved(phase=Phase.COMPLETED, phase_since=now), []
    size = batch_size(state)
    need = min(size, remaining)
    waiting = [pod for pod in held_pods(workload) if pod.gate is GateState.WAITING]
    if workload.identity_slots:
        return open_with_slots(state, observation, now, workload, waiting, size, need)
    if released_on_arrival(state.plan):
        return open_on_arrival(state, observation, now, workload, size)
    gathered = len(waiting) >= need
    timed_out = state.gather_until is not None and now >= state.gather_until
    if not waiting or not (gathered or timed_out):
        return state, []
    if not timed_out and hpa_stepping(state, observation, now):
        # The HPA scaled moments ago and may take its next step at its next sync: its
        # pods join with these rather than in a rebalance of their own.
        return state, []
    chosen = tuple(pod.name for pod in waiting[:size])
    opened = OpenGate(batch, chosen, together=lets_go_together(state))
    return released(state, observation, now, chosen), [opened]


def open_on_arrival(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView, size: int
) -> Outcome:
    """ArrivalPlan.ON_ARRIVAL: every pod of the batch that exists is opened now, before its
    gate even runs where the operator is quick enough, so its consumer starts as it would
    without a gate; pods created later are opened as they appear (keep_released)."""
    arrived = tuple(pod.name for pod in held_pods(workload))[:size]
    if not arrived:
        return state, []
    opened = OpenGate(label(state), arrived, together=False)
    return released(state, observation, now, arrived), [opened]


def open_with_slots(
    state: RolloutState,
    observation: Observation,
    now: float,
    workload: WorkloadView,
    waiting: Sequence[PodView],
    size: int,
    need: int,
) -> Outcome:
    """Open pods that join under identity slots (planning.identity_slots).

    In a rolling update each new pod takes the identity of a pod that left, or of an old
    pod deleted in the same step, and the coordinator swaps the member without a
    rebalance: there is nothing to gather for, so whoever waits goes, up to the batch size.
    Joins of a cold start or scale-up are new members and gather as usual."""
    swap = state.kind is RolloutKind.ROLLING_UPDATE and state.static
    if not swap:
        timed_out = state.gather_until is not None and now >= state.gather_until
        if not waiting or not (len(waiting) >= need or timed_out):
            return state, []
        if not timed_out and hpa_stepping(state, observation, now):
            return state, []
    given = give_slots(state, workload, waiting[:size], swap)
    if given is None:
        return state, []
    pods, slots, actions = given
    return released(state.moved(slots=slots), observation, now, pods), actions


def give_slots(
    state: RolloutState, workload: WorkloadView, pods: Sequence[PodView], swap: bool
) -> tuple[tuple[str, ...], tuple[str, ...], list[Action]] | None:
    """Slots for `pods` (planning.identity_slots): the pods opened, the rollout's slots
    after it, and the actions (old pods retired first, then the gates opened); None when no
    pod can have one this step."""
    remembered = remembered_slots(state.slots, workload)
    handout = hand_out(workload, pods, remembered, swap=swap)
    if not handout.slots:
        return None
    remembered.update(handout.slots)
    actions: list[Action] = []
    if handout.retiring:
        retiring = handout.retiring
        actions.append(DeletePods(tuple(p.name for p in retiring), tuple(p.uid for p in retiring)))
    actions.append(OpenGate(label(state), handout.pods, handout.slots))
    return handout.pods, encode_slots(remembered), actions


def open_statefulset(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """StatefulSet replace: the batch's pods replaced, and released together at their gates."""
    ordinals = chunk(state)
    ready, actions = replace_chunk(state, workload, ordinals)
    if not ready:
        return state, actions  # the partition first; pods once the controller has seen it
    batch_names = tuple(names(workload, ordinals))
    if state.static or not gated(observation.setup, workload):
        return released(state, observation, now, batch_names), actions
    wanted = set(ordinals)
    batch_pods = [pod for pod in workload.live_pods if pod.ordinal in wanted]
    batch = label(state)
    if any(pod.gate_batch == batch for pod in batch_pods):
        return released(state, observation, now, batch_names), actions
    arrived = [
        pod
        for pod in batch_pods
        if pod.updated and (pod.gate is GateState.WAITING or pod.gate.through)
    ]
    waiting = [pod.name for pod in arrived if pod.gate is GateState.WAITING]
    timed_out = state.gather_until is not None and now >= state.gather_until
    if len(arrived) == len(ordinals) or (timed_out and waiting):
        late = tuple(name for name in strays(state, workload) if name not in waiting)
        waiting += late
        opens: list[Action] = [OpenGate(batch, tuple(waiting))] if waiting else []
        # Strays join with the batch, and count as its members.
        return released(state, observation, now, batch_names + late), actions + opens
    return state, actions + unnoticed_replacements(batch_pods, now)


def hpa_stepping(state: RolloutState, observation: Observation, now: float) -> bool:
    """Whether a scale-up waits for the HPA to leave the replicas alone a while."""
    if state.kind is RolloutKind.ROLLING_UPDATE:
        return False
    window = observation.setup.policy.autoscaler_window_seconds
    quiet_at = hpa_quiet_at(observation.autoscalers, window)
    return quiet_at is not None and now < quiet_at


def unnoticed_replacements(pods: Sequence[PodView], now: float) -> list[Action]:
    """Delete a batch's new pods the scheduler has ignored for UNNOTICED_POD_SECONDS, so
    that their controller creates them again.

    A StatefulSet pod deleted and created again under the same name while kube-scheduler's pod
    watch was down (an API server restart) reaches the scheduler's relist as an update of the
    old, bound pod (kubernetes/kubernetes#93062). Schedulers that kept running with that cache
    never scheduled the new pod, and a pod created again is a new one to them; v1.37.2 exits
    instead (measured in tests/operator/reliability/test_control_plane_faults.py) and its
    kubelet starts it again, after which this finds nothing to do. A pod the scheduler did
    judge (PodScheduled False: no room) is left alone: deleting it would not help."""
    stuck = [
        pod
        for pod in pods
        if pod.unnoticed
        and pod.updated
        and not pod.terminating
        and now - pod.created_at >= UNNOTICED_POD_SECONDS
    ]
    if not stuck:
        return []
    return [DeletePods(tuple(p.name for p in stuck), tuple(p.uid for p in stuck))]


def strays(state: RolloutState, workload: WorkloadView) -> tuple[str, ...]:
    """New pods at their gates that no later batch will release: replaced by their
    controller before the operator got to them (before the partition was parked, or by
    its own rolling update within the partition). They join with the current batch."""
    later = set(later_ordinals(state))
    current = set(chunk(state))
    return tuple(
        pod.name
        for pod in workload.live_pods
        if pod.updated
        and pod.gate is GateState.WAITING
        and pod.ordinal not in later
        and pod.ordinal not in current
    )


def replace_chunk(
    state: RolloutState, workload: WorkloadView, ordinals: Sequence[int]
) -> tuple[bool, list[Action]]:
    """Partition to the chunk's lowest ordinal, then the chunk's old pods deleted.

    Pods are deleted only once the controller has seen the partition: deleted earlier, a
    pod could come back at the old revision.
    """
    if not ordinals:
        return True, []
    if workload.update_strategy == "RollingUpdate":
        lowest = min(ordinals)
        if state.yielded:
            # Left to another writer: usable as long as it lets the batch's pods roll.
            if workload.partition is not None and workload.partition > lowest:
                return False, []
        elif workload.partition != lowest:
            return False, [SetStatefulSetPartition(lowest)]
        if not workload.caught_up:
            return False, []
    wanted = set(ordinals)
    old = [
        pod
        for pod in workload.live_pods
        if pod.ordinal in wanted and not pod.updated and not pod.terminating
    ]
    if not old:
        return True, []
    names = tuple(pod.name for pod in old)
    return True, [DeletePods(names, tuple(pod.uid for pod in old))]


def open_deployment_step(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """Deployment steps: resumed until a batch of pods is updated, then paused."""
    goal = min(state.base + sum(state.sizes[: state.batch]), workload.replicas)
    if workload.updated_replicas >= goal:
        actions: list[Action] = []
        if state.batch < state.batches:
            actions.append(PauseDeployment())
            state = state.moved(holding_deployment=True)
        return released(state, observation, now, ()), actions
    if workload.paused:
        return state.moved(holding_deployment=False), [ResumeDeployment()]
    return state, []


def open_scale_step(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """Scale steps: spec.replicas raised by one batch."""
    goal = state.base + sum(state.sizes[: state.batch])
    actions: list[Action] = []
    if workload.replicas != goal:
        actions.append(ScaleWorkload(goal))
    return released(state, observation, now, ()), actions
