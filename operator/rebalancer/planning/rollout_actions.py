"""What the rollout planner asks for: declarative actions the actuator carries out.

Each action states an end result, not a change ("the partition is n", not "lower it by k"), so
carrying one out twice, or after an operator restart, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rebalancer.structs.gates import GATE_OPEN_AT_MAX_WAIT_SECONDS


@dataclass(frozen=True)
class OpenGate:
    """Release these pods: write `open` and the batch id on each pod's gate annotation, and
    each pod's identity slot where one is given (planning.identity_slots)."""

    batch: str  # "<rollout id>/<batch number>"
    pods: tuple[str, ...]
    # (pod, slot) for pods that join under an identity slot, written in the same patch.
    slots: tuple[tuple[str, str], ...] = ()
    # Whether the pods let go together at one release moment (a gathered batch), or each as
    # soon as its gate sees the patch (ArrivalPlan.ON_ARRIVAL: nothing to wait for).
    together: bool = True


@dataclass(frozen=True)
class HoldGates:
    """Tell these waiting pods' gates the operator is here (refresh their held-at annotation)."""

    pods: tuple[str, ...]


@dataclass(frozen=True)
class NoteBypassedGates:
    """These pods' gates let them start without being opened (the operator was silent for the
    bypass time): mark each pod so it is told once, and tell it with a Warning Event and
    rebalancer_gate_bypasses_total."""

    pods: tuple[str, ...]
    bypass_after_seconds: int

    @property
    def message(self) -> str:
        count = len(self.pods)
        which = "pod" if count == 1 else "pods"
        return (
            f"{count} {which} started without their batch: their join gates saw no sign of the "
            f"operator for the bypass time (spec.policy.rollout.bypassGateAfterSeconds, "
            f"{self.bypass_after_seconds} s now) and let them go: {', '.join(self.pods)}. They "
            "joined the group as they started, which can cost a rebalance each; if the operator "
            "was not down, look at its log and restarts (or raise bypassGateAfterSeconds)"
        )


@dataclass(frozen=True)
class SetStatefulSetPartition:
    """spec.updateStrategy.rollingUpdate.partition = partition; with `resource_version`, only
    if the StatefulSet is still at it (not carried out otherwise, and the step not taken)."""

    partition: int
    resource_version: str | None = None


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
class PauseScaledObject:
    """Pause KEDA's ScaledObject `name` for the rollout: KEDA_PAUSED_ANNOTATION "true" and the
    operator's mark naming `rollout_id`, written only if the object is still at
    `resource_version` (a pause its owner added meanwhile is not taken over)."""

    name: str
    rollout_id: str
    resource_version: str

    @property
    def message(self) -> str:
        return (
            f'paused KEDA ScaledObject {self.name} (autoscaling.keda.sh/paused: "true") for '
            f"rollout {self.rollout_id}, so that it does not scale the workload mid-rollout; it "
            "is resumed when the rollout ends"
        )


@dataclass(frozen=True)
class ResumeScaledObject:
    """Remove the operator's KEDA pause and its mark from ScaledObject `name` (nothing else)."""

    name: str
    rollout_id: str
    resource_version: str

    @property
    def message(self) -> str:
        return (
            f"resumed KEDA ScaledObject {self.name}: the pause the operator set for rollout "
            f"{self.rollout_id} is removed, KEDA scales the workload again"
        )


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


@dataclass(frozen=True)
class ForeignWrite:
    """Another writer changed the workload under the rollout: an Event with this reason and
    message, a Warning when the operator had to act on it (status.rollout.interference keeps
    what happened for the rollout's end)."""

    reason: str  # PartitionOverridden, PartitionContested, PartitionTakenBack, RolloutSuperseded
    message: str
    warning: bool


Action = (
    OpenGate
    | HoldGates
    | NoteBypassedGates
    | SetStatefulSetPartition
    | DeletePods
    | ScaleWorkload
    | PauseDeployment
    | ResumeDeployment
    | InstallGate
    | PauseScaledObject
    | ResumeScaledObject
    | Wait
    | MarkDegraded
    | ClearDegraded
    | RecordProgress
    | ForeignWrite
)


def refused(actions: Sequence[Action], done: Sequence[Action]) -> bool:
    """Whether a write made only if the workload was still as the step saw it was not carried
    out: the step is then not taken (its state not saved, nothing it says posted), and the next
    one decides again on what the workload has become."""
    return any(
        isinstance(action, SetStatefulSetPartition)
        and action.resource_version is not None
        and action not in done
        for action in actions
    )


# A batch's gates let go together at one moment this far past the start of opening them, so
# that every pod's patch has reached it by then. The patches go out concurrently, each on a
# thread of its own: measured on the lab, 12 patches reached their 12 watching gates within
# 25 ms idle and within 0.1 s with the lab busy; 0.3 s leaves three times that.
RELEASE_LEAD_SECONDS = 0.3
# From a gate container's start until the gate watches its pod (interpreter, imports, first
# list), measured on the lab with the fork server from each gate log's creation to its first
# line: 0.08 to 0.24 s for gates starting alone or a few at a time, within 0.8 s for 12
# started together on 2 cores. Gates starting together share the CPU, so the warm-up grows
# with how many started within a second of the latest. A gate that started just before its
# batch opens must be watching by the release moment.
GATE_WARMUP_BASE_SECONDS = 0.3
GATE_WARMUP_PER_GATE_SECONDS = 0.05
# The API's startedAt has whole seconds: the gate started within this long after it.
STARTED_AT_RESOLUTION_SECONDS = 1.0


def gate_warmup_s(starts: Sequence[float]) -> float:
    """How long the latest of these gates (start bounds, epoch seconds) may take to watch."""
    if not starts:
        return GATE_WARMUP_BASE_SECONDS
    latest = max(starts)
    crowd = sum(1 for start in starts if latest - start <= STARTED_AT_RESOLUTION_SECONDS)
    return GATE_WARMUP_BASE_SECONDS + GATE_WARMUP_PER_GATE_SECONDS * crowd


def release_moment(
    now: float,
    gates_started: Sequence[float | None],
    lead_s: float = RELEASE_LEAD_SECONDS,
) -> float:
    """The wall-clock moment at which a batch's gates should let go (epoch seconds).

    `gates_started`: each gate container's startedAt (None: not known), read at `now`. A gate
    started at most one second after its whole-second startedAt, and no later than `now`,
    when it was seen running; the moment gives the latest such start its warm-up. Never
    further ahead than a gate honours (GATE_OPEN_AT_MAX_WAIT_SECONDS).
    """
    moment = now + lead_s
    known = [
        min(started + STARTED_AT_RESOLUTION_SECONDS, now)
        for started in gates_started
        if started is not None
    ]
    if known:
        moment = max(moment, max(known) + gate_warmup_s(known))
    return min(moment, now + GATE_OPEN_AT_MAX_WAIT_SECONDS - 1.0)
