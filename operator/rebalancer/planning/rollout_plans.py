"""Deciding a rollout: what changed, in how many batches, and how long each batch needs.

Join windows come from the coordinator model: the caller computes the window of an Empty
group with rebalancer.simulation.join_window (the planning and simulation layers do not import
each other) and hands it in through RolloutSetup. What this module adds:

- Apache Kafka / Redpanda (KIP-134): an Empty group waits group.initial.rebalance.delay.ms after
  its first JoinGroup, and one more step of it when members joined meanwhile (the window
  slides), never past the rebalance timeout (max.poll.interval.ms). A group that has members
  has no such delay: a join makes every member rejoin at its next heartbeat and poll, and joins
  that land before the last of them share the rebalance. Redpanda times joins like Kafka; its
  delay is a dynamic setting, which changes who may tune it, not the plan.

Batches are released together (the join gate makes pods of one batch start within
milliseconds of each other), so a batch's JoinGroups land well inside any of these windows;
the windows matter for how long a batch takes, for the deadline check, and for pods that are
not gated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rebalancer.planning.rollout_states import Mechanism, RolloutKind
from rebalancer.planning.startup_history import StartupHistory
from rebalancer.structs.brokers import BrokerProfile, GroupState
from rebalancer.structs.gates import GateState
from rebalancer.structs.plan_costs import ArrivalQuestion, PlanCost
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.rollout_policy import PATH, RolloutPolicy, StaticMembership
from rebalancer.structs.snapshots import GroupSnapshot
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import PodView, WorkloadView

# What a rebalance costs besides waiting for joins: the JoinGroup round trips, the leader's
# assignment and the SyncGroups (the simulator charges 0.1 s for each side).
PROTOCOL_SECONDS = 0.2
# How long a member takes from its heartbeat's REBALANCE_IN_PROGRESS to its JoinGroup: its
# application's next poll(). Not knowable from settings; one second is a typical batch.
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RolloutSetup:
    """What stays put during a rollout: the policy and the broker's timing."""

    policy: RolloutPolicy
    profile: BrokerProfile
    # simulation.join_window(CoordinatorSettings(policy.initial_rebalance_delay_ms), profile,
    # ConsumerSettings(policy.consumers...)): how long an Empty group gathers joins.
    join_window_s: float
    # The coordinator model's cost of each arrival plan (simulation.estimate_arrival_plans);
    # None: no model, every batch is gathered.
    estimate: Callable[[ArrivalQuestion], tuple[PlanCost, ...]] | None = None
    # spec.policy.protocol: what the user says the consumers speak (auto: not said).
    protocol: ProtocolChoice = ProtocolChoice.AUTO
    # The workload's measured start-ups (planning.startup_history), which the arrival plans
    # are costed on when there are enough; None: not read.
    startups: StartupHistory | None = None

    @property
    def session_s(self) -> float:
        return self.policy.consumers.session_timeout_ms / 1000.0

    @property
    def heartbeat_s(self) -> float:
        return self.policy.consumers.heartbeat_interval_ms / 1000.0

    @property
    def rebalance_timeout_s(self) -> float:
        return self.policy.consumers.max_poll_interval_ms / 1000.0


@dataclass(frozen=True)
class Change:
    """What a rollout has to bring into the group."""

    kind: RolloutKind
    mechanism: Mechanism
    static: bool


@dataclass(frozen=True)
class PlannedBatch:
    number: int  # 1-based
    size: int
    # Pods known at planning time to belong to this batch (StatefulSet ordinals, pods already
    # waiting at their gates); empty when the batch takes whichever pods arrive first.
    pods: tuple[str, ...]
    # The batch's JoinGroups must land within this many seconds of the first to share one
    # rebalance (the gate makes them land within milliseconds).
    window_s: float
    # Seconds from the rollout's start before which the batch cannot start, if every earlier
    # batch takes its expected time and settles for settleSeconds.
    earliest_start_s: float
    # Seconds from release until the group is expected to be settled again.
    expected_s: float


