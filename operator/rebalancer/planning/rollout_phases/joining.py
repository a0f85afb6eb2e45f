"""The rollout planner's BatchJoining phase: the released batch joins the group, which must
settle by the batch's deadline."""

from __future__ import annotations

from rebalancer.planning.identity_slots import decode_slots
from rebalancer.planning.rollout_actions import Action, OpenGate
from rebalancer.planning.rollout_phases.common import Phase
from rebalancer.planning.rollout_phases.opening import OpeningStep
from rebalancer.planning.rollout_phases.settling import SettlingStep
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.gates import GateState
from rebalancer.structs.workloads import WorkloadView


class JoiningStep(OpeningStep, SettlingStep):
    """BatchJoining: the released batch joins the group."""

    def joining(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        actions = self.keep_released(workload)
        late = tuple(
            name
            for action in actions
            if isinstance(action, OpenGate)
            for name in action.pods
            if name not in state.opened
        )
        if late:
            # Strays that reached their gates after the release join with the batch.
            state = self.state = state.moved(opened=state.opened + late)
        if self.settled(workload):
            settled = state.moved(
                phase=Phase.BATCH_SETTLING,
                phase_since=self.now,
                settle_until=self.now + self.policy.settle_seconds,
            )
            return settled, actions
        if self.back_in_time(workload):
            # Nothing to hold for: the group is not rebalancing (rollout_plans.advances_on_ready).
            back = state.moved(
                phase=Phase.BATCH_SETTLING, phase_since=self.now, settle_until=self.now
            )
            return back, actions
        if state.deadline is not None and self.now >= state.deadline:
            return self.fail(
                "BatchDidNotSettle",
                f"batch {state.batch} of {state.batches} ({self.describe_batch()}) did not "
                f"settle within {self.policy.batch_deadline_seconds} s: "
                f"{self.describe_group()}; check the pods' logs and the group",
                actions=actions,
            )
        return state, actions

    def keep_released(self, workload: WorkloadView) -> list[Action]:
        """What keeps the batch released, asked again in case a step was lost."""
        state = self.state
        label = self.label()
        actions: list[Action] = []
        if state.opened_at is not None and state.opened_at >= self.now:
            return actions  # released by this very step: the observation predates it
        if state.mechanism is Mechanism.STATEFULSET_REPLACE:
            chunk = set(self.chunk())
            actions = self.replace_chunk(workload, sorted(chunk))[1]
            late = tuple(
                pod.name
                for pod in workload.live_pods
                if pod.ordinal in chunk and pod.updated and pod.gate is GateState.WAITING
            ) + self.strays(workload)
        elif state.mechanism is Mechanism.GATE_QUEUE:
            opened = set(state.opened)
            late = tuple(
                pod.name
                for pod in workload.live_pods
                if pod.name in opened and pod.gate is GateState.WAITING
            )
        else:
            late = ()
        if late:
            # A pod opened under an identity slot is opened again under the same one.
            remembered = decode_slots(state.slots)
            slots = tuple((name, remembered[name]) for name in late if name in remembered)
            actions.append(OpenGate(label, late, slots))
        return actions
