"""A consumer workload and its pods as the rollout planner sees them (pure data).

Filled in from the Kubernetes API by rebalancer.clients.rolling through
rebalancer.planning.workload_views; everything the planner decides on is here, so the planner
never reads a raw object.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rebalancer.structs.gates import GateState
from rebalancer.structs.history_pods import PodLifecycle
from rebalancer.structs.specs import WorkloadKind

# On a Deployment the operator paused for a rollout: the pause is the operator's to undo (a
# Deployment paused without it is the user's, and stays paused).
ROLLOUT_HOLD_ANNOTATION = "rebalancer.dev/held-for-rollout"
# The field manager the API server records for the operator's writes (its client's user agent
# starts with it): how the planner tells its own partition from one another writer set.
FIELD_MANAGER = "rebalancer"


@dataclass(frozen=True)
class PodView:
    name: str
    uid: str
    # StatefulSet ordinal; None for a Deployment's pods.
    ordinal: int | None
    # Runs the revision the workload is rolling out (StatefulSet updateRevision, or the newest
    # ReplicaSet of a Deployment).
    updated: bool
    gate: GateState
    # GATE_BATCH_ANNOTATION: "<rollout id>/<batch>" of the batch that opened it.
    gate_batch: str | None
    # GATE_HELD_ANNOTATION as epoch seconds: when the operator last told the gate it is there.
    held_at: float | None
    ready: bool
    terminating: bool
    created_at: float
    # The consumer container's runs, for the history's pod-start and pod-stop records.
    lifecycle: PodLifecycle = field(default_factory=PodLifecycle)
    # No node and no PodScheduled condition: the scheduler has not looked at it (yet).
    unnoticed: bool = False
    # Its gate let it go without being opened (the gate saw no sign of the operator for its
    # bypass time), and the operator has not told it yet (GATE_BYPASSED_ANNOTATION).
    bypassed: bool = False
    # INSTANCE_ID_ANNOTATION: the identity slot the operator gave it (None: none yet).
    instance_id: str | None = None

    @property
    def sort_key(self) -> tuple[int, float, str]:
        return (self.ordinal if self.ordinal is not None else -1, self.created_at, self.name)


@dataclass(frozen=True)
class WorkloadView:
    kind: WorkloadKind
    name: str
    replicas: int  # spec.replicas: what the user (or the operator's scale step) asked for
    current_replicas: int  # status.replicas
    updated_replicas: int
    ready_replicas: int
    # StatefulSet: status.updateRevision / currentRevision. Deployment: the pod-template-hash of
    # the newest ReplicaSet / of the ReplicaSet with the most pods before it.
    update_revision: str
    current_revision: str
    generation: int
    observed_generation: int
    # StatefulSet only: spec.updateStrategy.rollingUpdate.partition, podManagementPolicy.
    partition: int | None = None
    pod_management: str | None = None
    # RollingUpdate or OnDelete (StatefulSet), RollingUpdate or Recreate (Deployment).
    update_strategy: str = "RollingUpdate"
    # Deployment only: spec.paused, and maxSurge / maxUnavailable resolved to pod counts.
    paused: bool = False
    max_surge: int | None = None
    max_unavailable: int | None = None
    # The pod template has the gate init container.
    gate_installed: bool = False
    # The gate runs as a native sidecar and holds only the join (GateHold.JOIN): the consumers
    # start while their batch gathers.
    gate_holds_join: bool = False
    # A container of the pod template takes its group.instance.id from INSTANCE_ID_ANNOTATION:
    # the operator hands each pod an identity slot when it opens its gate.
    identity_slots: bool = False
    # What the pod template sets its consumers' group.protocol and partition.assignment.strategy
    # to (KAFKA_* variables with literal values; None: not set there).
    group_protocol: str | None = None
    assignment_strategy: str | None = None
    # Deployment only: ROLLOUT_HOLD_ANNOTATION is set, and the template matches none of its
    # ReplicaSets (a paused Deployment does not create the new one, so no pod looks stale).
    held_for_rollout: bool = False
    template_pending: bool = False
    pods: tuple[PodView, ...] = ()
    # Who last wrote these fields (metadata.managedFields, newest first): the partition's
    # writer, the operator included; the pod template's and the replicas' last writer other
    # than the operator. None when the object does not say.
    partition_writer: str | None = None
    # Every field manager that owns the partition now (managedFields, status writes aside),
    # the operator included; () when none does (a field an applier dropped, then defaulted);
    # None when the object lists no managedFields, so ownership is not known.
    partition_owners: tuple[str, ...] | None = None
    template_writer: str | None = None
    replicas_writer: str | None = None
    # metadata.resourceVersion: a write conditional on nothing having changed since this view.
    resource_version: str | None = None

    @property
    def caught_up(self) -> bool:
        """The workload controller has seen the latest spec, so its status is current."""
        return self.observed_generation >= self.generation

    @property
    def live_pods(self) -> tuple[PodView, ...]:
        return tuple(sorted((pod for pod in self.pods if not pod.terminating), key=_key))


def _key(pod: PodView) -> tuple[int, float, str]:
    return pod.sort_key
