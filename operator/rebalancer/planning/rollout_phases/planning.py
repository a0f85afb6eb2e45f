"""The rollout planner's Planning phase: the rollout's batches, and the start of each batch."""

from __future__ import annotations

import hashlib

from rebalancer.planning.rollout_actions import Action, RecordProgress, ResumeDeployment
from rebalancer.planning.rollout_choices import arrival_fields
from rebalancer.planning.rollout_phases.common import POLICY_PROBLEM, Phase
from rebalancer.planning.rollout_phases.stopped import StoppedStep
from rebalancer.planning.rollout_plans import classify, plan_rollout
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.workloads import WorkloadView


class PlanningStep(StoppedStep):
    """Planning, and the start of each batch."""

    def planning(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        if not workload.caught_up:
            return state, []
        change = classify(
            self.setup, workload, self.obs.group, state.steady_replicas, self.autoscaled
        )
        if change is None:
            return state.moved(phase=Phase.IDLE, phase_since=self.now, message=None), []
        plan = plan_rollout(self.setup, workload, self.obs.group, change, state.steady_replicas)
        fresh = state.moved(
            kind=change.kind,
            mechanism=change.mechanism,
            static=change.static,
            spec_generation=self.obs.spec_generation,
            batch=0,
            sizes=plan.sizes,
            ordinals=plan.ordinals,
            base=plan.base,
            target_replicas=plan.target_replicas,
            opened=(),
            members_joined=0,
            rebalances=0,
            rebalances_at_start=self.obs.rebalances,
            generation_at_open=None,
            started_at=self.now,
            opened_at=None,
            settle_until=None,
            reason=None,
            message="; ".join(plan.notes) or None,
            **arrival_fields(
                self.setup,
                workload,
                self.obs.group,
                change,
                sum(plan.sizes),
                hpa_window=self.autoscaled and self.policy.autoscaler_window_seconds > 0,
            ),
        )
        target = self.target(workload, fresh)
        rollout_id = hashlib.sha256(f"{target}|{self.now}".encode()).hexdigest()[:8]
        fresh = fresh.moved(rollout_id=rollout_id, target=target)
        if plan.problems:
            summary = "; ".join(str(problem) for problem in plan.problems)
            return self.fail(POLICY_PROBLEM, summary, state=fresh)
        if not plan.sizes:
            return state.moved(phase=Phase.IDLE, phase_since=self.now), []
        actions: list[Action] = []
        if fresh.plan_reason:
            actions.append(
                RecordProgress("RolloutPlanned", 1, fresh.batches, 0, 0, fresh.plan_reason)
            )
        if state.holding_deployment and change.mechanism is not Mechanism.DEPLOYMENT_STEPS:
            # A rollout retargeted mid-step must not leave the Deployment paused for one that
            # does not step it.
            actions.append(ResumeDeployment())
            fresh = fresh.moved(holding_deployment=False)
        return self.begin_batch(fresh, 1), actions

    def begin_batch(self, state: RolloutState, number: int) -> RolloutState:
        return state.moved(
            phase=Phase.BATCH_OPENING,
            batch=number,
            opened=(),
            phase_since=self.now,
            opened_at=None,
            gather_until=self.now + self.policy.gather_seconds,
            deadline=self.now + self.policy.batch_deadline_seconds,
            settle_until=None,
        )
