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

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from rebalancer.planning.autoscalers import (
    autoscaler_actions,
    describe_autoscalers,
    hpa_quiet_at,
)
from rebalancer.planning.rollout_actions import (
    Action,
    ClearDegraded,
    DeletePods,
    ForeignWrite,
    HoldGates,
    InstallGate,
    MarkDegraded,
    NoteBypassedGates,
    OpenGate,
    PauseDeployment,
    PauseScaledObject,
    RecordProgress,
    ResumeDeployment,
    ScaleWorkload,
    SetStatefulSetPartition,
    Wait,
)
from rebalancer.planning.rollout_plans import (
    RolloutSetup,
    advances_on_ready,
    batch_limit,
    batch_window_s,
    classify,
    gated,
    held_pods,
    held_template,
    plan_rollout,
    policy_problems,
    split_batches,
    static_budget_s,
    through_pods,
)
from rebalancer.planning.rollout_policies import PATH
from rebalancer.planning.rollout_states import (
    Mechanism,
    RolloutKind,
    RolloutPhase,
    RolloutState,
    stamp,
)
from rebalancer.structs.autoscalers import Autoscalers
from rebalancer.structs.gates import RESUME_ANNOTATION, GateState
from rebalancer.structs.snapshots import GroupSnapshot, Source
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import FIELD_MANAGER, PodView, WorkloadView

Phase = RolloutPhase
# The target's revision while a held Deployment's new template has no ReplicaSet yet.
PENDING_REVISION = "pending"
# A step follows at most this many transitions before it waits for the world to change.
MAX_TRANSITIONS = 8
POLICY_PROBLEM = "PolicyCannotBeMet"
# How soon to look again while waiting on something no timer bounds (a controller catching up).
RECHECK_SECONDS = 2.0
# How soon to look again while a batch waits for its pods to reach their gates: the last
# pod's gate is what the whole batch waits for, and every second until the operator sees it
# is a second added to the rollout. Two reads (the workload and its pods) per look, only
# while a batch gathers, which gatherSeconds bounds.
GATHER_RECHECK_SECONDS = 0.5
# An active rollout notes that it was stepped this often; a gap longer than ABSENCE_SECONDS is
# an operator outage, and its timers move on by the gap.
SEEN_EVERY_SECONDS = 30.0
ABSENCE_SECONDS = 90.0
# A batch's new pod that no scheduler has looked at for this long is created again (see
# unnoticed_replacements); a scheduler judges a new pod within a second or two.
UNNOTICED_POD_SECONDS = 20.0

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


@dataclass(frozen=True)
class Observation:
    """What the operator sees at one moment."""

    setup: RolloutSetup
    workload: WorkloadView | None  # None: the workload does not exist
    group: GroupSnapshot | None  # the observer's latest snapshot, if any
    rebalances: int | None = None  # the observer's running count (status.group.rebalances)
    spec_generation: int | None = None  # the ConsumerGroup's metadata.generation
    resume_token: str | None = None  # RESUME_ANNOTATION on the ConsumerGroup
    # The KEDA ScaledObject and HPA that target the workload (planning.autoscalers).
    autoscalers: Autoscalers = field(default_factory=Autoscalers)


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
        after, done = _Step(current, observation, now).advance()
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


