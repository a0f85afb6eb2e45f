"""The rollout planner: a pure state machine stepped with what the operator observes.

    state, actions = step(state, observation, now)

`state` is a RolloutState (kept in status.rollout), `observation` what the operator sees now
(the workload and its pods, the group's latest snapshot, the policy and broker timing), `now`
epoch seconds. The actions are declarative (rollout_actions); the actuator carries them out.
Every decision is level-based: it follows from the state and the observation, never from
having done something before, so a step repeated after an operator restart, or after a crash
between acting and saving the state, neither repeats nor skips a batch. Opened gates carry the
rollout and batch that opened them (GATE_BATCH_ANNOTATION), which is how a restarted operator
recognises a batch it released but did not get to record.

How batches are released (Mechanism):
- gate queue (cold start, scale-up, Deployment rolling update with the gate): pods wait at
  their gates; a batch opens when its pods are all waiting (or gatherSeconds have passed with
  some waiting), so its JoinGroups land within milliseconds of each other;
- StatefulSet replace (rolling update): the partition is lowered to the batch's lowest ordinal
  and the batch's old pods are deleted together; their replacements are released together at
  the gate, or each on arrival when members are static (a static member that is back within its
  session keeps its assignment, and holding it back would only lengthen its absence);
- Deployment steps (no gate): the Deployment rolls until a batch of pods is updated, is paused
  until the group has settled, and is resumed for the next batch;
- scale steps (no gate, spec.policy.rollout.scaleSteps): spec.replicas is raised one batch at a
  time.
Between batches the group must be settled (Stable, every partition assigned, the batch's
members in it) for settleSeconds; a batch that is not settled by its deadline fails the rollout.
"""

from __future__ import annotations

from rebalancer.planning.autoscalers import autoscaler_actions, describe_autoscalers
from rebalancer.planning.rollout_actions import (
    Action,
    HoldGates,
    NoteBypassedGates,
    PauseScaledObject,
    RecordProgress,
    Wait,
)
from rebalancer.planning.rollout_choices import opens_late_arrivals, released_on_arrival
from rebalancer.planning.rollout_phases.common import (
    PENDING_REVISION,
    POLICY_PROBLEM,
    Observation,
    Phase,
    _plural,
)
from rebalancer.planning.rollout_phases.opening import UNNOTICED_POD_SECONDS
from rebalancer.planning.rollout_phases.resting import changed_target
from rebalancer.planning.rollout_phases.transitions import advance
from rebalancer.planning.rollout_plans import advances_on_ready, gated
from rebalancer.planning.rollout_states import Mechanism, RolloutPhase, RolloutState, stamp
from rebalancer.structs.gates import GateState

__all__ = [
    "GATHER_RECHECK_SECONDS",
    "PENDING_REVISION",
    "POLICY_PROBLEM",
    "UNNOTICED_POD_SECONDS",
    "Observation",
    "changed_target",
    "step",
    "trace_step",
]

# A step follows at most this many transitions before it waits for the world to change.
MAX_TRANSITIONS = 8
# How soon to look again while waiting on something no timer bounds (a controller catching up).
RECHECK_SECONDS = 2.0
# How soon to look again while a batch waits for its pods to reach their gates: the last
# pod's gate is what the whole batch waits for, and every second until the operator sees it
# is a second added to the rollout. Two reads (the workload and its pods) per look, only
# while a batch gathers, which gatherSeconds bounds.
GATHER_RECHECK_SECONDS = 0.5
# How soon to look again at rest when the workload's controller has not observed its spec yet:
# a change woke the planner (handlers.workloads) a moment before the controller took it, and
# the controller's catching up wakes no one.
CATCH_UP_RECHECK_SECONDS = 0.5
# An active rollout notes that it was stepped this often; a gap longer than ABSENCE_SECONDS is
# an operator outage, and its timers move on by the gap.
SEEN_EVERY_SECONDS = 30.0
ABSENCE_SECONDS = 90.0

_EVENT_REASONS = {
    Phase.IDLE: "RolloutIdle",
    Phase.PLANNING: "RolloutStarted",
    Phase.BATCH_OPENING: "BatchOpening",
    Phase.BATCH_JOINING: "BatchReleased",
    Phase.BATCH_SETTLING: "BatchSettled",
    Phase.COMPLETED: "RolloutCompleted",
    Phase.FAILED: "RolloutFailed",
    Phase.PAUSED: "RolloutPaused",
}


