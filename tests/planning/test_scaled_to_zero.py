"""A group whose workload is scaled to zero is Ready ScaledToZero, not an alert."""

from __future__ import annotations

import pytest

from rebalancer import metrics
from rebalancer.planning.statuses import observed_conditions
from rebalancer.structs.conditions import ConditionStatus, ConditionType
from rebalancer.structs.snapshots import GroupSnapshot


def snapshot(state: str, members: int) -> GroupSnapshot:
    return GroupSnapshot(
        state=state,
        protocol=None,
        assignor=None,
        generation=None,
        members=members,
        member_details=(),
        assigned_partitions=0 if members == 0 else 4,
        total_partitions=4,
        lag=None,
        observed_at=0.0,
    )


@pytest.mark.parametrize("state", ["Empty", "Dead", "Unknown"])
def test_no_members_at_zero_replicas_is_ready(state: str) -> None:
    ready, progressing, degraded = observed_conditions(
        snapshot(state, 0), scaled_to_zero="StatefulSet orders-consumer"
    )
    assert (ready.type, ready.status, ready.reason) == (
        ConditionType.READY,
        ConditionStatus.TRUE,
        "ScaledToZero",
    )
    assert ready.message.startswith("StatefulSet orders-consumer is scaled to zero")
    assert f"the group is {state} with no members" in ready.message
    assert (progressing.status, progressing.reason) == (ConditionStatus.FALSE, "Idle")
    assert (degraded.status, degraded.reason) == (ConditionStatus.FALSE, "Observed")
    # The alert on rebalancer_group_ready == 0 stays quiet.
    metrics.publish_conditions("ns", "zero", "orders", [ready])
    assert (
        metrics.REGISTRY.get_sample_value(
            "rebalancer_group_ready",
            {"namespace": "ns", "consumergroup": "zero", "group_id": "orders"},
        )
        == 1
    )
    metrics.forget_group("ns", "zero")


def test_an_empty_group_with_replicas_asked_for_is_not_ready() -> None:
    ready, _, _ = observed_conditions(snapshot("Empty", 0))
    assert (ready.status, ready.reason) == (ConditionStatus.FALSE, "GroupEmpty")


def test_members_still_leaving_a_workload_at_zero_are_told_as_they_are() -> None:
    # Pods still stopping: the group rebalances as they leave, which Ready says until it ends.
    ready, progressing, _ = observed_conditions(
        snapshot("PreparingRebalance", 2), scaled_to_zero="Deployment web"
    )
    assert (ready.status, ready.reason) == (ConditionStatus.FALSE, "Rebalancing")
    assert progressing.status is ConditionStatus.TRUE