class _Step:
    """One transition out of `state`: each phase's rule, with what they share."""

    def __init__(self, state: RolloutState, observation: Observation, now: float) -> None:
        self.state = state
        self.obs = observation
        self.setup = observation.setup
        self.policy = observation.setup.policy
        self.now = now

    # -- dispatch ---------------------------------------------------------------------------

    def advance(self) -> tuple[RolloutState, list[Action]]:
        state = self.state
        workload = self.obs.workload
        if not self.policy.enabled:
            return self.disabled()
        if state.phase is Phase.FAILED:
            return self.failed()
        if state.phase is Phase.PAUSED:
            return self.paused()
        if self.policy.paused:
            return self.pause()
        if state.phase.resting:
            return self.resting()
        if workload is None:
            return self.fail(
                "WorkloadNotFound",
                "the workload is gone; create it again or fix spec.workload",
            )
        if state.phase is not Phase.PLANNING:
            target = self.target(workload, state)
            if target != state.target and not _adopts(state.target, target):
                return self.superseded(workload, target)
            if target != state.target:
                # The held template got its ReplicaSet on the first resume: the same rollout.
                self.state = state = state.moved(target=target)
        if self.overridden(workload):
            return self.contest(workload)
        match state.phase:
            case Phase.PLANNING:
                return self.planning(workload)
            case Phase.BATCH_OPENING:
                return self.opening(workload)
            case Phase.BATCH_JOINING:
                return self.joining(workload)
            case _:
                return self.settling(workload)

    # -- resting: Idle and Completed --------------------------------------------------------

    def resting(self) -> tuple[RolloutState, list[Action]]:
        state = self.state
        workload = self.obs.workload
        actions: list[Action] = []
        if workload is None:
            return state, actions
        if self.held_for_us(workload) and not state.holding_deployment:
            # Paused by the operator for a rollout not planned yet (the settings write pauses
            # a Deployment with its new template), or a hold whose status was lost.
            if not workload.caught_up:
                return state, actions
            state = state.moved(holding_deployment=True)
            change = classify(
                self.setup, workload, self.obs.group, state.steady_replicas, self.autoscaled
            )
            if change is not None and change.mechanism is Mechanism.DEPLOYMENT_STEPS:
                return self.replan(state), actions
            # Nothing the planner steps by pausing: handed back just below.
        if state.holding_deployment and workload.kind is WorkloadKind.DEPLOYMENT:
            if workload.paused:
                actions.append(ResumeDeployment())
            state = state.moved(holding_deployment=False)
        if not workload.caught_up:
            return state, actions
        wants_parking = (
            self.policy.park_statefulsets
            and workload.kind is WorkloadKind.STATEFULSET
            and workload.update_strategy == "RollingUpdate"
        )
        # A partition left to another writer (see contest) is not taken back at rest: parking
        # it would only start the same fight again after every rollout.
        parking = wants_parking and not state.yielded
        parked = parking and workload.partition == workload.replicas
        change = classify(
            self.setup, workload, self.obs.group, state.steady_replicas, self.autoscaled
        )
        if change is not None:
            plan = plan_rollout(self.setup, workload, self.obs.group, change, state.steady_replicas)
            # Old pods a controller has yet to remove are no rollout once every new pod is in.
            if plan.sizes or plan.problems:
                return self.replan(state), actions
        state, flagged = self.flag_problems(state, workload)
        actions += flagged
        if state.steady_replicas != workload.replicas:
            state = state.moved(steady_replicas=workload.replicas)
        if parking:
            # Parked at its replicas, the partition keeps a template change from rolling before
            # the operator has planned it (the controller would replace a pod at once).
            if not parked:
                actions.append(SetStatefulSetPartition(workload.replicas))
            if not state.parked:
                state = state.moved(parked=True)
        elif state.parked and state.yielded:
            state = state.moved(parked=False)
        wants_gate = self.policy.gate_joins and self.policy.inject_gate
        # Adding the gate changes the template: only once the change cannot roll by itself.
        if wants_gate and not workload.gate_installed and (parked or not wants_parking):
            actions.append(InstallGate())
        return state, actions

    def replan(self, state: RolloutState, interference: str | None = None) -> RolloutState:
        """Planning a new rollout: nothing of the last one's progress carries over, nor its
        quarrel over the partition; `interference` says why it starts mid-rollout."""
        return state.moved(
            phase=Phase.PLANNING,
            phase_since=self.now,
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

    def superseded(self, workload: WorkloadView, target: str) -> tuple[RolloutState, list[Action]]:
        """The workload was changed under the rollout (a new template, other replicas): the
        rollout stops where it is and a new one takes what is left, which status and an Event
        say. Pods of the stopped rollout's batches that the new template reaches are replaced
        again; the StatefulSet controller replaces those at or above the partition itself."""
        state = self.state
        what = changed_target(state.target, target, workload)
        note = (
            f"rollout {state.rollout_id} stopped at batch {state.batch} of {state.batches}: "
            f"{what}; a new rollout takes what is left"
        )
        return self.replan(state, note), [ForeignWrite("RolloutSuperseded", note, warning=False)]

    # -- another writer's partition -----------------------------------------------------------

    def overridden(self, workload: WorkloadView) -> bool:
        """Whether another field manager moved the partition this rollout holds.

        Once a batch's partition is in place the operator changes it only when the next batch
        opens, always downwards: while a batch is out it must be the batch's lowest ordinal,
        and while the next gathers it is never below that one's. The value alone can be the
        operator's own from a step whose state was lost (a crash between acting and saving),
        so the partition's last writer (managedFields) must be someone else too.
        """
        state = self.state
        chunk = self.chunk()
        if (
            state.mechanism is not Mechanism.STATEFULSET_REPLACE
            or state.yielded
            or not chunk
            or workload.update_strategy != "RollingUpdate"
            or workload.partition is None
            or workload.partition_writer == FIELD_MANAGER
        ):
            return False
        wanted = min(chunk)
        if state.phase in (Phase.BATCH_JOINING, Phase.BATCH_SETTLING):
            return workload.partition != wanted
        return (
            state.phase is Phase.BATCH_OPENING and state.batch > 1 and workload.partition < wanted
        )

    def contest(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        """Set an overridden partition back once, saying who moved it; when the same happens
        again in this rollout, leave the partition to the other writer instead of fighting over
        it for good (a GitOps tool re-applying its manifest would), and release the remaining
        batches at their gates: the StatefulSet controller may then replace pods ahead of their
        batches, which wait at their gates until their batch opens."""
        state = self.state
        writer = workload.partition_writer or "another writer"
        wanted = min(self.chunk())
        where = f"during batch {state.batch} of {state.batches}"
        field = "spec.updateStrategy.rollingUpdate.partition"
        if state.contested_by is None:
            later = set(state.ordinals[sum(state.sizes[: state.batch]) :])
            live = {pod.ordinal for pod in workload.live_pods}
            if gated(self.setup, workload) and not later <= live:
                # The controller is replacing a pod of a later batch under the other writer's
                # partition: set back now, it would come back at the old revision and be
                # replaced again in its batch. Back at the new one it waits at its gate, and
                # the controller replaces no other pod before that one is Ready.
                return state, []
            note = f"{writer} set {field} to {workload.partition} {where}; set back to {wanted}"
            early = self.replaced_early(workload)
            if early:
                one = len(early) == 1
                if gated(self.setup, workload):
                    held = "waits at its gate for its" if one else "wait at their gates for their"
                else:
                    held = "joined before its" if one else "joined before their"
                note += (
                    f" (the StatefulSet controller had replaced {', '.join(early)} meanwhile, "
                    f"which {held} own {'batch' if one else 'batches'})"
                )
            after = state.moved(contested_by=writer, interference=_also(state.interference, note))
            return after, [
                SetStatefulSetPartition(wanted),
                ForeignWrite("PartitionOverridden", note, warning=True),
            ]
        note = (
            f"{writer} set {field} to {workload.partition} again {where}; the operator leaves "
            f"the partition to {writer} for the rest of this rollout rather than fight over it, "
            "and releases the remaining batches as their pods reach their gates (the "
            "StatefulSet controller may replace pods ahead of their batches); leave the field "
            f"out of what {writer} writes so that the operator can pace the StatefulSet"
        )
        after = state.moved(yielded=True, interference=_also(state.interference, note))
        return after, [ForeignWrite("PartitionContested", note, warning=True)]

    def replaced_early(self, workload: WorkloadView) -> list[str]:
        """Pods of later batches already at the new revision."""
        state = self.state
        later = set(state.ordinals[sum(state.sizes[: state.batch]) :])
        return [
            pod.name
            for pod in sorted(workload.live_pods, key=lambda pod: -(pod.ordinal or 0))
            if pod.ordinal in later and pod.updated
        ]

    def flag_problems(
        self, state: RolloutState, workload: WorkloadView
    ) -> tuple[RolloutState, list[Action]]:
        """Say at once, not at the next rollout, when the policy cannot be met; and when it can
        again."""
        problems = policy_problems(self.setup, workload, self.obs.group)
        if problems:
            summary = "; ".join(str(problem) for problem in problems)
            if state.reason == POLICY_PROBLEM and state.message == summary:
                return state, []
            flagged = state.moved(reason=POLICY_PROBLEM, message=summary)
            return flagged, [MarkDegraded(POLICY_PROBLEM, summary)]
        if state.reason == POLICY_PROBLEM:
            cleared = state.moved(reason=None, message=None)
            return cleared, [ClearDegraded("PolicyFixed", "the rollout policy can be met again")]
        return state, []

    # -- Planning ---------------------------------------------------------------------------

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

    # -- BatchOpening -----------------------------------------------------------------------

    def opening(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        match state.mechanism:
            case Mechanism.STATEFULSET_REPLACE:
                result = self.open_statefulset(workload)
            case Mechanism.DEPLOYMENT_STEPS:
                result = self.open_deployment_step(workload)
            case Mechanism.SCALE_STEPS:
                result = self.open_scale_step(workload)
            case _:
                result = self.open_gates(workload)
        after, actions = result
        if after.phase is Phase.BATCH_OPENING and state.deadline and self.now >= state.deadline:
            return self.fail(
                "BatchNotReleased",
                f"batch {state.batch} of {state.batches} could not be released within "
                f"{self.policy.batch_deadline_seconds} s: {self.missing(workload)}",
                actions=actions,
            )
        return after, actions

    def released(self, state: RolloutState, pods: Sequence[str]) -> RolloutState:
        group = self.obs.group
        return state.moved(
            phase=Phase.BATCH_JOINING,
            opened=tuple(pods),
            phase_since=self.now,
            opened_at=self.now,
            deadline=self.now + self.policy.batch_deadline_seconds,
            generation_at_open=group.generation if group is not None else None,
        )

    def open_gates(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        label = self.label()
        adopted = [
            pod.name
            for pod in workload.live_pods
            if pod.gate_batch == label and pod.gate in (GateState.OPEN, GateState.PASSED)
        ]
        if adopted:
            return self.released(state, adopted), []
        remaining = max(workload.replicas - len(through_pods(workload)), 0)
        if remaining == 0:
            return state.moved(phase=Phase.COMPLETED, phase_since=self.now), []
        size = self.batch_size()
        need = min(size, remaining)
        waiting = [pod for pod in held_pods(workload) if pod.gate is GateState.WAITING]
        gathered = len(waiting) >= need
        timed_out = state.gather_until is not None and self.now >= state.gather_until
        if not waiting or not (gathered or timed_out):
            return state, []
        if not timed_out and self.hpa_stepping():
            # The HPA scaled moments ago and may take its next step at its next sync: its
            # pods join with these rather than in a rebalance of their own.
            return state, []
        chosen = tuple(pod.name for pod in waiting[:size])
        return self.released(state, chosen), [OpenGate(label, chosen)]

    def open_statefulset(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        chunk = self.chunk()
        ready, actions = self.replace_chunk(workload, chunk)
        if not ready:
            return state, actions  # the partition first; pods once the controller has seen it
        names = tuple(self.names(workload, chunk))
        if state.static or not gated(self.setup, workload):
            return self.released(state, names), actions
        wanted = set(chunk)
        batch_pods = [pod for pod in workload.live_pods if pod.ordinal in wanted]
        label = self.label()
        if any(pod.gate_batch == label for pod in batch_pods):
            return self.released(state, names), actions
        arrived = [
            pod
            for pod in batch_pods
            if pod.updated and (pod.gate is GateState.WAITING or pod.gate.through)
        ]
        waiting = [pod.name for pod in arrived if pod.gate is GateState.WAITING]
        timed_out = state.gather_until is not None and self.now >= state.gather_until
        if len(arrived) == len(chunk) or (timed_out and waiting):
            strays = tuple(name for name in self.strays(workload) if name not in waiting)
            waiting += strays
            opens: list[Action] = [OpenGate(label, tuple(waiting))] if waiting else []
            # Strays join with the batch, and count as its members.
            return self.released(state, names + strays), actions + opens
        return state, actions + self.unnoticed_replacements(batch_pods)

    @property
    def autoscaled(self) -> bool:
        """An HPA (KEDA's or the user's) writes spec.replicas: the planner does not step it."""
        return self.obs.autoscalers.hpa is not None

    def hpa_stepping(self) -> bool:
        """Whether a scale-up waits for the HPA to leave the replicas alone a while."""
        if self.state.kind is RolloutKind.ROLLING_UPDATE:
            return False
        quiet_at = hpa_quiet_at(self.obs.autoscalers, self.policy.autoscaler_window_seconds)
        return quiet_at is not None and self.now < quiet_at

    def unnoticed_replacements(self, pods: Sequence[PodView]) -> list[Action]:
        """Delete a batch's new pods the scheduler has ignored for UNNOTICED_POD_SECONDS, so
        that their controller creates them again.

        kube-scheduler never schedules a StatefulSet pod that was deleted and created again
        under the same name while its pod watch was down (an API server restart): the relist
        shows it an update of the old, bound pod, and the new one stays Pending with no
        PodScheduled condition (kubernetes/kubernetes#93062; measured with v1.37.2 in
        tests/reliability/test_control_plane_faults.py). A pod the scheduler did judge
        (PodScheduled False: no room) is left alone: deleting it would not help."""
        stuck = [
            pod
            for pod in pods
            if pod.unnoticed
            and pod.updated
            and not pod.terminating
            and self.now - pod.created_at >= UNNOTICED_POD_SECONDS
        ]
        if not stuck:
            return []
        return [DeletePods(tuple(p.name for p in stuck), tuple(p.uid for p in stuck))]

    def strays(self, workload: WorkloadView) -> tuple[str, ...]:
        """New pods at their gates that no later batch will release: replaced by their
        controller before the operator got to them (before the partition was parked, or by
        its own rolling update within the partition). They join with the current batch."""
        state = self.state
        later = set(state.ordinals[sum(state.sizes[: state.batch]) :])
        chunk = set(self.chunk())
        return tuple(
            pod.name
            for pod in workload.live_pods
            if pod.updated
            and pod.gate is GateState.WAITING
            and pod.ordinal not in later
            and pod.ordinal not in chunk
        )

    def replace_chunk(
        self, workload: WorkloadView, chunk: Sequence[int]
    ) -> tuple[bool, list[Action]]:
        """Partition to the chunk's lowest ordinal, then the chunk's old pods deleted.

        Pods are deleted only once the controller has seen the partition: deleted earlier, a
        pod could come back at the old revision.
        """
        if not chunk:
            return True, []
        if workload.update_strategy == "RollingUpdate":
            lowest = min(chunk)
            if self.state.yielded:
                # Left to another writer: usable as long as it lets the batch's pods roll.
                if workload.partition is not None and workload.partition > lowest:
                    return False, []
            elif workload.partition != lowest:
                return False, [SetStatefulSetPartition(lowest)]
            if not workload.caught_up:
                return False, []
        wanted = set(chunk)
        old = [
            pod
            for pod in workload.live_pods
            if pod.ordinal in wanted and not pod.updated and not pod.terminating
        ]
        if not old:
            return True, []
        names = tuple(pod.name for pod in old)
        return True, [DeletePods(names, tuple(pod.uid for pod in old))]

    def open_deployment_step(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        goal = min(state.base + sum(state.sizes[: state.batch]), workload.replicas)
        if workload.updated_replicas >= goal:
            actions: list[Action] = []
            if state.batch < state.batches:
                actions.append(PauseDeployment())
                state = state.moved(holding_deployment=True)
            return self.released(state, ()), actions
        if workload.paused:
            return state.moved(holding_deployment=False), [ResumeDeployment()]
        return state, []

    def open_scale_step(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        goal = state.base + sum(state.sizes[: state.batch])
        actions: list[Action] = []
        if workload.replicas != goal:
            actions.append(ScaleWorkload(goal))
        return self.released(state, ()), actions

    # -- BatchJoining and BatchSettling -----------------------------------------------------

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
            actions.append(OpenGate(label, late))
        return actions

    def settling(self, workload: WorkloadView) -> tuple[RolloutState, list[Action]]:
        state = self.state
        if not (self.settled(workload) or self.back_in_time(workload)):
            return state.moved(phase=Phase.BATCH_JOINING, phase_since=self.now), []
        if state.settle_until is not None and self.now < state.settle_until:
            return state, []
        joined = state.members_joined + (len(state.opened) or self.batch_size())
        state = state.moved(members_joined=joined)
        if state.batch < state.batches:
            return self.begin_batch(state, state.batch + 1), []
        if state.mechanism is Mechanism.GATE_QUEUE:
            remaining = max(workload.replicas - len(through_pods(workload)), 0)
            if remaining:
                # Pods that missed their batch (gathering timed out) get batches of their own.
                change = classify(
                    self.setup, workload, self.obs.group, state.steady_replicas, self.autoscaled
                )
                limit = remaining
                if change is not None:
                    limit = batch_limit(self.setup, workload, change, remaining)
                extra = split_batches(remaining, limit)
                more = state.moved(sizes=state.sizes + extra)
                return self.begin_batch(more, state.batch + 1), []
        actions: list[Action] = []
        if state.mechanism is Mechanism.DEPLOYMENT_STEPS and workload.paused:
            actions.append(ResumeDeployment())
        done = state.moved(
            phase=Phase.COMPLETED,
            phase_since=self.now,
            holding_deployment=False,
            steady_replicas=workload.replicas,
            message=_also(
                f"{_plural(state.batches, 'batch')}, {_plural(joined, 'member')} joined",
                state.interference,
            ),
        )
        return done, actions

    def settled(self, workload: WorkloadView) -> bool:
        """The group is settled with this batch in it, as far as the figures tell."""
        state = self.state
        group = self.obs.group
        if group is None or state.opened_at is None or group.observed_at < state.opened_at:
            return False
        if not group.settled:
            return False
        live = {pod.name: pod for pod in workload.live_pods}
        batch = [live[name] for name in self.batch_names(workload) if name in live]
        if not all(pod.ready and pod.updated and pod.gate.through for pod in batch):
            return False
        if state.mechanism is Mechanism.STATEFULSET_REPLACE:
            by_ordinal = {pod.ordinal for pod in workload.live_pods if pod.updated}
            if not set(self.chunk()) <= by_ordinal:
                return False
        if state.mechanism is Mechanism.DEPLOYMENT_STEPS:
            goal = min(state.base + sum(state.sizes[: state.batch]), workload.replicas)
            ready = sum(1 for pod in workload.live_pods if pod.updated and pod.ready)
            if ready < goal:
                return False
        if state.mechanism is Mechanism.SCALE_STEPS:
            goal = state.base + sum(state.sizes[: state.batch])
            if workload.ready_replicas < goal:
                return False
        return self.members_in(group, workload, batch)

    def back_in_time(self, workload: WorkloadView) -> bool:
        """A batch of static members that may be followed by the next without the group
        settling: every pod of it Ready at the new revision within the static budget of its
        release, and the group still at the generation it had then (advances_on_ready)."""
        state = self.state
        if not advances_on_ready(self.setup, state.static, state.mechanism):
            return False
        if state.batch >= state.batches or state.opened_at is None:
            return False
        if self.now - state.opened_at > static_budget_s(self.setup):
            return False
        group = self.obs.group
        generation = group.generation if group is not None else None
        opened = state.generation_at_open
        if generation is not None and opened is not None and generation != opened:
            return False
        live = {pod.name: pod for pod in workload.live_pods}
        names = self.batch_names(workload)
        if not names or any(name not in live for name in names):
            return False
        return all(
            live[name].ready and live[name].updated and live[name].gate.through for name in names
        )

    def members_in(
        self, group: GroupSnapshot, workload: WorkloadView, batch: Sequence[PodView]
    ) -> bool:
        """Whether the group's members include the batch: by name when members say theirs,
        else by count, else by a new generation or time."""
        state = self.state
        names = {m.host for m in group.member_details} | {
            m.instance_id for m in group.member_details if m.instance_id
        }
        pods = {pod.name for pod in workload.live_pods}
        if names & pods:
            return all(pod.name in names for pod in batch)
        members_known = group.sources.get("members", Source.NONE) is not Source.NONE
        if members_known:
            expected = sum(1 for pod in workload.live_pods if pod.gate.through and pod.ready)
            return group.members >= expected
        if state.static and state.mechanism is Mechanism.STATEFULSET_REPLACE:
            return True
        if state.generation_at_open is not None and group.generation is not None:
            return group.generation > state.generation_at_open
        window = batch_window_s(self.setup, state.generation_at_open is None)
        return state.opened_at is not None and group.observed_at >= state.opened_at + window

    # -- Paused, Failed, disabled -----------------------------------------------------------

    def pause(self) -> tuple[RolloutState, list[Action]]:
        state = self.state
        actions: list[Action] = []
        if state.mechanism is Mechanism.DEPLOYMENT_STEPS and state.phase.active:
            actions.append(PauseDeployment())
            state = state.moved(holding_deployment=True)
        paused = state.moved(
            phase=Phase.PAUSED,
            paused_from=state.phase,
            paused_at=self.now,
            phase_since=self.now,
        )
        return paused, actions

    def paused(self) -> tuple[RolloutState, list[Action]]:
        state = self.state
        if self.policy.paused:
            return state, []
        back = state.paused_from or Phase.IDLE
        shift = self.now - (state.paused_at or self.now)

        def later(moment: float | None) -> float | None:
            return None if moment is None else moment + shift

        resumed = state.moved(
            phase=back,
            paused_from=None,
            paused_at=None,
            phase_since=self.now,
            gather_until=later(state.gather_until),
            deadline=later(state.deadline),
            settle_until=later(state.settle_until),
        )
        return resumed, []

    def fail(
        self,
        reason: str,
        what: str,
        *,
        state: RolloutState | None = None,
        actions: Sequence[Action] = (),
    ) -> tuple[RolloutState, list[Action]]:
        state = state or self.state
        workload = self.obs.workload
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
        failed = state.moved(
            phase=Phase.FAILED,
            phase_since=self.now,
            reason=reason,
            message=message,
            resume_token=self.obs.resume_token,
        )
        return failed, [*actions, MarkDegraded(reason, message)]

    def failed(self) -> tuple[RolloutState, list[Action]]:
        state = self.state
        workload = self.obs.workload
        resumed = self.obs.resume_token != state.resume_token
        respecified = (
            self.obs.spec_generation is not None
            and state.spec_generation is not None
            and self.obs.spec_generation != state.spec_generation
        )
        retargeted = workload is not None and (
            self.target(workload, state) != state.target or state.reason == "WorkloadNotFound"
        )
        if not (resumed or respecified or retargeted):
            return state, []
        why = (
            "resumed" if resumed else "the spec changed" if respecified else "the workload changed"
        )
        idle = state.moved(
            phase=Phase.IDLE,
            phase_since=self.now,
            reason=None,
            message=f"failed rollout cleared: {why}",
            resume_token=self.obs.resume_token,
        )
        return idle, [ClearDegraded("RolloutCleared", f"the failed rollout was cleared: {why}")]

    def disabled(self) -> tuple[RolloutState, list[Action]]:
        """Hand the workload back: nothing of it is left held, parked or paused."""
        state = self.state
        workload = self.obs.workload
        actions: list[Action] = []
        holding = parked = False
        if workload is not None:
            holding = workload.paused and (state.holding_deployment or self.held_for_us(workload))
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
            phase_since=state.phase_since if state.phase is Phase.IDLE else self.now,
            holding_deployment=holding,
            parked=parked,
            steady_replicas=state.steady_replicas,
            message=f"rollouts are not managed ({PATH}.enabled is false)",
        ).moved()
        return idle, actions

    # -- helpers ----------------------------------------------------------------------------

    def target(self, workload: WorkloadView, state: RolloutState) -> str:
        """What the workload is being brought to; a new one means a new rollout."""
        replicas = workload.replicas
        if state.mechanism is Mechanism.SCALE_STEPS and state.target_replicas is not None:
            ours = {state.base + sum(state.sizes[:n]) for n in range(len(state.sizes) + 1)}
            if replicas in ours:
                replicas = state.target_replicas
        revision = PENDING_REVISION if held_template(workload) else workload.update_revision
        return (
            f"{revision}@{replicas}:{workload.pod_management or '-'}:"
            f"{workload.update_strategy}:{'gated' if workload.gate_installed else 'ungated'}"
        )

    def held_for_us(self, workload: WorkloadView) -> bool:
        return (
            workload.kind is WorkloadKind.DEPLOYMENT
            and workload.paused
            and workload.held_for_rollout
        )

    def label(self) -> str:
        return f"{self.state.rollout_id}/{self.state.batch}"

    def batch_size(self) -> int:
        state = self.state
        if 1 <= state.batch <= len(state.sizes):
            return state.sizes[state.batch - 1]
        return 0

    def chunk(self) -> tuple[int, ...]:
        state = self.state
        start = sum(state.sizes[: state.batch - 1])
        return state.ordinals[start : start + self.batch_size()]

    def names(self, workload: WorkloadView, ordinals: Sequence[int]) -> list[str]:
        return [f"{workload.name}-{ordinal}" for ordinal in ordinals]

    def batch_names(self, workload: WorkloadView) -> tuple[str, ...]:
        if self.state.mechanism is Mechanism.STATEFULSET_REPLACE:
            return tuple(self.names(workload, self.chunk()))
        return self.state.opened

    def missing(self, workload: WorkloadView) -> str:
        state = self.state
        if state.mechanism is Mechanism.DEPLOYMENT_STEPS:
            return (
                f"Deployment {workload.name} has {workload.updated_replicas} updated pods, "
                f"{state.base + sum(state.sizes[: state.batch])} wanted"
            )
        if state.mechanism is Mechanism.SCALE_STEPS:
            return f"{workload.kind.value} {workload.name} did not take the scale step"
        chunk = self.chunk()
        if state.yielded and chunk and (workload.partition or 0) > min(chunk):
            return (
                f"StatefulSet {workload.name}'s partition is {workload.partition}, set by "
                f"{workload.partition_writer or 'another writer'}, above the batch's lowest "
                f"ordinal {min(chunk)}, so its pods are not replaced"
            )
        held = held_pods(workload)
        waiting = sum(1 for pod in held if pod.gate is GateState.WAITING)
        return (
            f"{waiting} pods are waiting at their gates and {len(held) - waiting} have not "
            "reached them (check kubectl get pods: unschedulable pods, image pulls, failing "
            "init containers)"
        )

    def describe_batch(self) -> str:
        opened = self.state.opened
        shown = ", ".join(opened[:5]) + (f" and {len(opened) - 5} more" if len(opened) > 5 else "")
        return f"{self.batch_size()} pods" + (f": {shown}" if shown else "")

    def describe_group(self) -> str:
        group = self.obs.group
        if group is None:
            return "the group has not been observed"
        text = f"the group is {group.state} with {group.members} members"
        if group.assigned_partitions is not None and group.total_partitions is not None:
            text += f", {group.assigned_partitions}/{group.total_partitions} partitions assigned"
        return text


def changed_target(before: str | None, after: str, workload: WorkloadView) -> str:
    """What changed between two targets (see _Step.target), and who changed it if known."""
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


def _also(said: str | None, more: str | None) -> str | None:
    """`more` after what was already said."""
    return "; ".join(text for text in (said, more) if text) or None


def _adopts(planned: str | None, seen: str) -> bool:
    """Whether a rollout planned on a held template goes on with the revision the controller
    gave that template once resumed (everything else about the target unchanged)."""
    if planned is None or not planned.startswith(f"{PENDING_REVISION}@"):
        return False
    revision, _, rest = seen.partition("@")
    return revision != PENDING_REVISION and rest == planned.partition("@")[2]


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
        Phase.BATCH_OPENING: f"{batch}: gathering its pods",
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


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("ch") else "s")


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
    """Whether the batch out now is followed by the next once its pods are Ready."""
    return state.batch < state.batches and advances_on_ready(
        observation.setup, state.static, state.mechanism
    )


def _next_wake(state: RolloutState, observation: Observation, now: float) -> float | None:
    """The next moment a timer changes something, if any comes before the group does."""
    moments: list[float] = []
    match state.phase:
        case Phase.BATCH_OPENING:
            moments += [t for t in (state.gather_until, state.deadline) if t is not None]
            # A batch of static members that follows on Ready waits only for the controller
            # to take the partition before its pod is replaced.
            quick = advances_on_ready(observation.setup, state.static, state.mechanism)
            # A Deployment resumed for this batch goes on replacing pods until it is paused
            # again: pods Ready at once (no readiness probe, no minReadySeconds) would all be
            # replaced within a resting poll.
            resumed = state.mechanism is Mechanism.DEPLOYMENT_STEPS and not state.holding_deployment
            if quick or resumed or _gathering(state, observation):
                moments.append(now + GATHER_RECHECK_SECONDS)
        case Phase.BATCH_JOINING:
            moments += [state.deadline] if state.deadline is not None else []
            if _quick(state, observation):
                # The replaced pod's Ready is what the next batch waits for, as when gathering.
                moments.append(now + GATHER_RECHECK_SECONDS)
        case Phase.BATCH_SETTLING:
            moments += [state.settle_until] if state.settle_until is not None else []
        case Phase.PLANNING:
            moments.append(now + RECHECK_SECONDS)
    bypass = observation.setup.policy.bypass_gate_after_seconds
    workload = observation.workload
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