def step(
    state: RolloutState, observation: Observation, now: float
) -> tuple[RolloutState, tuple[Action, ...]]:
    """Advance the rollout as far as the observation allows; see the module docstring."""
    after, actions, _ = trace_step(state, observation, now)
    return after, actions


def trace_step(
    state: RolloutState, observation: Observation, now: float
) -> tuple[RolloutState, tuple[Action, ...], tuple[RolloutPhase, ...]]:
    """step(), and every phase it went through on the way (the first is `state`'s)."""
    now = stamp(now)
    actions: list[Action] = []
    current = _count(_returned(state, now), observation)
    phases = [current.phase]
    for _ in range(MAX_TRANSITIONS):
        after, done = advance(current, observation, now)
        after = _count(after, observation)
        actions.extend(done)
        moved = (after.phase, after.batch) != (current.phase, current.batch)
        if moved:
            actions.append(_progress(after))
            phases.append(after.phase)
        current = after
        if not moved:
            break
    if not current.phase.active:
        current = current.moved(seen_at=None) if current.seen_at is not None else current
    elif current.seen_at is None or now - current.seen_at >= SEEN_EVERY_SECONDS:
        current = current.moved(seen_at=now)
    counted = (current.members_joined, current.rebalances)
    reported = any(isinstance(action, RecordProgress) for action in actions)
    if (
        current.phase.active
        and not reported
        and counted != (state.members_joined, state.rebalances)
    ):
        actions.append(_progress(current, "RolloutProgress"))
    window = observation.setup.policy.autoscaler_window_seconds
    described = describe_autoscalers(observation.autoscalers, window)
    if described != current.autoscaler:
        current = current.moved(autoscaler=described)
    for action in autoscaler_actions(
        current.phase.active, current.rollout_id, observation.autoscalers
    ):
        # A pause goes out before anything that moves the workload, a resume after.
        if isinstance(action, PauseScaledObject):
            actions.insert(0, action)
        else:
            actions.append(action)
    actions.extend(_holds(current, observation, now))
    actions.extend(_bypasses(observation))
    wake = _next_wake(current, observation, now)
    if wake is not None:
        actions.append(Wait(wake))
    return current, tuple(actions), tuple(phases)


def _returned(state: RolloutState, now: float) -> RolloutState:
    """After an operator outage, the batch's timers move on by the time nobody watched."""
    if not state.phase.active or state.seen_at is None:
        return state
    gap = now - state.seen_at
    if gap <= ABSENCE_SECONDS:
        return state

    def later(moment: float | None) -> float | None:
        return None if moment is None else moment + gap

    return state.moved(
        seen_at=now,
        gather_until=later(state.gather_until),
        deadline=later(state.deadline),
        settle_until=later(state.settle_until),
    )


def _count(state: RolloutState, observation: Observation) -> RolloutState:
    """Rebalances since the rollout started, from the observer's running count."""
    if not state.phase.active or observation.rebalances is None:
        return state
    if state.rebalances_at_start is None:
        return state.moved(rebalances_at_start=observation.rebalances)
    count = max(observation.rebalances - state.rebalances_at_start, 0)
    return state if count == state.rebalances else state.moved(rebalances=count)


def _progress(state: RolloutState, reason: str | None = None) -> RecordProgress:
    phase = state.phase
    batch = f"batch {state.batch} of {state.batches}" if state.batch else "no batch yet"
    size = state.sizes[state.batch - 1] if 1 <= state.batch <= len(state.sizes) else 0
    released = len(state.opened) or size
    texts = {
        Phase.IDLE: "no rollout in progress",
        Phase.PLANNING: "planning a rollout",
        Phase.BATCH_OPENING: f"{batch}: "
        + (
            "opening its pods as they appear"
            if released_on_arrival(state.plan)
            else "gathering its pods"
        ),
        Phase.BATCH_JOINING: f"{batch} released ({_plural(released, 'pod')}), waiting for "
        "the group to settle",
        Phase.BATCH_SETTLING: f"{batch} settled; holding it for the settle time",
        Phase.COMPLETED: f"rollout completed in {_plural(state.batches, 'batch')}",
        Phase.FAILED: f"rollout failed at {batch}",
        Phase.PAUSED: f"rollout paused at {batch}",
    }
    kind = f"{state.kind.value} " if state.kind is not None else ""
    message = (
        f"{kind}{texts[phase]}; {state.members_joined} members joined, "
        f"{state.rebalances} rebalances so far"
    )
    if state.message and phase in (Phase.FAILED, Phase.PLANNING, Phase.BATCH_OPENING):
        message += f" ({state.message})"
    elif state.interference and phase is Phase.COMPLETED:
        message += f" ({state.interference})"
    return RecordProgress(
        reason=reason or _EVENT_REASONS[phase],
        batch=state.batch,
        batches=state.batches,
        members_joined=state.members_joined,
        rebalances=state.rebalances,
        message=message,
    )


