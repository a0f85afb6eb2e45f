"""Rollout conditions, the group read back from status, and a gated Deployment's batches."""

from __future__ import annotations

from tests.planning.rollout_world import T0, setup_for

from rebalancer.planning.rebalances import GroupTracking
from rebalancer.planning.rollout_actions import OpenGate
from rebalancer.planning.rollout_states import (
    Mechanism,
    RolloutKind,
    RolloutPhase,
    RolloutState,
)
from rebalancer.planning.rollout_statuses import (
    rebalances_from_status,
    rollout_conditions,
    snapshot_from_status,
)
from rebalancer.planning.rollouts import Observation, step
from rebalancer.planning.statuses import render_group
from rebalancer.structs.conditions import ConditionStatus, ConditionType
from rebalancer.structs.gates import GateState
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import PodView, WorkloadView


def test_conditions_follow_the_phase() -> None:
    assert rollout_conditions(RolloutState()) == []
    assert rollout_conditions(RolloutState(phase=RolloutPhase.COMPLETED)) == []
    active = rollout_conditions(
        RolloutState(
            phase=RolloutPhase.BATCH_JOINING,
            kind=RolloutKind.SCALE_UP,
            batch=2,
            sizes=(3, 3),
            members_joined=3,
            rebalances=1,
        )
    )
    assert [(c.type, c.status, c.reason) for c in active] == [
        (ConditionType.PROGRESSING, ConditionStatus.TRUE, "RollingOut")
    ]
    assert active[0].message == (
        "scale-up: batch 2 of 2 (BatchJoining); 3 members joined, 1 rebalances so far"
    )
    failed = rollout_conditions(
        RolloutState(phase=RolloutPhase.FAILED, reason="BatchDidNotSettle", message="why; how")
    )
    assert [(c.type, c.status, c.reason, c.message) for c in failed] == [
        (ConditionType.DEGRADED, ConditionStatus.TRUE, "BatchDidNotSettle", "why; how"),
        (ConditionType.PROGRESSING, ConditionStatus.FALSE, "RolloutFailed", "why; how"),
    ]
    flagged = rollout_conditions(RolloutState(reason="PolicyCannotBeMet", message="field; fix"))
    assert [(c.type, c.status, c.message) for c in flagged] == [
        (ConditionType.DEGRADED, ConditionStatus.TRUE, "field; fix")
    ]
    paused = rollout_conditions(RolloutState(phase=RolloutPhase.PAUSED, batch=1, sizes=(2,)))
    assert paused[0].reason == "RolloutPaused"


def test_a_statefulset_replacement_says_how_many_pods_are_out() -> None:
    # A sliding window (static members) gathered two later pods into batch 2.
    sliding = RolloutState(
        phase=RolloutPhase.BATCH_JOINING,
        kind=RolloutKind.ROLLING_UPDATE,
        mechanism=Mechanism.STATEFULSET_REPLACE,
        batch=2,
        sizes=(2, 4, 2),
        ordinals=(7, 6, 5, 4, 3, 2, 1, 0),
        opened=("orders-5", "orders-4", "orders-3"),
    )
    [progressing] = rollout_conditions(sliding)
    assert "batch 2 of 3, 5 of 8 pods released (BatchJoining)" in progressing.message


def test_the_group_comes_back_from_status() -> None:
    snapshot = GroupSnapshot(
        state="Stable",
        protocol="classic",
        assignor="range",
        generation=4,
        members=2,
        member_details=(
            MemberSummary("orders-0", "m0", "orders-0", 4, 6, Source.MEMBER_REPORTS),
            MemberSummary("orders-1", "m1", None, 4, 6, Source.MEMBER_REPORTS),
        ),
        assigned_partitions=12,
        total_partitions=12,
        lag=5,
        observed_at=T0,
        sources={"members": Source.MEMBER_REPORTS, "state": Source.BROKER},
    )
    tracking = GroupTracking(since=T0, generation=4, rebalances=9)
    status = {"group": render_group(snapshot, tracking, "apache-kafka")}
    assert snapshot_from_status(status) == snapshot
    assert rebalances_from_status(status) == 9
    assert snapshot_from_status({}) is None


def pod(name: str, updated: bool, gate: GateState) -> PodView:
    return PodView(name, f"{name}-uid", None, updated, gate, None, None, not updated, False, T0)


def test_gated_deployment_batches_are_bounded_by_surge_and_unavailability() -> None:
    old = [pod(f"web-old-{i}", False, GateState.NONE) for i in range(6)]
    new = [pod(f"web-new-{i}", True, GateState.WAITING) for i in range(2)]
    workload = WorkloadView(
        kind=WorkloadKind.DEPLOYMENT,
        name="web",
        replicas=6,
        current_replicas=8,
        updated_replicas=2,
        ready_replicas=6,
        update_revision="new",
        current_revision="old",
        generation=3,
        observed_generation=3,
        max_surge=2,
        max_unavailable=0,
        gate_installed=True,
        pods=tuple(old + new),
    )
    group = GroupSnapshot("Stable", None, None, None, 6, (), 12, 12, None, T0, {})
    state, actions = step(
        RolloutState(), Observation(setup_for(RolloutPolicy(max_batch_size=4)), workload, group), T0
    )
    assert state.kind is RolloutKind.ROLLING_UPDATE
    assert state.mechanism is Mechanism.GATE_QUEUE
    assert state.sizes == (2, 2, 2)  # at most maxSurge + maxUnavailable new pods exist at once
    opens = [a for a in actions if isinstance(a, OpenGate)]
    assert opens == [OpenGate(f"{state.rollout_id}/1", ("web-new-0", "web-new-1"))]


def test_old_pods_awaiting_removal_start_no_rollout() -> None:
    old = [pod("web-old-0", False, GateState.NONE)]
    new = [pod(f"web-new-{i}", True, GateState.PASSED) for i in range(2)]
    workload = WorkloadView(
        kind=WorkloadKind.DEPLOYMENT,
        name="web",
        replicas=2,
        current_replicas=3,
        updated_replicas=2,
        ready_replicas=3,
        update_revision="new",
        current_revision="new",
        generation=3,
        observed_generation=3,
        max_surge=1,
        max_unavailable=0,
        gate_installed=True,
        pods=tuple(old + new),
    )
    group = GroupSnapshot("Stable", None, None, None, 3, (), 12, 12, None, T0, {})
    observation = Observation(setup_for(), workload, group)
    state, actions = step(RolloutState(), observation, T0)
    assert state.phase is RolloutPhase.IDLE
    again, more = step(state, observation, T0 + 1)
    assert again.phase is RolloutPhase.IDLE
    assert not [a for a in (*actions, *more) if type(a).__name__ == "RecordProgress"]
