"""The rollout planner's Planning phase: the rollout's batches, and the start of each batch."""

from __future__ import annotations

import hashlib

from rebalancer.planning.rollout_actions import Action, RecordProgress, ResumeDeployment
from rebalancer.planning.rollout_choices import arrival_fields
from rebalancer.planning.rollout_phases.common import (
    POLICY_PROBLEM,
    Observation,
    Outcome,
    Phase,
    autoscaled,
    target,
)
from rebalancer.planning.rollout_phases.stopped import fail
from rebalancer.planning.rollout_plans import classify, plan_rollout
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.plan_costs import ArrivalPlan
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.workloads import WorkloadView


def planning(
    state: RolloutState, observation: Observation, now: float, workload: WorkloadView
) -> Outcome:
    """Planning -> BatchOpening with the rollout's batches, or Idle, or Failed."""
    setup = observation.setup
    if not workload.caught_up:
        return state, []
    change = classify(
        setup, workload, observation.group, state.steady_replicas, autoscaled(observation)
    )
    if change is None:
        return state.moved(phase=Phase.IDLE, phase_since=now, message=None), []
    plan = plan_rollout(setup, workload, observation.group, change, state.steady_replicas)
    fresh = state.moved(
        kind=change.kind,
        mechanism=change.mechanism,
        static=change.static,
        spec_generation=observation.spec_generation,
        batch=0,
        sizes=plan.sizes,
        ordinals=plan.ordinals,
        base=plan.base,
        target_replicas=plan.target_replicas,
        opened=(),
        members_joined=0,
        rebalances=0,
        rebalances_at_start=observation.rebalances,
        generation_at_open=None,
        started_at=now,
        opened_at=None,
        settle_until=None,
        reason=None,
        message="; ".join(plan.notes) or None,
        **arrival_fields(
            setup,
            workload,
            observation.group,
            change,
            sum(plan.sizes),
            hpa_window=autoscaled(observation) and setup.policy.autoscaler_window_seconds > 0,
            now=now,
        ),
    )
    planned = target(workload, fresh)
    rollout_id = hashlib.sha256(f"{planned}|{now}".encode()).hexdigest()[:8]
    fresh = fresh.moved(rollout_id=rollout_id, target=planned)
    if plan.problems:
        summary = "; ".join(str(problem) for problem in plan.problems)
        return fail(fresh, observation, now, POLICY_PROBLEM, summary)
    if not plan.sizes:
        return state.moved(phase=Phase.IDLE, phase_since=now), []
    actions: list[Action] = []
    if fresh.plan_reason:
        actions.append(RecordProgress("RolloutPlanned", 1, fresh.batches, 0, 0, fresh.plan_reason))
    if state.holding_deployment and change.mechanism is not Mechanism.DEPLOYMENT_STEPS:
        # A rollout retargeted mid-step must not leave the Deployment paused for one that
        # does not step it.
        actions.append(ResumeDeployment())
        fresh = fresh.moved(holding_deployment=False)
    return begin_batch(fresh, setup.policy, now, 1), actions


def begin_batch(
    state: RolloutState, policy: RolloutPolicy, now: float, number: int
) -> RolloutState:
    """Batch `number` starts at BatchOpening, its timers set. An OpenAhead plan's first batch
    gathers until the moment its plan set (rollout_choices.arrival_fields)."""
    gather_until = now + policy.gather_seconds
    if number == 1 and state.plan == ArrivalPlan.OPEN_AHEAD.value and state.gather_until:
        gather_until = min(gather_until, state.gather_until)
    return state.moved(
        phase=Phase.BATCH_OPENING,
        batch=number,
        opened=(),
        phase_since=now,
        opened_at=None,
        gather_until=gather_until,
        deadline=now + policy.batch_deadline_seconds,
        settle_until=None,
    )
