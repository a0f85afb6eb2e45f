"""The rollout planner's BatchJoining phase: the released batch joins the group, which must
settle by the batch's deadline."""

from __future__ import annotations

from rebalancer.planning.identity_slots import decode_slots
from rebalancer.planning.rollout_actions import Action, OpenGate
from rebalancer.planning.rollout_phases.common import Phase
from rebalancer.planning.rollout_phases.opening import OpeningStep
from rebalancer.planning.rollout_phases.settling import SettlingStep
from rebalancer.planning.rollout_plans import held_pods
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutState
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
        state, swaps = self.slide_swaps(workload)
        self.state = state
        actions += swaps
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

    def slide_swaps(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        """A batch of identity swaps takes new pods in as they reach their gates.

        A swap costs no rebalance (planning.identity_slots), so there is nothing to gather a
        batch for: the batch size bounds the swaps in flight (pods opened whose consumer is not
        Ready yet), and a new pod that reaches its gate while there is room is swapped in at
        once rather than after the whole batch is Ready: a sliding window."""
        state = self.state
        swapping = (
            state.kind is RolloutKind.ROLLING_UPDATE
            and state.mechanism is Mechanism.GATE_QUEUE
            and state.static
            and workload.identity_slots
        )
        if not swapping or (state.opened_at is not None and state.opened_at >= self.now):
            return state, []
        live = {pod.name: pod for pod in workload.live_pods}
        in_flight = [name for name in state.opened if name not in live or not live[name].ready]
        room = self.batch_size() - len(in_flight)
        opened = set(state.opened)
        waiting = [
            pod
            for pod in held_pods(workload)
            if pod.gate is GateState.WAITING and pod.name not in opened
        ]
        if room <= 0 or not waiting:
            return state, []
        given = self.give_slots(workload, waiting[:room], swap=True)
        if given is None:
            return state, []
        pods, slots, actions = given
        return state.moved(opened=state.opened + pods, slots=slots), actions

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
