"""The rollout planner out of its batches: Paused, Failed, and rollouts not managed at all
(spec.policy.rollout.enabled false)."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.planning.rollout_actions import (
    Action,
    ClearDegraded,
    MarkDegraded,
    OpenGate,
    PauseDeployment,
    ResumeDeployment,
    SetStatefulSetPartition,
)
from rebalancer.planning.rollout_phases.common import (
    Observation,
    Outcome,
    Phase,
    held_for_us,
    target,
)
from rebalancer.planning.rollout_plans import held_pods
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.gates import RESUME_ANNOTATION
from rebalancer.structs.rollout_policy import PATH


def pause(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """Any phase but Failed -> Paused: a Deployment being stepped is held where it is."""
    actions: list[Action] = []
    if state.mechanism is Mechanism.DEPLOYMENT_STEPS and state.phase.active:
        actions.append(PauseDeployment())
        state = state.moved(holding_deployment=True)
    paused_state = state.moved(
        phase=Phase.PAUSED,
        paused_from=state.phase,
        paused_at=now,
        phase_since=now,
    )
    return paused_state, actions


def paused(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """Paused -> the phase it paused, its timers moved on by the pause."""
    if observation.setup.policy.paused:
        return state, []
    back = state.paused_from or Phase.IDLE
    shift = now - (state.paused_at or now)

    def later(moment: float | None) -> float | None:
        return None if moment is None else moment + shift

    resumed = state.moved(
        phase=back,
        paused_from=None,
        paused_at=None,
        phase_since=now,
        gather_until=later(state.gather_until),
        deadline=later(state.deadline),
        settle_until=later(state.settle_until),
    )
    return resumed, []


def fail(
    state: RolloutState,
    observation: Observation,
    now: float,
    reason: str,
    what: str,
    actions: Sequence[Action] = (),
) -> Outcome:
    """Any active phase -> Failed, saying `what` happened and how to retry."""
    workload = observation.workload
    how = (
        f"to retry, fix the cause and give the ConsumerGroup a new {RESUME_ANNOTATION} "
        "annotation (any value), or change its spec"
    )
    if state.holding_deployment and workload is not None:
        how += (
            f"; Deployment {workload.name} stays paused until then (`kubectl rollout resume "
            f"deployment/{workload.name}` lets it go on unmanaged)"
        )
    message = f"{what}; {how}"
    failed_state = state.moved(
        phase=Phase.FAILED,
        phase_since=now,
        reason=reason,
        message=message,
        resume_token=observation.resume_token,
    )
    return failed_state, [*actions, MarkDegraded(reason, message)]


def failed(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """Failed -> Idle once resumed, respecified or retargeted."""
    workload = observation.workload
    resumed = observation.resume_token != state.resume_token
    respecified = (
        observation.spec_generation is not None
        and state.spec_generation is not None
        and observation.spec_generation != state.spec_generation
    )
    retargeted = workload is not None and (
        target(workload, state) != state.target or state.reason == "WorkloadNotFound"
    )
    if not (resumed or respecified or retargeted):
        return state, []
    why = "resumed" if resumed else "the spec changed" if respecified else "the workload changed"
    idle = state.moved(
        phase=Phase.IDLE,
        phase_since=now,
        reason=None,
        message=f"failed rollout cleared: {why}",
        resume_token=observation.resume_token,
    )
    return idle, [ClearDegraded("RolloutCleared", f"the failed rollout was cleared: {why}")]


def disabled(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """Any phase -> Idle with the policy disabled: nothing of the workload is left held,
    parked or paused."""
    workload = observation.workload
    actions: list[Action] = []
    holding = parked = False
    if workload is not None:
        holding = workload.paused and (state.holding_deployment or held_for_us(workload))
        # A partition is the operator's when it parked the workload, and in every phase
        # but a resting one: the planner's step, parked at the start or not.
        parked = bool(workload.partition) and (state.parked or not state.phase.resting)
        if holding:
            actions.append(ResumeDeployment())
        if parked:
            actions.append(SetStatefulSetPartition(0))
        # Pending gates too: a pod still scheduling would otherwise wait at its gate, once
        # it runs, for an operator that manages it no more.
        held = tuple(p.name for p in held_pods(workload))
        if held:
            actions.append(OpenGate("unmanaged", held))
    idle = RolloutState(
        phase=Phase.IDLE,
        phase_since=state.phase_since if state.phase is Phase.IDLE else now,
        holding_deployment=holding,
        parked=parked,
        steady_replicas=state.steady_replicas,
        message=f"rollouts are not managed ({PATH}.enabled is false)",
    ).moved()
    return idle, actions
