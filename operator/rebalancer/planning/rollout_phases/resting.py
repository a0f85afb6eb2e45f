"""The rollout planner at rest: Idle and Completed, and what starts a rollout from there (a new
target, or a rollout superseded by another change)."""

from __future__ import annotations

from rebalancer.planning.rollout_actions import (
    Action,
    ForeignWrite,
    InstallGate,
    ResumeDeployment,
    SetStatefulSetPartition,
)
from rebalancer.planning.rollout_phases.common import (
    Observation,
    Outcome,
    Phase,
    autoscaled,
    held_for_us,
)
from rebalancer.planning.rollout_phases.writers import flag_problems, taken_back
from rebalancer.planning.rollout_plans import classify, plan_rollout
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import WorkloadView


def resting(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """Idle and Completed: park the workload and install the gate at rest, and plan a rollout
    when the workload wants one."""
    workload = observation.workload
    setup = observation.setup
    actions: list[Action] = []
    if workload is None:
        return state, actions
    if held_for_us(workload) and not state.holding_deployment:
        # Paused by the operator for a rollout not planned yet (the settings write pauses
        # a Deployment with its new template), or a hold whose status was lost.
        if not workload.caught_up:
            return state, actions
        state = state.moved(holding_deployment=True)
        change = classify(
            setup, workload, observation.group, state.steady_replicas, autoscaled(observation)
        )
        if change is not None and change.mechanism is Mechanism.DEPLOYMENT_STEPS:
            return replan(state, now), actions
        # Nothing the planner steps by pausing: handed back just below.
    if state.holding_deployment and workload.kind is WorkloadKind.DEPLOYMENT:
        if workload.paused:
            actions.append(ResumeDeployment())
        state = state.moved(holding_deployment=False)
    if not workload.caught_up:
        return state, actions
    # Before planning: a manifest that drops the partition and changes the template in one
    # apply both frees the partition and starts a rollout, and the Event says the first.
    state, back = taken_back(state, workload, parks_at_rest(setup.policy, workload))
    actions += back
    change = classify(
        setup, workload, observation.group, state.steady_replicas, autoscaled(observation)
    )
    if change is not None:
        plan = plan_rollout(setup, workload, observation.group, change, state.steady_replicas)
        # Old pods a controller has yet to remove are no rollout once every new pod is in.
        if plan.sizes or plan.problems:
            return replan(state, now), actions
    state, flagged = flag_problems(state, observation, workload)
    actions += flagged
    if state.steady_replicas != workload.replicas:
        state = state.moved(steady_replicas=workload.replicas)
    state, kept = kept_at_rest(state, setup.policy, workload)
    return state, actions + kept


def kept_at_rest(state: RolloutState, policy: RolloutPolicy, workload: WorkloadView) -> Outcome:
    """A StatefulSet parked at its replicas, and the gate installed, while nothing rolls."""
    actions: list[Action] = []
    wants_parking = parks_at_rest(policy, workload)
    # A partition left to another writer (see contest) is not parked while that writer still
    # owns it: parking would only start the same fight again after every rollout. Once it no
    # longer does, taken_back clears `yielded` and parking resumes.
    parking = wants_parking and not state.yielded
    parked = parking and workload.partition == workload.replicas
    if parking:
        # Parked at its replicas, the partition keeps a template change from rolling before
        # the operator has planned it (the controller would replace a pod at once).
        if not parked:
            actions.append(SetStatefulSetPartition(workload.replicas))
        if not state.parked:
            state = state.moved(parked=True)
    elif state.parked and state.yielded:
        state = state.moved(parked=False)
    wants_gate = policy.gate_joins and policy.inject_gate
    # Adding the gate changes the template: only once the change cannot roll by itself.
    if wants_gate and not workload.gate_installed and (parked or not wants_parking):
        actions.append(InstallGate())
    return state, actions


def parks_at_rest(policy: RolloutPolicy, workload: WorkloadView) -> bool:
    """The operator parks this workload's partition at its replicas while nothing rolls."""
    return (
        policy.park_statefulsets
        and workload.kind is WorkloadKind.STATEFULSET
        and workload.update_strategy == "RollingUpdate"
    )


def replan(state: RolloutState, now: float, interference: str | None = None) -> RolloutState:
    """Planning a new rollout: nothing of the last one's progress carries over, nor its
    quarrel over the partition; `interference` says why it starts mid-rollout."""
    return state.moved(
        phase=Phase.PLANNING,
        phase_since=now,
        kind=None,
        batch=0,
        sizes=(),
        opened=(),
        members_joined=0,
        rebalances=0,
        reason=None,
        message=None,
        contested_by=None,
        yielded=False,
        interference=interference,
    )


def superseded(state: RolloutState, now: float, workload: WorkloadView, target: str) -> Outcome:
    """The workload was changed under the rollout (a new template, other replicas): the
    rollout stops where it is and a new one takes what is left, which status and an Event
    say. Pods of the stopped rollout's batches that the new template reaches are replaced
    again; the StatefulSet controller replaces those at or above the partition itself."""
    what = changed_target(state.target, target, workload)
    note = (
        f"rollout {state.rollout_id} stopped at batch {state.batch} of {state.batches}: "
        f"{what}; a new rollout takes what is left"
    )
    return replan(state, now, note), [ForeignWrite("RolloutSuperseded", note, warning=False)]


def changed_target(before: str | None, after: str, workload: WorkloadView) -> str:
    """What changed between two targets (see common.target), and who changed it if known."""
    old_revision, _, old_rest = (before or "").partition("@")
    new_revision, _, new_rest = after.partition("@")
    old_replicas, _, old_how = old_rest.partition(":")
    new_replicas, _, new_how = new_rest.partition(":")
    parts = []
    if old_revision != new_revision:
        by = f" by {workload.template_writer}" if workload.template_writer else ""
        parts.append(
            f"the pod template was changed{by} (revision {old_revision} to {new_revision})"
        )
    if old_replicas != new_replicas:
        by = f" by {workload.replicas_writer}" if workload.replicas_writer else ""
        parts.append(f"the replicas were changed{by} from {old_replicas} to {new_replicas}")
    if old_how != new_how or not parts:
        parts.append(f"the workload changed ({old_how or before} to {new_how})")
    return " and ".join(parts)