@dataclass(frozen=True)
class RolloutPlan:
    change: Change
    batches: tuple[PlannedBatch, ...]
    # The mechanism's starting point: updated pods (Deployment steps) or replicas (scale steps).
    base: int
    target_replicas: int
    ordinals: tuple[int, ...]
    problems: tuple[FieldProblem, ...]
    notes: tuple[str, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(batch.size for batch in self.batches)


def split_batches(total: int, limit: int) -> tuple[int, ...]:
    """`total` pods in the fewest batches of at most `limit`, as even as possible, larger first."""
    if total <= 0:
        return ()
    limit = max(1, limit)
    count = math.ceil(total / limit)
    small, extra = divmod(total, count)
    return tuple(small + 1 if index < extra else small for index in range(count))


def group_members(group: GroupSnapshot | None) -> int:
    if group is None:
        return 0
    return group.members


def group_is_empty(group: GroupSnapshot | None) -> bool:
    """Whether the next join meets an Empty group (the only one with an initial delay)."""
    return group is None or group.members == 0 or group.state in (GroupState.EMPTY, GroupState.DEAD)


def stable_window_s(setup: RolloutSetup) -> float:
    """How long a group that has members keeps a rebalance open to more joiners (at least)."""
    return setup.heartbeat_s


def batch_window_s(setup: RolloutSetup, empty: bool) -> float:
    return setup.join_window_s if empty else stable_window_s(setup)


def expected_batch_seconds(setup: RolloutSetup, empty: bool, size: int, static: bool) -> float:
    """From a batch's release until the group is settled, if its joins land together."""
    if empty:
        delay = setup.join_window_s
        # Joins during the first delay buy one more step of it (bounded by the rebalance timeout).
        slide = min(delay, max(setup.rebalance_timeout_s - delay, 0.0)) if size > 1 else 0.0
        return delay + slide + PROTOCOL_SECONDS
    return setup.heartbeat_s + POLL_SECONDS + PROTOCOL_SECONDS


def static_budget_s(setup: RolloutSetup) -> float:
    """How long a static member may be away without the group rebalancing.

    Kafka and Redpanda keep a static member's slot until its session expires, which can be as
    early as one session timeout after its last heartbeat (up to one heartbeat interval before
    it stopped).
    """
    return max(setup.session_s - setup.heartbeat_s, 0.0)


def resolve_static(
    policy: RolloutPolicy, workload: WorkloadView, group: GroupSnapshot | None
) -> bool:
    if policy.static_membership is StaticMembership.ENABLED:
        return True
    if policy.static_membership is StaticMembership.DISABLED:
        return False
    if workload.kind is WorkloadKind.DEPLOYMENT:
        # Its consumers join under the identity slots the operator hands out at the gate.
        return workload.identity_slots and workload.gate_installed
    if workload.kind is not WorkloadKind.STATEFULSET or group is None:
        return False
    details = group.member_details
    return bool(details) and all(member.instance_id for member in details)


def gated(setup: RolloutSetup, workload: WorkloadView) -> bool:
    return setup.policy.gate_joins and workload.gate_installed


def stale_pods(workload: WorkloadView) -> tuple[PodView, ...]:
    """Live pods that still run the old revision and are part of the workload's desired set."""
    return tuple(
        pod
        for pod in workload.live_pods
        if not pod.updated and (pod.ordinal is None or pod.ordinal < workload.replicas)
    )


def ordinals_to_replace(workload: WorkloadView) -> tuple[int, ...]:
    """The ordinals a StatefulSet replace rolls, highest first: every one below the replicas
    but those whose pod runs the new revision past its gate. A pod its controller is replacing
    at this moment (terminating, or not created again yet) is one of them: left out, it would
    come back at its gate and be opened with whichever batch is out then, out of ordinal order
    and beyond the batch size."""
    done = {
        pod.ordinal
        for pod in workload.live_pods
        if pod.ordinal is not None and pod.updated and pod.gate.through
    }
    return tuple(ordinal for ordinal in range(workload.replicas - 1, -1, -1) if ordinal not in done)


def through_pods(workload: WorkloadView) -> tuple[PodView, ...]:
    """Live pods of the new revision that are running (or starting) their consumer."""
    return tuple(pod for pod in workload.live_pods if pod.updated and pod.gate.through)


def held_pods(workload: WorkloadView) -> tuple[PodView, ...]:
    """Live pods of the new revision whose gate has not let them through yet."""
    return tuple(
        pod
        for pod in workload.live_pods
        if pod.updated and pod.gate in (GateState.PENDING, GateState.WAITING)
    )


def classify(
    setup: RolloutSetup,
    workload: WorkloadView,
    group: GroupSnapshot | None,
    steady_replicas: int | None,
    autoscaled: bool = False,
) -> Change | None:
    """The rollout the workload needs now, or None. `autoscaled`: an HPA writes spec.replicas,
    so a scale-up is never stepped through it (scaleSteps would fight the HPA)."""
    static = resolve_static(setup.policy, workload, group)
    stale = stale_pods(workload)
    with_gate = gated(setup, workload)
    if held_template(workload) and not with_gate:
        # Paused in its template write (rollout_holds): no pod looks stale before the
        # Deployment is resumed, yet every one is to be replaced.
        return Change(RolloutKind.ROLLING_UPDATE, Mechanism.DEPLOYMENT_STEPS, static)
    if stale and workload.kind is WorkloadKind.STATEFULSET:
        return Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static)
    if stale and workload.kind is WorkloadKind.DEPLOYMENT:
        mechanism = Mechanism.GATE_QUEUE if with_gate else Mechanism.DEPLOYMENT_STEPS
        if mechanism is Mechanism.DEPLOYMENT_STEPS and workload.update_strategy == "Recreate":
            return None
        return Change(RolloutKind.ROLLING_UPDATE, mechanism, static)
    kind = RolloutKind.COLD_START if group_is_empty(group) else RolloutKind.SCALE_UP
    if held_pods(workload):
        return Change(kind, Mechanism.GATE_QUEUE, static)
    if (
        not with_gate
        and setup.policy.scale_steps
        and not autoscaled
        and steady_replicas is not None
        and workload.replicas > steady_replicas
    ):
        return Change(kind, Mechanism.SCALE_STEPS, static)
    return None


