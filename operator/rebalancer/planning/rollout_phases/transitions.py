"""The rollout planner's transition table: each phase's rule, a plain function

    rule(state, observation, now) -> (state, actions)

that takes the machine one transition out of `state` (planning.rollout_states.TRANSITIONS says
which are allowed). `advance` applies the transitions any phase may take first (a disabled
policy, a pause) and then the phase's rule from PHASE_RULES."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rebalancer.planning.rollout_phases.common import (
    PENDING_REVISION,
    Observation,
    Outcome,
    Phase,
    target,
)
from rebalancer.planning.rollout_phases.joining import joining
from rebalancer.planning.rollout_phases.opening import opening
from rebalancer.planning.rollout_phases.planning import planning
from rebalancer.planning.rollout_phases.resting import resting, superseded
from rebalancer.planning.rollout_phases.settling import settling
from rebalancer.planning.rollout_phases.stopped import disabled, fail, failed, pause, paused
from rebalancer.planning.rollout_phases.writers import contest, overridden
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.structs.workloads import WorkloadView

Rule = Callable[[RolloutState, Observation, float], Outcome]
# An active phase's rule, handed the workload its phase works on.
ActiveRule = Callable[[RolloutState, Observation, float, WorkloadView], Outcome]


def while_active(rule: ActiveRule) -> Rule:
    """`rule` behind what any active phase goes to first: Failed when the workload is gone,
    Planning when its target changed under the rollout, and the partition set back (or left)
    when another writer moved it."""

    def guarded(state: RolloutState, observation: Observation, now: float) -> Outcome:
        workload = observation.workload
        if workload is None:
            return fail(
                state,
                observation,
                now,
                "WorkloadNotFound",
                "the workload is gone; create it again or fix spec.workload",
            )
        if state.phase is not Phase.PLANNING:
            seen = target(workload, state)
            if seen != state.target and not _adopts(state.target, seen):
                return superseded(state, now, workload, seen)
            if seen != state.target:
                # The held template got its ReplicaSet on the first resume: the same rollout.
                state = state.moved(target=seen)
        if overridden(state, workload):
            return contest(state, observation, workload)
        return rule(state, observation, now, workload)

    return guarded


PHASE_RULES: Mapping[Phase, Rule] = {
    Phase.IDLE: resting,
    Phase.COMPLETED: resting,
    Phase.PLANNING: while_active(planning),
    Phase.BATCH_OPENING: while_active(opening),
    Phase.BATCH_JOINING: while_active(joining),
    Phase.BATCH_SETTLING: while_active(settling),
    Phase.PAUSED: paused,
    Phase.FAILED: failed,
}


def advance(state: RolloutState, observation: Observation, now: float) -> Outcome:
    """One transition out of `state`: a disabled policy hands the workload back from any phase,
    a pause stops any phase but Failed; otherwise the phase's rule decides."""
    policy = observation.setup.policy
    if not policy.enabled:
        return disabled(state, observation, now)
    if policy.paused and state.phase not in (Phase.FAILED, Phase.PAUSED):
        return pause(state, observation, now)
    return PHASE_RULES[state.phase](state, observation, now)


def _adopts(planned: str | None, seen: str) -> bool:
    """Whether a rollout planned on a held template goes on with the revision the controller
    gave that template once resumed (everything else about the target unchanged)."""
    if planned is None or not planned.startswith(f"{PENDING_REVISION}@"):
        return False
    revision, _, rest = seen.partition("@")
    return revision != PENDING_REVISION and rest == planned.partition("@")[2]
