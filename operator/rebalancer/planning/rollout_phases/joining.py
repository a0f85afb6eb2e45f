"""The rollout planner's BatchJoining phase: the released batch joins the group, which must
settle by the batch's deadline."""

from __future__ import annotations

from rebalancer.planning.identity_slots import decode_slots
from rebalancer.planning.rollout_actions import Action, OpenGate
from rebalancer.planning.rollout_choices import released_on_arrival
from rebalancer.planning.rollout_phases.common import Phase, dynamic_members
from rebalancer.planning.rollout_phases.opening import OpeningStep
from rebalancer.planning.rollout_phases.settling import SettlingStep
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
        state, replacing = self.slide_statefulset(workload)
        self.state = state
        actions += replacing
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

    def slide_statefulset(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        """A StatefulSet's static members are replaced in a sliding window.

        A static member back within its session takes its assignment back without a rebalance
        (advances_on_ready), so nothing but the batch size bounds how many are away at once:
        as each replaced pod is Ready, the next ordinal of the rollout joins the batch and is
        replaced, the window never holding more than the batch size in flight, as the
        StatefulSet controller's own maxUnavailable does. Waiting for a whole batch would wait
        for its slowest restart. The window stops sliding when the group moved to a new
        generation or the last release is older than the session covers; the batch then
        settles as any other."""
        state = self.state
        if state.mechanism is not Mechanism.STATEFULSET_REPLACE:
            return state, []
        if not advances_on_ready(self.setup, state.static, state.mechanism, state.kind):
            return state, []
        if state.batch >= state.batches or state.opened_at is None:
            return state, []
        if state.opened_at >= self.now or self.now - state.opened_at > static_budget_s(self.setup):
            return state, []
        group = self.obs.group
        generation = group.generation if group is not None else None
        if generation is not None and state.generation_at_open not in (None, generation):
            return state, []
        live = {pod.ordinal: pod for pod in workload.live_pods if pod.ordinal is not None}
        chunk = self.chunk()
        back = [
            ordinal
            for ordinal in chunk
            if ordinal in live
            and live[ordinal].ready
            and live[ordinal].updated
            and live[ordinal].gate.through
        ]
        change = Change(state.kind or RolloutKind.ROLLING_UPDATE, state.mechanism, state.static)
        window = batch_limit(self.setup, workload, change, len(state.ordinals))
        room = window - (len(chunk) - len(back))
        later = state.ordinals[sum(state.sizes[: state.batch]) :][: max(room, 0)]
        # A pod whose consumer is a dynamic member leaves the group when it stops (a
        # rebalance): the settings change that turns static membership on replaces such pods,
        # and its batches settle one by one.
        dynamic = dynamic_members(group, self.names(workload, later))
        taken = next((index for index, leaves in enumerate(dynamic) if leaves), len(later))
        if taken <= 0:
            return state, []
        sizes = widened(state.sizes, state.batch - 1, taken)
        slid = state.moved(sizes=sizes)
        self.state = slid  # chunk() reads the widened batch from self.state
        added = tuple(self.names(workload, self.chunk()[len(chunk) :]))
        slid = slid.moved(
            opened=state.opened + added,
            opened_at=self.now,
            deadline=self.now + self.policy.batch_deadline_seconds,
        )
        self.state = slid
        return slid, self.replace_chunk(workload, self.chunk())[1]

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
            # A static member is released as soon as its pod exists: nothing is gathered for
            # it, and a gate opened before it starts lets the consumer go at once, where one
            # opened once seen waiting costs a look of the planner on every replacement's path.
            ready = (GateState.WAITING, GateState.PENDING) if state.static else (GateState.WAITING,)
            late = tuple(
                pod.name
                for pod in workload.live_pods
                if pod.ordinal in chunk and pod.updated and pod.gate in ready
            ) + self.strays(workload)
        elif state.mechanism is Mechanism.GATE_QUEUE:
            opened = set(state.opened)
            late = tuple(
                pod.name
                for pod in workload.live_pods
                if pod.name in opened and pod.gate is GateState.WAITING
            )
            if released_on_arrival(state.plan):
                room = max(self.batch_size() - len(opened), 0)
                arrived = [pod.name for pod in held_pods(workload) if pod.name not in opened]
                late += tuple(arrived[:room])
        else:
            late = ()
        if late:
            # A pod opened under an identity slot is opened again under the same one.
            remembered = decode_slots(state.slots)
            slots = tuple((name, remembered[name]) for name in late if name in remembered)
            together = not released_on_arrival(state.plan)
            actions.append(OpenGate(label, late, slots, together))
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
