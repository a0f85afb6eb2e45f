"""Render the ConsumerGroup status from what was observed (pure; patching lives in clients)."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.planning.rebalances import REBALANCING_STATES, GroupTracking
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.snapshots import GroupSnapshot
from rebalancer.structs.times import format_rfc3339

MAX_MEMBER_DETAILS = 50


def render_group(
    snapshot: GroupSnapshot, tracking: GroupTracking, profile: str | None
) -> dict[str, object]:
    group: dict[str, object] = {
        "state": str(snapshot.state),
        "members": snapshot.members,
        "rebalances": tracking.rebalances,
        "observedAt": format_rfc3339(snapshot.observed_at),
        "sources": {key: value.value for key, value in sorted(snapshot.sources.items())},
        "memberDetails": [
            {
                key: value
                for key, value in {
                    "host": member.host,
                    "memberId": member.member_id or None,
                    "instanceId": member.instance_id,
                    "generation": member.generation,
                    "partitions": member.partitions,
                    "targetPartitions": member.target_partitions,
                    "source": member.source.value,
                }.items()
                if value is not None
            }
            for member in snapshot.member_details[:MAX_MEMBER_DETAILS]
        ],
    }
    optional: dict[str, object | None] = {
        "protocol": snapshot.protocol,
        "assignor": snapshot.assignor,
        "generation": tracking.generation if snapshot.generation is None else snapshot.generation,
        "assignedPartitions": snapshot.assigned_partitions,
        "totalPartitions": snapshot.total_partitions,
        "lag": snapshot.lag,
        "lastRebalanceTime": (
            format_rfc3339(tracking.last_rebalance_at) if tracking.last_rebalance_at else None
        ),
        "lastRebalanceCause": tracking.last_cause,
        "brokerProfile": profile,
        "coordinator": snapshot.coordinator,
        "membersReconciling": snapshot.members_reconciling,
    }
    group.update({key: value for key, value in optional.items() if value is not None})
    return group


def observed_conditions(
    snapshot: GroupSnapshot, scaled_to_zero: str | None = None
) -> list[Condition]:
    """Conditions after a successful observation; `scaled_to_zero` names the workload when its
    spec.replicas is 0."""
    partitions = ""
    if snapshot.assigned_partitions is not None and snapshot.total_partitions is not None:
        partitions = (
            f", {snapshot.assigned_partitions}/{snapshot.total_partitions} partitions assigned"
        )
    summary = f"group is {snapshot.state} with {snapshot.members} members{partitions}"
    rebalancing = snapshot.state in REBALANCING_STATES
    if snapshot.settled:
        ready = Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", summary)
    elif scaled_to_zero is not None and snapshot.members == 0 and not rebalancing:
        # Asked for (KEDA's scale to zero, a pause, kubectl scale): not a fault, so Ready, as a
        # Deployment of 0 replicas is Available, and no alert on Ready False goes off.
        ready = Condition(
            ConditionType.READY,
            ConditionStatus.TRUE,
            "ScaledToZero",
            f"{scaled_to_zero} is scaled to zero: the group is {snapshot.state} with no members, "
            "as asked; it becomes Ready GroupStable once consumers join again",
        )
    elif rebalancing:
        ready = Condition(ConditionType.READY, ConditionStatus.FALSE, "Rebalancing", summary)
    elif snapshot.state == GroupState.STABLE:
        ready = Condition(
            ConditionType.READY, ConditionStatus.FALSE, "PartitionsUnassigned", summary
        )
    else:
        ready = Condition(
            ConditionType.READY, ConditionStatus.FALSE, f"Group{snapshot.state}", summary
        )
    progressing = Condition(
        ConditionType.PROGRESSING,
        ConditionStatus.TRUE if rebalancing else ConditionStatus.FALSE,
        "Rebalancing" if rebalancing else "Idle",
        "the group is rebalancing" if rebalancing else "no rollout or rebalance in progress",
    )
    degraded = Condition(
        ConditionType.DEGRADED, ConditionStatus.FALSE, "Observed", "the group is observed"
    )
    return [ready, progressing, degraded]


def set_condition(conditions: Sequence[Condition], update: Condition) -> list[Condition]:
    """`conditions` with `update` in place of the one of its type (after them if none is)."""
    if all(condition.type is not update.type for condition in conditions):
        return [*conditions, update]
    return [update if condition.type is update.type else condition for condition in conditions]


def observation_conditions(
    snapshot: GroupSnapshot,
    *,
    scaled_to_zero: str | None = None,
    workload_missing: str | None = None,
    topics_refused: Condition | None = None,
    protocol_mismatch: Condition | None = None,
) -> list[Condition]:
    """observed_conditions, Degraded by what else the observation found: the workload missing
    (`workload_missing` names it), else spec.policy.protocol disagreeing with the broker
    (`protocol_mismatch`, planning.protocol_checks), else topics it may not describe
    (`topics_refused`, the refusal's Degraded condition)."""
    conditions = observed_conditions(snapshot, scaled_to_zero=scaled_to_zero)
    if workload_missing is not None:
        message = f"{workload_missing} not found; create it or fix spec.workload.name"
        missing = Condition(
            ConditionType.DEGRADED, ConditionStatus.TRUE, "WorkloadNotFound", message
        )
        return set_condition(conditions, missing)
    if protocol_mismatch is not None:
        return set_condition(conditions, protocol_mismatch)
    if topics_refused is not None:
        return set_condition(conditions, topics_refused)
    return conditions


def failure_conditions(reason: str, message: str) -> list[Condition]:
    """Conditions when the group cannot be observed; the message names the cause and the fix."""
    return [
        Condition(ConditionType.READY, ConditionStatus.FALSE, reason, message),
        Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, reason, message),
    ]
