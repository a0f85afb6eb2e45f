"""What the rollout planner asks for: declarative actions the actuator carries out.

Each action states an end result, not a change ("the partition is n", not "lower it by k"), so
carrying one out twice, or after an operator restart, changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpenGate:
    """Release these pods: write `open` and the batch id on each pod's gate annotation."""

    batch: str  # "<rollout id>/<batch number>"
    pods: tuple[str, ...]


@dataclass(frozen=True)
class HoldGates:
    """Tell these waiting pods' gates the operator is here (refresh their held-at annotation)."""

    pods: tuple[str, ...]


@dataclass(frozen=True)
class SetStatefulSetPartition:
    """spec.updateStrategy.rollingUpdate.partition = partition."""

    partition: int


@dataclass(frozen=True)
class DeletePods:
    """Delete these pods so their controller recreates them at the revision being rolled out.

    `uids` (same order) make each delete conditional on the pod still being the one the
    planner saw, so a replacement that took its name in the meantime is left alone.
    """

    pods: tuple[str, ...]
    uids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScaleWorkload:
    """spec.replicas = replicas (a Deployment's or a StatefulSet's scale step)."""

    replicas: int


@dataclass(frozen=True)
class PauseDeployment:
    """spec.paused = true."""


@dataclass(frozen=True)
class ResumeDeployment:
    """spec.paused = false."""


@dataclass(frozen=True)
class InstallGate:
    """Add the gate init container to the workload's pod template (see gate_templates)."""


@dataclass(frozen=True)
class Wait:
    """Nothing changes by the clock before `until` (epoch seconds); step again then, or sooner
    when the group or the workload changes."""

    until: float


@dataclass(frozen=True)
class MarkDegraded:
    """Set the Degraded condition (True) and emit a Warning Event with this reason and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class ClearDegraded:
    """Set the Degraded condition back to False: the rollout problem is gone."""

    reason: str
    message: str


@dataclass(frozen=True)
class RecordProgress:
    """Progress worth an Event and a status update (status.rollout itself is the state)."""

    reason: str  # the Event reason: RolloutStarted, BatchOpened, BatchSettled, ...
    batch: int
    batches: int
    members_joined: int
    rebalances: int
    message: str


Action = (
    OpenGate
    | HoldGates
    | SetStatefulSetPartition
    | DeletePods
    | ScaleWorkload
    | PauseDeployment
    | ResumeDeployment
    | InstallGate
    | Wait
    | MarkDegraded
    | ClearDegraded
    | RecordProgress
)
