"""The rollout planner's BatchJoining phase: the released batch joins the group, which must
settle by the batch's deadline."""

from __future__ import annotations

from rebalancer.planning.identity_slots import decode_slots
from rebalancer.planning.rollout_actions import Action, OpenGate
from rebalancer.planning.rollout_choices import lets_go_together, opens_late_arrivals
from rebalancer.planning.rollout_phases.common import (
    Observation,
    Outcome,
    Phase,
    batch_size,
    chunk,
    describe_batch,
    describe_group,
    dynamic_members,
    label,
    later_ordinals,
    names,
)
from rebalancer.planning.rollout_phases.opening import give_slots, replace_chunk, strays
from rebalancer.planning.rollout_phases.settling import back_in_time, settled
from rebalancer.planning.rollout_phases.stopped import fail
from rebalancer.planning.rollout_plans import (
    Change,
    advances_on_ready,
    batch_limit,
    held_pods,
    static_budget_s,
)
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutState
from rebalancer.structs.gates import GateState
from rebalancer.structs.workloads import WorkloadView


def joining(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """BatchJoining -> BatchSettling once the group settled with the batch in it (or a batch
    of static members is back in time), Failed past the batch's deadline. Meanwhile the batch
    is kept released, and identity swaps and a StatefulSet's window slide on."""
    actions = keep_released(state, now, workload)
    late = tuple(
        name
        for action in actions
        if isinstance(action, OpenGate)
        for name in action.pods
        if name not in state.opened
    )
    if late:
        # Strays that reached their gates after the release join with the batch.
        state = state.moved(opened=state.opened + late)
    state, swaps = slide_swaps(state, now, workload)
    actions += swaps
    state, replacing = slide_statefulset(state, observation, now, workload)
    actions += replacing
    policy = observation.setup.policy
    if settled(state, observation, workload):
        settling = state.moved(
            phase=Phase.BATCH_SETTLING,
            phase_since=now,
            settle_until=now + policy.settle_seconds,
        )
        return settling, actions
    if back_in_time(state, observation, now, workload):
        # Nothing to hold for: the group is not rebalancing (rollout_plans.advances_on_ready).
        back = state.moved(phase=Phase.BATCH_SETTLING, phase_since=now, settle_until=now)
        return back, actions
    if state.deadline is not None and now >= state.deadline:
        return fail(
            state,
            observation,
            now,
            "BatchDidNotSettle",
            f"batch {state.batch} of {state.batches} ({describe_batch(state)}) did not "
            f"settle within {policy.batch_deadline_seconds} s: "
            f"{describe_group(observation.group)}; check the pods' logs and the group",
            actions,
        )
    return state, actions


def slide_swaps(state: RolloutState, now: float, workload: WorkloadView) -> Outcome:
    """A batch of identity swaps takes new pods in as they reach their gates.

    A swap costs no rebalance (planning.identity_slots), so there is nothing to gather a
    batch for: the batch size bounds the swaps in flight (pods opened whose consumer is not
    Ready yet), and a new pod that reaches its gate while there is room is swapped in at
    once rather than after the whole batch is Ready: a sliding window."""
    swapping = (
        state.kind is RolloutKind.ROLLING_UPDATE
        and state.mechanism is Mechanism.GATE_QUEUE
        and state.static
        and workload.identity_slots
    )
    if not swapping or (state.opened_at is not None and state.opened_at >= now):
        return state, []
    live = {pod.name: pod for pod in workload.live_pods}
    in_flight = [name for name in state.opened if name not in live or not live[name].ready]
    room = batch_size(state) - len(in_flight)
    opened = set(state.opened)
    waiting = [
        pod
        for pod in held_pods(workload)
        if pod.gate is GateState.WAITING and pod.name not in opened
    ]
    if room <= 0 or not waiting:
        return state, []
    given = give_slots(state, workload, waiting[:room], swap=True)
    if given is None:
        return state, []
    pods, slots, actions = given
    return state.moved(opened=state.opened + pods, slots=slots), actions


def slide_statefulset(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """A StatefulSet's static members are replaced in a sliding window.

    A static member back within its session takes its assignment back without a rebalance
    (advances_on_ready), so nothing but the batch size bounds how many are away at once:
    as each replaced pod is Ready, the next ordinal of the rollout joins the batch and is
    replaced, the window never holding more than the batch size in flight, as the
    StatefulSet controller's own maxUnavailable does. Waiting for a whole batch would wait
    for its slowest restart. The window stops sliding when the group moved to a new
    generation or the last release is older than the session covers; the batch then
    settles as any other."""
    setup = observation.setup
    if state.mechanism is not Mechanism.STATEFULSET_REPLACE:
        return state, []
    if not advances_on_ready(setup, state.static, state.mechanism, state.kind):
        return state, []
    if state.batch >= state.batches or state.opened_at is None:
        return state, []
    if state.opened_at >= now or now - state.opened_at > static_budget_s(setup):
        return state, []
    group = observation.group
    generation = group.generation if group is not None else None
    if generation is not None and state.generation_at_open not in (None, generation):
        return state, []
    live = {pod.ordinal: pod for pod in workload.live_pods if pod.ordinal is not None}
    current = chunk(state)
    back = [
        ordinal
        for ordinal in current
        if ordinal in live
        and live[ordinal].ready
        and live[ordinal].updated
        and live[ordinal].gate.through
    ]
    change = Change(state.kind or RolloutKind.ROLLING_UPDATE, state.mechanism, state.static)
    window = batch_limit(setup, workload, change, len(state.ordinals))
    room = window - (len(current) - len(back))
    later = later_ordinals(state)[: max(room, 0)]
    # A pod whose consumer is a dynamic member leaves the group when it stops (a
    # rebalance): the settings change that turns static membership on replaces such pods,
    # and its batches settle one by one.
    dynamic = dynamic_members(group, names(workload, later))
    taken = next((index for index, leaves in enumerate(dynamic) if leaves), len(later))
    if taken <= 0:
        return state, []
    slid = state.moved(sizes=widened(state.sizes, state.batch - 1, taken))
    added = tuple(names(workload, chunk(slid)[len(current) :]))
    slid = slid.moved(
        opened=state.opened + added,
        opened_at=now,
        deadline=now + setup.policy.batch_deadline_seconds,
    )
    return slid, replace_chunk(slid, workload, chunk(slid))[1]


def keep_released(state: RolloutState, now: float, workload: WorkloadView) -> list[Action]:
    """What keeps the batch released, asked again in case a step was lost."""
    actions: list[Action] = []
    if state.opened_at is not None and state.opened_at >= now:
        return actions  # released by this very step: the observation predates it
    if state.mechanism is Mechanism.STATEFULSET_REPLACE:
        current = set(chunk(state))
        actions = replace_chunk(state, workload, sorted(current))[1]
        # A static member is released as soon as its pod exists: nothing is gathered for
        # it, and a gate opened before it starts lets the consumer go at once, where one
        # opened once seen waiting costs a look of the planner on every replacement's path.
        ready = (GateState.WAITING, GateState.PENDING) if state.static else (GateState.WAITING,)
        late = tuple(
            pod.name
            for pod in workload.live_pods
            if pod.ordinal in current and pod.updated and pod.gate in ready
        ) + strays(state, workload)
    elif state.mechanism is Mechanism.GATE_QUEUE:
        opened = set(state.opened)
        late = tuple(
            pod.name
            for pod in workload.live_pods
            if pod.name in opened and pod.gate is GateState.WAITING
        )
        if opens_late_arrivals(state.plan):
            room = max(batch_size(state) - len(opened), 0)
            arrived = [pod.name for pod in held_pods(workload) if pod.name not in opened]
            late += tuple(arrived[:room])
    else:
        late = ()
    if late:
        # A pod opened under an identity slot is opened again under the same one.
        remembered = decode_slots(state.slots)
        slots = tuple((name, remembered[name]) for name in late if name in remembered)
        actions.append(OpenGate(label(state), late, slots, lets_go_together(state)))
    return actions


def widened(sizes: tuple[int, ...], index: int, more: int) -> tuple[int, ...]:
    """`sizes` with up to `more` pods moved into batch `index` from the batches after it,
    emptied batches dropped."""
    grown = list(sizes)
    for later in range(index + 1, len(grown)):
        taken = min(grown[later], more)
        grown[later] -= taken
        grown[index] += taken
        more -= taken
    return tuple(size for size in grown if size > 0)
