"""A small model of a workload, its pods, their gates and the group, to drive the rollout planner.

Not a test module: the rollout tests build worlds from it. It plays the StatefulSet controller
(recreating deleted pods at the revision their ordinal gets from the partition) and a group that
is settled a fixed time after its last member joined; the planner's actions are applied to it.
Rebalance counts for Kafka's timing come from the coordinator simulator, not from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from rebalancer.planning.rollout_actions import (
    Action,
    ClearDegraded,
    DeletePods,
    ForeignWrite,
    HoldGates,
    MarkDegraded,
    OpenGate,
    PauseDeployment,
    RecordProgress,
    ResumeDeployment,
    ScaleWorkload,
    SetStatefulSetPartition,
    refused,
)
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GateState
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import FIELD_MANAGER, PodView, WorkloadView

T0 = 1_700_000_000.0
# What the reconciler posts (Events, conditions) rather than writes to the workload.
SAID = (ForeignWrite, RecordProgress, MarkDegraded, ClearDegraded)


def setup_for(
    policy: RolloutPolicy | None = None,
    profile: BrokerProfile = BrokerProfile.APACHE_KAFKA,
    window_s: float = 3.0,
) -> RolloutSetup:
    return RolloutSetup(policy or RolloutPolicy(), profile, window_s)


@dataclass
class SimPod:
    name: str
    uid: str
    ordinal: int | None
    revision: str
    gated: bool
    created_at: float
    arrives_at: float  # its gate starts waiting (or, ungated, its consumer starts)
    opened_at: float | None = None
    batch: str | None = None
    held_at: float | None = None
    deleted_at: float | None = None
    unnoticed: bool = False  # the scheduler ignores it: it never starts

    def consumer_start(self) -> float | None:
        if not self.gated:
            return self.arrives_at
        if self.opened_at is None:
            return None
        return max(self.opened_at, self.arrives_at) + 0.01


@dataclass
class World:
    """One workload and its group. Times are absolute epoch seconds."""

    kind: WorkloadKind = WorkloadKind.STATEFULSET
    name: str = "orders"
    replicas: int = 6
    revision: str = "r1"
    current_revision: str = "r1"
    partition: int | None = 0
    # The field manager that last set the partition (the operator's actions set it as theirs).
    partition_writer: str | None = None
    # The object lists its managedFields: the partition's owners are known (its writer, or
    # nobody once the field was dropped).
    fields_listed: bool = True
    template_writer: str | None = None  # the last writer of the template but the operator
    paused: bool = False
    gate_installed: bool = True
    pod_management: str = "Parallel"
    # Seconds from a pod's creation until its gate (or ungated consumer) starts, per pod name.
    start_delay: Callable[[str, int], float] = lambda _name, _incarnation: 1.0
    restart_s: float = 2.0  # a deleted pod's replacement is created this long after
    join_s: float = 0.5  # from consumer start until it is a member
    ready_s: float = 0.3  # from consumer start until it is Ready
    settle_s: float = 3.5  # from the last join until the group is settled
    names_known: bool = True  # members report their pod names
    static: bool = False  # members join with their pod's name as group.instance.id
    protocol: str = "classic"  # what the broker says of the group: classic or consumer (KIP-848)
    assignor: str = "range"
    # Incarnations the scheduler never looks at (kubernetes/kubernetes#93062), per pod name.
    unnoticed: Callable[[str, int], bool] = lambda _name, _incarnation: False
    pods: dict[str, SimPod] = field(default_factory=dict)
    incarnations: dict[str, int] = field(default_factory=dict)
    log: list[tuple[float, Action]] = field(default_factory=list)
    # metadata.resourceVersion: every write to the workload (spec or status) moves it on.
    version: int = 1
    # Called between a step's look and its writes, with the step's actions: what happens to the
    # workload meanwhile (a controller pass, another writer).
    meanwhile: Callable[[World, Sequence[Action], float], None] | None = None

    # -- the controller -------------------------------------------------------------------

    def pod_name(self, ordinal: int) -> str:
        return f"{self.name}-{ordinal}"

    def create(self, name: str, ordinal: int | None, now: float, revision: str) -> None:
        incarnation = self.incarnations.get(name, 0) + 1
        self.incarnations[name] = incarnation
        self.pods[name] = SimPod(
            name=name,
            uid=f"{name}#{incarnation}",
            ordinal=ordinal,
            revision=revision,
            gated=self.gate_installed,
            created_at=now,
            arrives_at=now + self.start_delay(name, incarnation),
            unnoticed=self.unnoticed(name, incarnation),
        )
        if self.pods[name].unnoticed:
            self.pods[name].arrives_at = float("inf")

    def scale_to(self, replicas: int, now: float) -> None:
        self.replicas = replicas
        for ordinal in range(replicas):
            name = self.pod_name(ordinal)
            if name not in self.pods:
                self.create(name, ordinal, now, self.revision_for(ordinal))

    def set_partition(self, partition: int, writer: str, now: float, *, acted: bool = True) -> None:
        """Another writer sets the partition; the controller then (unless not `acted`: its
        pass has not seen the batch's pods Ready yet) makes a pass over it."""
        self.partition, self.partition_writer = partition, writer
        self.version += 1
        if acted:
            self.controller_pass(now)

    def drop_partition(self, now: float) -> None:
        """The partition's writer applies a manifest without it: the API server removes the
        field its only owner no longer applies and defaults it to 0, owned by nobody; the
        controller then makes a pass over it."""
        self.partition, self.partition_writer = 0, None
        self.version += 1
        self.controller_pass(now)

    def controller_pass(self, now: float) -> None:
        """The controller replaces the highest pod at or above the partition that is not at
        the new revision yet (one at a time, as the StatefulSet controller does while the
        replaced pod is not Ready), and writes its status."""
        stale = [
            pod
            for pod in self.pods.values()
            if pod.ordinal is not None
            and pod.ordinal >= (self.partition or 0)
            and pod.revision != self.revision
            and pod.deleted_at is None
        ]
        if stale:
            max(stale, key=lambda pod: pod.ordinal or 0).deleted_at = now
            self.version += 1

    def revision_for(self, ordinal: int) -> str:
        return self.revision if ordinal >= (self.partition or 0) else self.current_revision

    def tick(self, now: float) -> None:
        """Replace deleted pods once their restart time has passed."""
        for name, pod in list(self.pods.items()):
            if pod.deleted_at is not None and now >= pod.deleted_at + self.restart_s:
                del self.pods[name]
                if pod.ordinal is not None and pod.ordinal < self.replicas:
                    self.create(name, pod.ordinal, now, self.revision_for(pod.ordinal))
                self.version += 1
        if all(p.revision == self.revision for p in self.pods.values()):
            self.current_revision = self.revision

    def apply(self, actions: Sequence[Action], now: float) -> list[Action]:
        """Carry out `actions`; those carried out (a write conditional on a resourceVersion
        the workload has moved past is not, and a step with such a write posts nothing)."""
        done = [action for action in actions if not self.outdated(action)]
        silent = refused(actions, done)
        for action in done:
            if silent and isinstance(action, SAID):
                continue
            self.log.append((now, action))
            match action:
                case OpenGate(batch=batch, pods=names):
                    for name in names:
                        pod = self.pods.get(name)
                        if pod is not None and pod.opened_at is None:
                            pod.opened_at, pod.batch = now, batch
                case HoldGates(pods=names):
                    for name in names:
                        if name in self.pods:
                            self.pods[name].held_at = now
                case SetStatefulSetPartition(partition=partition):
                    if partition != self.partition:
                        self.partition, self.partition_writer = partition, FIELD_MANAGER
                        self.version += 1
                case DeletePods(pods=names, uids=uids):
                    for index, name in enumerate(names):
                        pod = self.pods.get(name)
                        if pod is None or pod.deleted_at is not None:
                            continue
                        if index < len(uids) and uids[index] != pod.uid:
                            continue
                        pod.deleted_at = now
                case ScaleWorkload(replicas=replicas):
                    self.scale_to(replicas, now)
                case PauseDeployment():
                    self.paused = True
                case ResumeDeployment():
                    self.paused = False
                case _:
                    pass
        return done

    def outdated(self, action: Action) -> bool:
        return isinstance(action, SetStatefulSetPartition) and action.resource_version not in (
            None,
            str(self.version),
        )

    # -- what the operator sees -------------------------------------------------------------

    def gate_state(self, pod: SimPod, now: float) -> GateState:
        if not pod.gated:
            return GateState.NONE
        start = pod.consumer_start()
        if start is not None and now >= start:
            return GateState.PASSED
        if pod.opened_at is not None:
            return GateState.OPEN
        return GateState.WAITING if now >= pod.arrives_at else GateState.PENDING

    def workload(self, now: float) -> WorkloadView:
        views = []
        for pod in self.pods.values():
            start = pod.consumer_start()
            views.append(
                PodView(
                    name=pod.name,
                    uid=pod.uid,
                    ordinal=pod.ordinal,
                    updated=pod.revision == self.revision,
                    gate=self.gate_state(pod, now),
                    gate_batch=pod.batch,
                    held_at=pod.held_at,
                    ready=start is not None and now >= start + self.ready_s,
                    terminating=pod.deleted_at is not None,
                    created_at=pod.created_at,
                    unnoticed=pod.unnoticed,
                )
            )
        return WorkloadView(
            kind=self.kind,
            name=self.name,
            replicas=self.replicas,
            current_replicas=len(self.pods),
            updated_replicas=sum(1 for p in self.pods.values() if p.revision == self.revision),
            ready_replicas=sum(1 for v in views if v.ready),
            update_revision=self.revision,
            current_revision=self.current_revision,
            generation=1,
            observed_generation=1,
            partition=self.partition if self.kind is WorkloadKind.STATEFULSET else None,
            partition_writer=self.partition_writer,
            partition_owners=((self.partition_writer,) if self.partition_writer else ())
            if self.fields_listed
            else None,
            template_writer=self.template_writer,
            pod_management=self.pod_management,
            paused=self.paused,
            gate_installed=self.gate_installed,
            pods=tuple(sorted(views, key=lambda v: v.name)),
            resource_version=str(self.version),
        )

    def members(self, now: float) -> list[tuple[str, float]]:
        """(name, joined at) of every member; a deleted pod stays one until it is gone."""
        found = []
        for pod in self.pods.values():
            start = pod.consumer_start()
            if start is None or now < start + self.join_s:
                continue
            if pod.deleted_at is not None and now >= pod.deleted_at:
                continue
            found.append((pod.name, start + self.join_s))
        return found

    def group(self, now: float) -> GroupSnapshot:
        members = self.members(now)
        changes = [joined for _, joined in members]
        changes += [p.deleted_at for p in self.pods.values() if p.deleted_at is not None]
        pending = any(
            (start := p.consumer_start()) is not None and start <= now < start + self.join_s
            for p in self.pods.values()
        )
        last = max((moment for moment in changes if moment <= now), default=None)
        if not members:
            state = "Empty"
        elif pending or (last is not None and now < last + self.settle_s):
            state = "PreparingRebalance"
        else:
            state = "Stable"
        details = tuple(
            MemberSummary(
                host=name if self.names_known else f"10.0.0.{index}",
                member_id=f"{name}-id",
                instance_id=name if self.static else None,
                generation=None,
                partitions=1,
                source=Source.MEMBER_REPORTS,
            )
            for index, (name, _) in enumerate(sorted(members))
        )
        return GroupSnapshot(
            state=state,
            protocol=self.protocol,
            assignor=self.assignor,
            generation=None,
            members=len(members),
            member_details=details,
            assigned_partitions=12 if state == "Stable" else 0,
            total_partitions=12,
            lag=None,
            observed_at=now,
            sources={"members": Source.MEMBER_REPORTS},
        )

    def observe(self, setup: RolloutSetup, now: float, **extra: object) -> Observation:
        return Observation(
            setup=setup,
            workload=self.workload(now),
            group=self.group(now),
            **extra,  # type: ignore[arg-type]
        )

    def opened_batches(self) -> dict[str, str]:
        """pod uid -> the batch that opened it."""
        return {pod.uid: pod.batch for pod in self.pods.values() if pod.batch}


def roundtrip(state: RolloutState) -> RolloutState:
    """What a restarted operator reads back from status.rollout."""
    return RolloutState.from_status(json.loads(json.dumps(state.to_status())))


def drive(
    world: World,
    setup: RolloutSetup,
    *,
    start: float = T0,
    seconds: float = 300.0,
    tick: float = 1.0,
    state: RolloutState | None = None,
    restart_at: int | None = None,
    crash_at: int | None = None,
    until: Callable[[RolloutState], bool] | None = None,
) -> tuple[RolloutState, list[RolloutState]]:
    """Step the planner every `tick` seconds and apply its actions to `world`.

    restart_at: before that step, the state goes through status and back (an operator restart).
    crash_at: that step's actions are applied but its state is lost (a crash before saving).
    """
    state = state or RolloutState()
    history = [state]
    steps = round(seconds / tick)
    for index in range(steps):
        now = start + index * tick
        world.tick(now)
        if index == restart_at:
            state = roundtrip(state)
        after, actions = step(state, world.observe(setup, now), now)
        if world.meanwhile is not None:
            world.meanwhile(world, actions, now)
        done = world.apply(actions, now)
        # A refused conditional write: the reconciler neither saves the step nor posts it.
        if index != crash_at and not refused(actions, done):
            state = after
        history.append(state)
        if until is not None and until(state):
            break
    return state, history


def with_pods(world: World, now: float, *, revision: str | None = None) -> World:
    """`world` with its replicas' pods already running (consumers started long ago)."""
    for ordinal in range(world.replicas):
        name = world.pod_name(ordinal)
        world.create(name, ordinal, now - 100, revision or world.revision)
        pod = world.pods[name]
        world.pods[name] = replace(pod, arrives_at=now - 99, opened_at=now - 99)
    return world