def _holds(state: RolloutState, observation: Observation, now: float) -> list[Action]:
    """Refresh the held-at annotation of waiting pods, so their gates know we are here."""
    bypass = observation.setup.policy.bypass_gate_after_seconds
    workload = observation.workload
    if bypass <= 0 or workload is None or not observation.setup.policy.enabled:
        return []
    refresh = bypass / 3
    stale = tuple(
        pod.name
        for pod in workload.live_pods
        if pod.gate is GateState.WAITING
        and pod.name not in state.opened
        and (pod.held_at is None or now - pod.held_at >= refresh)
    )
    return [HoldGates(stale)] if stale else []


def _bypasses(observation: Observation) -> list[Action]:
    """Pods whose gates let them go while the operator was silent, not told yet."""
    workload = observation.workload
    if workload is None:
        return []
    pods = tuple(pod.name for pod in workload.live_pods if pod.bypassed)
    bypass = observation.setup.policy.bypass_gate_after_seconds
    return [NoteBypassedGates(pods, bypass)] if pods else []


def _gathering(state: RolloutState, observation: Observation) -> bool:
    """Whether the batch being opened waits for pods to arrive at their gates."""
    workload = observation.workload
    if workload is None or not gated(observation.setup, workload):
        return False
    if state.mechanism is Mechanism.GATE_QUEUE:
        return True
    return state.mechanism is Mechanism.STATEFULSET_REPLACE and not state.static


def _quick(state: RolloutState, observation: Observation) -> bool:
    """Whether the batch out now is followed by the next once its pods are Ready, or (a
    StatefulSet's sliding window, which gathers the later batches into the current one) its
    window slides on as they are."""
    if not advances_on_ready(observation.setup, state.static, state.mechanism, state.kind):
        return False
    return state.batch < state.batches or state.mechanism is Mechanism.STATEFULSET_REPLACE


def _arriving(state: RolloutState) -> bool:
    """Whether a released batch that opens late pods as they come still has some to open."""
    size = state.sizes[state.batch - 1] if 0 < state.batch <= len(state.sizes) else 0
    return opens_late_arrivals(state.plan) and len(state.opened) < size


def _next_wake(state: RolloutState, observation: Observation, now: float) -> float | None:
    """The next moment a timer changes something, if any comes before the group does."""
    moments: list[float] = []
    match state.phase:
        case Phase.BATCH_OPENING:
            moments += [t for t in (state.gather_until, state.deadline) if t is not None]
            # A batch of static members that follows on Ready waits only for the controller
            # to take the partition before its pod is replaced.
            quick = advances_on_ready(observation.setup, state.static, state.mechanism, state.kind)
            # A Deployment resumed for this batch goes on replacing pods until it is paused
            # again: pods Ready at once (no readiness probe, no minReadySeconds) would all be
            # replaced within a resting poll.
            resumed = state.mechanism is Mechanism.DEPLOYMENT_STEPS and not state.holding_deployment
            if quick or resumed or _gathering(state, observation):
                moments.append(now + GATHER_RECHECK_SECONDS)
        case Phase.BATCH_JOINING:
            moments += [state.deadline] if state.deadline is not None else []
            if _quick(state, observation) or _arriving(state):
                # The replaced pod's Ready is what the next batch waits for, as when gathering.
                moments.append(now + GATHER_RECHECK_SECONDS)
        case Phase.BATCH_SETTLING:
            moments += [state.settle_until] if state.settle_until is not None else []
        case Phase.PLANNING:
            moments.append(now + RECHECK_SECONDS)
    bypass = observation.setup.policy.bypass_gate_after_seconds
    workload = observation.workload
    if not state.phase.active and workload is not None and not workload.caught_up:
        moments.append(now + CATCH_UP_RECHECK_SECONDS)
    if bypass > 0 and workload is not None:
        refresh = bypass / 3
        for pod in workload.live_pods:
            if pod.gate is GateState.WAITING:
                held = pod.held_at
                # A hold refreshed by this step's HoldGates is written with this step's time.
                last = held if held is not None and now - held < refresh else now
                moments.append(last + refresh)
    future = [moment for moment in moments if moment > now]
    return min(future) if future else None