def held_template(workload: WorkloadView) -> bool:
    """A Deployment the operator paused with a template its controller has not rolled yet."""
    return (
        workload.kind is WorkloadKind.DEPLOYMENT
        and workload.paused
        and workload.held_for_rollout
        and workload.template_pending
    )


def advances_on_ready(
    setup: RolloutSetup,
    static: bool,
    mechanism: Mechanism | None,
    kind: RolloutKind | None,
) -> bool:
    """Whether a batch of static members is followed by the next once its pods are Ready.

    A static member back within its session takes its old assignment without a rebalance
    (KIP-345): there is nothing for the group to settle, and waiting for a settle check after
    every batch would only make the rollout slower than the StatefulSet controller, which waits
    for Ready alone. Each batch is therefore followed by the next as soon as its pods are Ready
    and were away no longer than their session covers (static_budget_s), as long as the group
    has not moved to a new generation; the full settle check runs after the last batch, or
    after one that was away longer. The same holds for a Deployment's rolling update whose new
    pods take over the leaving pods' identity slots (planning.identity_slots).
    """
    if not static or static_budget_s(setup) <= 0:
        return False
    if mechanism is Mechanism.STATEFULSET_REPLACE:
        return True
    return mechanism is Mechanism.GATE_QUEUE and kind is RolloutKind.ROLLING_UPDATE


def batch_limit(setup: RolloutSetup, workload: WorkloadView, change: Change, total: int) -> int:
    """The most pods a batch takes. A maxBatchSize above what is to be released needs no
    check: split_batches caps every batch at the pods there are, so a workload an autoscaler
    runs at fewer replicas than maxBatchSize (KEDA activating it from zero at 1) rolls out as
    usual."""
    policy = setup.policy
    limit = policy.max_batch_size
    if change.kind is RolloutKind.ROLLING_UPDATE and policy.update_batch_size is not None:
        limit = policy.update_batch_size
    if limit is None:
        if change.kind is RolloutKind.ROLLING_UPDATE:
            limit = max(1, math.ceil(workload.replicas / 4))
        else:
            limit = max(1, total)
    if (
        change.mechanism is Mechanism.GATE_QUEUE
        and change.kind is RolloutKind.ROLLING_UPDATE
        and workload.kind is WorkloadKind.DEPLOYMENT
        and workload.update_strategy == "RollingUpdate"
        and workload.max_surge is not None
        and workload.max_unavailable is not None
    ):
        # Gated new pods are not Ready, so the Deployment controller creates no more of them
        # than maxSurge + maxUnavailable before the operator opens some.
        limit = min(limit, max(1, workload.max_surge + workload.max_unavailable))
    return limit


