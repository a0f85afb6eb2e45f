"""What the rollout planner's phases share: the observation, the constants, and helpers that
are plain functions of the state (and of the workload where they look at it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rebalancer.planning.rollout_actions import Action
from rebalancer.planning.rollout_plans import RolloutSetup, held_pods, held_template
from rebalancer.planning.rollout_states import Mechanism, RolloutPhase, RolloutState
from rebalancer.structs.autoscalers import Autoscalers
from rebalancer.structs.gates import GateState
from rebalancer.structs.snapshots import GroupSnapshot
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import WorkloadView

Phase = RolloutPhase
# The target's revision while a held Deployment's new template has no ReplicaSet yet.
PENDING_REVISION = "pending"
POLICY_PROBLEM = "PolicyCannotBeMet"


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


Outcome = tuple[RolloutState, list[Action]]
"""What a phase's rule returns: the state after the transition and the actions it asks for."""


def target(workload: WorkloadView, state: RolloutState) -> str:
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


def held_for_us(workload: WorkloadView) -> bool:
    """A Deployment the operator paused for a rollout."""
    return (
        workload.kind is WorkloadKind.DEPLOYMENT and workload.paused and workload.held_for_rollout
    )


def label(state: RolloutState) -> str:
    """The rollout and batch a gate opened for this batch carries (GATE_BATCH_ANNOTATION)."""
    return f"{state.rollout_id}/{state.batch}"


def batch_size(state: RolloutState) -> int:
    if 1 <= state.batch <= len(state.sizes):
        return state.sizes[state.batch - 1]
    return 0


def chunk(state: RolloutState) -> tuple[int, ...]:
    """The ordinals of the current batch (StatefulSet replace)."""
    start = sum(state.sizes[: state.batch - 1])
    return state.ordinals[start : start + batch_size(state)]


def later_ordinals(state: RolloutState) -> tuple[int, ...]:
    """The ordinals of the batches after the current one."""
    return state.ordinals[sum(state.sizes[: state.batch]) :]


def names(workload: WorkloadView, ordinals: Sequence[int]) -> list[str]:
    return [f"{workload.name}-{ordinal}" for ordinal in ordinals]


def batch_names(state: RolloutState, workload: WorkloadView) -> tuple[str, ...]:
    if state.mechanism is Mechanism.STATEFULSET_REPLACE:
        return tuple(names(workload, chunk(state)))
    return state.opened


def missing(state: RolloutState, workload: WorkloadView) -> str:
    """Why the batch could not be released, for the failure's message."""
    if state.mechanism is Mechanism.DEPLOYMENT_STEPS:
        return (
            f"Deployment {workload.name} has {workload.updated_replicas} updated pods, "
            f"{state.base + sum(state.sizes[: state.batch])} wanted"
        )
    if state.mechanism is Mechanism.SCALE_STEPS:
        return f"{workload.kind.value} {workload.name} did not take the scale step"
    ordinals = chunk(state)
    if state.yielded and ordinals and (workload.partition or 0) > min(ordinals):
        return (
            f"StatefulSet {workload.name}'s partition is {workload.partition}, set by "
            f"{workload.partition_writer or 'another writer'}, above the batch's lowest "
            f"ordinal {min(ordinals)}, so its pods are not replaced"
        )
    held = held_pods(workload)
    waiting = sum(1 for pod in held if pod.gate is GateState.WAITING)
    return (
        f"{waiting} pods are waiting at their gates and {len(held) - waiting} have not "
        "reached them (check kubectl get pods: unschedulable pods, image pulls, failing "
        "init containers)"
    )


def describe_batch(state: RolloutState) -> str:
    opened = state.opened
    shown = ", ".join(opened[:5]) + (f" and {len(opened) - 5} more" if len(opened) > 5 else "")
    return f"{batch_size(state)} pods" + (f": {shown}" if shown else "")


def describe_group(group: GroupSnapshot | None) -> str:
    if group is None:
        return "the group has not been observed"
    text = f"the group is {group.state} with {group.members} members"
    if group.assigned_partitions is not None and group.total_partitions is not None:
        text += f", {group.assigned_partitions}/{group.total_partitions} partitions assigned"
    return text


def autoscaled(observation: Observation) -> bool:
    """An HPA (KEDA's or the user's) writes spec.replicas: the planner does not step it."""
    return observation.autoscalers.hpa is not None


def dynamic_members(group: GroupSnapshot | None, pods: Sequence[str]) -> list[bool]:
    """For each pod, whether the group shows its consumer as a member without a
    group.instance.id (False when it is static or not seen)."""
    if group is None:
        return [False for _ in pods]
    by_host = {member.host: member for member in group.member_details}
    return [pod in by_host and by_host[pod].instance_id is None for pod in pods]


def _also(said: str | None, more: str | None) -> str | None:
    """`more` after what was already said."""
    return "; ".join(text for text in (said, more) if text) or None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "es" if noun.endswith("ch") else "s")
