"""The rollout planner facing another writer: a StatefulSet partition moved by another field
manager, and a policy that cannot be met."""

from __future__ import annotations

from rebalancer.planning.rollout_actions import (
    ClearDegraded,
    ForeignWrite,
    MarkDegraded,
    SetStatefulSetPartition,
)
from rebalancer.planning.rollout_phases.common import (
    POLICY_PROBLEM,
    Observation,
    Outcome,
    Phase,
    _also,
    chunk,
    later_ordinals,
)
from rebalancer.planning.rollout_plans import gated, policy_problems
from rebalancer.planning.rollout_states import Mechanism, RolloutState
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import FIELD_MANAGER, WorkloadView

PARTITION = "spec.updateStrategy.rollingUpdate.partition"


def overridden(state: RolloutState, workload: WorkloadView) -> bool:
    """Whether another field manager moved the partition this rollout holds.

    Once a batch's partition is in place the operator changes it only when the next batch
    opens, always downwards: while a batch is out it must be the batch's lowest ordinal,
    and while the next gathers it is never below that one's. The value alone can be the
    operator's own from a step whose state was lost (a crash between acting and saving),
    so the partition's last writer (managedFields) must be someone else too.
    """
    ordinals = chunk(state)
    if (
        state.mechanism is not Mechanism.STATEFULSET_REPLACE
        or state.yielded
        or not ordinals
        or workload.update_strategy != "RollingUpdate"
        or workload.partition is None
        or workload.partition_writer == FIELD_MANAGER
    ):
        return False
    wanted = min(ordinals)
    if state.phase in (Phase.BATCH_JOINING, Phase.BATCH_SETTLING):
        return workload.partition != wanted
    return state.phase is Phase.BATCH_OPENING and state.batch > 1 and workload.partition < wanted


def contest(state: RolloutState, observation: Observation, workload: WorkloadView) -> Outcome:
    """Set an overridden partition back once, saying who moved it; when the same happens
    again in this rollout, leave the partition to the other writer instead of fighting over
    it for good (a GitOps tool re-applying its manifest would), and release the remaining
    batches at their gates: the StatefulSet controller may then replace pods ahead of their
    batches, which wait at their gates until their batch opens."""
    writer = workload.partition_writer or "another writer"
    wanted = min(chunk(state))
    where = f"during batch {state.batch} of {state.batches}"
    field = PARTITION
    if state.contested_by is None:
        if not workload.caught_up:
            # The controller has not acted on the other writer's partition yet: it may be
            # deleting a later batch's pod this moment, which a partition set back now would
            # bring back at the old revision (the check below sees it once it has).
            return state, []
        later = set(later_ordinals(state))
        live = {pod.ordinal for pod in workload.live_pods}
        if gated(observation.setup, workload) and not later <= live:
            # The controller is replacing a pod of a later batch under the other writer's
            # partition: set back now, it would come back at the old revision and be
            # replaced again in its batch. Back at the new one it waits at its gate, and
            # the controller replaces no other pod before that one is Ready.
            return state, []
        note = f"{writer} set {field} to {workload.partition} {where}; set back to {wanted}"
        early = replaced_early(state, workload)
        if early:
            one = len(early) == 1
            if gated(observation.setup, workload):
                held = "waits at its gate for its" if one else "wait at their gates for their"
            else:
                held = "joined before its" if one else "joined before their"
            note += (
                f" (the StatefulSet controller had replaced {', '.join(early)} meanwhile, "
                f"which {held} own {'batch' if one else 'batches'})"
            )
        after = state.moved(contested_by=writer, interference=_also(state.interference, note))
        # Only if the StatefulSet is still as seen: the controller's pass over the other
        # writer's partition may not have seen this batch's pods Ready yet, and the pass
        # that does deletes a later batch's pod under that partition and writes the new
        # ready count to status. Set back after it, the pod would come back at the old
        # revision; that status write makes this one fail, and the next look waits above.
        return after, [
            SetStatefulSetPartition(wanted, workload.resource_version),
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


def taken_back(state: RolloutState, workload: WorkloadView, parking: bool) -> Outcome:
    """At rest, take back a partition left to another writer (see contest) once that writer
    is gone: no field manager but the operator's owns the field any more (managedFields).

    An applier owns what its last apply held, so the field's owners say whether the writer
    still means to set it: a GitOps tool whose manifest no longer sets it drops it at its
    next sync (the API server removes a field its only owner stopped applying, and defaults
    it to 0), and then nothing may set it back behind the operator. Time alone says nothing:
    a tool that syncs only on drift writes nothing until the operator moves the field again.
    `parking`: the operator parks the StatefulSet at rest (see kept_at_rest), which it does
    again from this step on.
    """
    owners = workload.partition_owners
    if (
        not state.yielded
        or workload.kind is not WorkloadKind.STATEFULSET
        or owners is None
        or any(owner != FIELD_MANAGER for owner in owners)
    ):
        return state, []
    writer = state.contested_by or "the other writer"
    owned = f"only {FIELD_MANAGER} owns it" if owners else "no field manager owns it"
    note = (
        f"{writer} no longer owns {PARTITION} ({owned} in managedFields; it is "
        f"{workload.partition if workload.partition is not None else 'unset'}): the operator "
        "takes the partition back"
    )
    if parking:
        note += f", parks the StatefulSet at {workload.replicas}"
    note += " and paces its rollouts in batches again"
    after = state.moved(
        yielded=False,
        interference=_also(state.interference, note),
        message=_also(state.message, note),
    )
    return after, [ForeignWrite("PartitionTakenBack", note, warning=False)]


def replaced_early(state: RolloutState, workload: WorkloadView) -> list[str]:
    """Pods of later batches already at the new revision."""
    later = set(later_ordinals(state))
    return [
        pod.name
        for pod in sorted(workload.live_pods, key=lambda pod: -(pod.ordinal or 0))
        if pod.ordinal in later and pod.updated
    ]


def flag_problems(state: RolloutState, observation: Observation, workload: WorkloadView) -> Outcome:
    """Say at once, not at the next rollout, when the policy cannot be met; and when it can
    again."""
    problems = policy_problems(observation.setup, workload, observation.group)
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