def plan_rollout(
    setup: RolloutSetup,
    workload: WorkloadView,
    group: GroupSnapshot | None,
    change: Change,
    steady_replicas: int | None = None,
) -> RolloutPlan:
    """Batches for `change`, with their windows and earliest starts, and any problems."""
    ordinals: tuple[int, ...] = ()
    base = 0
    target = workload.replicas
    if change.mechanism is Mechanism.STATEFULSET_REPLACE:
        ordinals = ordinals_to_replace(workload)
        total = len(ordinals)
    elif change.mechanism is Mechanism.DEPLOYMENT_STEPS:
        base = workload.updated_replicas
        total = max(workload.replicas - base, 0)
    elif change.mechanism is Mechanism.SCALE_STEPS:
        base = steady_replicas if steady_replicas is not None else workload.current_replicas
        total = max(target - base, 0)
    else:
        total = max(workload.replicas - len(through_pods(workload)), 0)
    sizes = split_batches(total, batch_limit(setup, workload, change, total))
    pods_by_batch = _pods_by_batch(workload, change, sizes, ordinals)
    empty = group_is_empty(group)
    batches: list[PlannedBatch] = []
    clock = 0.0
    for index, size in enumerate(sizes):
        first_empty = empty and index == 0
        # A dynamic StatefulSet batch leaves before it joins: its members' LeaveGroups cost
        # one rebalance, their joins another.
        expected = expected_batch_seconds(setup, first_empty, size, change.static)
        if change.mechanism is Mechanism.STATEFULSET_REPLACE and not change.static:
            expected += expected_batch_seconds(setup, False, size, False)
        batches.append(
            PlannedBatch(
                number=index + 1,
                size=size,
                pods=pods_by_batch[index],
                window_s=batch_window_s(setup, first_empty),
                earliest_start_s=round(clock, 3),
                expected_s=round(expected, 3),
            )
        )
        clock += expected + setup.policy.settle_seconds
    problems = check_rollout(setup, workload, group, change, sizes)
    return RolloutPlan(
        change=change,
        batches=tuple(batches),
        base=base,
        target_replicas=target,
        ordinals=ordinals,
        problems=tuple(problems),
        notes=tuple(plan_notes(setup, workload, change)),
    )


def _pods_by_batch(
    workload: WorkloadView, change: Change, sizes: Sequence[int], ordinals: tuple[int, ...]
) -> list[tuple[str, ...]]:
    """The pods each batch replaces (highest ordinal first) or lets go from the gate queue;
    no names where the batch's pods are not known ahead (steps of a Deployment or a scale)."""
    pods_by_batch: list[tuple[str, ...]] = []
    if change.mechanism is Mechanism.STATEFULSET_REPLACE:
        start = 0
        for size in sizes:
            chunk = ordinals[start : start + size]
            pods_by_batch.append(tuple(f"{workload.name}-{ordinal}" for ordinal in chunk))
            start += size
    elif change.mechanism is Mechanism.GATE_QUEUE:
        waiting = [pod.name for pod in held_pods(workload) if pod.gate is GateState.WAITING]
        start = 0
        for size in sizes:
            pods_by_batch.append(tuple(waiting[start : start + size]))
            start += size
    else:
        pods_by_batch = [() for _ in sizes]
    return pods_by_batch


def check_rollout(
    setup: RolloutSetup,
    workload: WorkloadView,
    group: GroupSnapshot | None,
    change: Change,
    sizes: tuple[int, ...],
) -> list[FieldProblem]:
    """Why the policy cannot be met on this workload and broker, each with its fix."""
    policy = setup.policy
    problems: list[FieldProblem] = []
    empty = group_is_empty(group)
    first = sizes[0] if sizes else 1
    needed = expected_batch_seconds(setup, empty, first, change.static)
    if change.mechanism is Mechanism.STATEFULSET_REPLACE and not change.static:
        needed += expected_batch_seconds(setup, False, first, False)
    if policy.batch_deadline_seconds < needed:
        window = batch_window_s(setup, empty)
        problems.append(
            FieldProblem(
                f"{PATH}.batchDeadlineSeconds",
                f"({policy.batch_deadline_seconds}) is shorter than one batch needs on "
                f"{setup.profile.value}: a join window of {window:.1f} s "
                f"({_window_reason(setup, empty)}) and the rebalance around it, "
                f"{needed:.1f} s in all",
                f"set batchDeadlineSeconds to at least {math.ceil(2 * needed)}",
            )
        )
    gathers = len(sizes) > 0 and max(sizes) > 1 and not change.static
    if (
        gated(setup, workload)
        and workload.kind is WorkloadKind.STATEFULSET
        and workload.pod_management == "OrderedReady"
        and gathers
    ):
        problems.append(
            FieldProblem(
                f"StatefulSet/{workload.name} spec.podManagementPolicy",
                "is OrderedReady: the StatefulSet creates a pod only once the one before it is "
                "Ready, and a gated pod is not Ready before its batch opens, so a batch of "
                "more than one pod never gathers",
                "recreate the StatefulSet with podManagementPolicy: Parallel (the field cannot "
                f"be changed in place), or set {PATH}.maxBatchSize: 1",
            )
        )
    if change.static and change.mechanism is Mechanism.STATEFULSET_REPLACE:
        budget = static_budget_s(setup)
        chosen = policy.static_restart_budget_seconds
        if chosen is not None and chosen > budget:
            problems.append(
                FieldProblem(
                    f"{PATH}.staticRestartBudgetSeconds",
                    f"({chosen}) is longer than a static member can be away on "
                    f"{setup.profile.value} with a session timeout of {setup.session_s:g} s "
                    f"({budget:.1f} s): each restart would rebalance the group",
                    f"set it to at most {math.floor(budget)}, or raise the consumers' "
                    f"session.timeout.ms and {PATH}.consumers.sessionTimeoutMs with it",
                )
            )
    return problems


def policy_problems(
    setup: RolloutSetup, workload: WorkloadView, group: GroupSnapshot | None
) -> list[FieldProblem]:
    """Problems any rollout of this workload would meet, checked before one is needed.

    It asks check_rollout about the rollouts the workload can have: every replica joining (a
    cold start or scale-up) and, for a StatefulSet, a rolling update of every replica.
    """
    static = resolve_static(setup.policy, workload, group)
    kind = RolloutKind.COLD_START if group_is_empty(group) else RolloutKind.SCALE_UP
    changes = [Change(kind, Mechanism.GATE_QUEUE, static)]
    if workload.kind is WorkloadKind.STATEFULSET:
        changes.append(Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static))
    found: dict[str, FieldProblem] = {}
    for change in changes:
        total = workload.replicas
        sizes = split_batches(total, batch_limit(setup, workload, change, total))
        for problem in check_rollout(setup, workload, group, change, sizes):
            found.setdefault(problem.path, problem)
    return list(found.values())


def plan_notes(setup: RolloutSetup, workload: WorkloadView, change: Change) -> list[str]:
    """Things the user should know about how this rollout will go, that are not errors."""
    notes: list[str] = []
    policy = setup.policy
    if policy.gate_joins and not workload.gate_installed:
        notes.append(
            f"the pod template of {workload.kind.value} {workload.name} has no "
            "rebalancer-gate init container, so pods join as they start; set "
            f"{PATH}.injectGate: true or add the container to batch their joins"
        )
    if (
        change.mechanism is Mechanism.STATEFULSET_REPLACE
        and change.static
        and policy.static_restart_budget_seconds is None
    ):
        notes.append(
            f"static members restart without a rebalance if each is back within "
            f"{static_budget_s(setup):.0f} s"
        )
    if change.static and change.mechanism is Mechanism.GATE_QUEUE and workload.identity_slots:
        notes.append(
            "each new pod joins under the group.instance.id (identity slot) of a pod that "
            "left, so the coordinator hands it that member's partitions without a rebalance; "
            "where no pod has left, the operator deletes an old pod in the same step. The "
            "session timeout must cover the time from an old consumer's stop to its "
            f"successor's join ({static_budget_s(setup):.0f} s now); a scale-down costs a "
            "session timeout per removed member (a static member sends no LeaveGroup)"
        )
    elif advances_on_ready(setup, change.static, change.mechanism, change.kind):
        notes.append(
            "pods are replaced in a sliding window of the batch size: as each replaced pod is "
            "Ready the next is replaced, without waiting for the group to settle (static "
            "members take their assignment back without a rebalance), as long as the last "
            f"replacement is no older than {static_budget_s(setup):.0f} s and the group kept "
            "its generation; the group must settle after the last pod, or when the window "
            "stops"
        )
    if change.kind is RolloutKind.COLD_START and setup.join_window_s == 0:
        notes.append(
            "group.initial.rebalance.delay.ms is 0: even joins released together cost a "
            "rebalance for the first member and one for the rest"
        )
    return notes


def _window_reason(setup: RolloutSetup, empty: bool) -> str:
    if empty:
        return "group.initial.rebalance.delay.ms of an Empty group"
    return "members rejoin at their next heartbeat"
