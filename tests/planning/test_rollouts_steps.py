"""The rollout state machine, step by step: each case a world, the policy, and what must happen."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from tests.planning.rollout_world import T0, World, drive, setup_for, with_pods

from rebalancer.planning.rollout_actions import (
    Action,
    ClearDegraded,
    DeletePods,
    HoldGates,
    InstallGate,
    MarkDegraded,
    OpenGate,
    PauseDeployment,
    RecordProgress,
    ResumeDeployment,
    ScaleWorkload,
    SetStatefulSetPartition,
    Wait,
)
from rebalancer.planning.rollout_states import (
    Mechanism,
    RolloutKind,
    RolloutPhase,
    RolloutState,
    allowed,
)
from rebalancer.planning.rollouts import (
    CATCH_UP_RECHECK_SECONDS,
    GATHER_RECHECK_SECONDS,
    UNNOTICED_POD_SECONDS,
    Observation,
    step,
    trace_step,
)
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GateState
from rebalancer.structs.rollout_policy import RolloutPolicy, StaticMembership
from rebalancer.structs.snapshots import GroupSnapshot, Source
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import PodView, WorkloadView

Phase = RolloutPhase


def done(state: RolloutState) -> bool:
    return state.phase in (Phase.COMPLETED, Phase.FAILED)


def of(world: World, kind: type[Action]) -> list[tuple[float, Action]]:
    return [(at - T0, action) for at, action in world.log if isinstance(action, kind)]


def stair(spacing: float) -> World:
    """Pods whose gates start `spacing` seconds apart, in ordinal order."""
    return World(start_delay=lambda name, _: 1.0 + int(name.rsplit("-", 1)[1]) * spacing)


# -- cold start and scale-up: the gate queue ----------------------------------------------------


@pytest.mark.parametrize("spacing", [0.0, 0.7, 4.0, 15.0])
def test_cold_start_opens_every_pod_in_one_batch_however_spread(spacing: float) -> None:
    world = stair(spacing)
    world.scale_to(6, T0)
    state, _ = drive(world, setup_for(), seconds=200, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.kind is RolloutKind.COLD_START
    assert state.mechanism is Mechanism.GATE_QUEUE
    opens = of(world, OpenGate)
    assert len(opens) == 1
    at, action = opens[0]
    assert isinstance(action, OpenGate)
    assert len(action.pods) == 6
    # Opened the moment the last pod reached its gate (steps are 1 s apart).
    assert 1.0 + 5 * spacing <= at < 1.0 + 5 * spacing + 1.0
    assert state.members_joined == 6


def test_gathering_times_out_and_late_pods_get_a_batch_of_their_own() -> None:
    world = World(start_delay=lambda name, _: 500.0 if name == "orders-5" else 1.0)
    world.scale_to(6, T0)
    policy = RolloutPolicy(gather_seconds=20, batch_deadline_seconds=900, gate_timeout_seconds=0)
    state, _ = drive(world, setup_for(policy), seconds=700, until=done)
    assert state.phase is Phase.COMPLETED
    opens = [action for _, action in of(world, OpenGate)]
    assert [len(action.pods) for action in opens] == [5, 1]
    assert state.sizes == (6, 1)


def test_batch_size_splits_a_scale_up_evenly() -> None:
    world = with_pods(World(replicas=3), T0)
    world.scale_to(10, T0)
    policy = RolloutPolicy(max_batch_size=3, settle_seconds=2)
    state, _ = drive(world, setup_for(policy), seconds=300, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.kind is RolloutKind.SCALE_UP
    assert state.sizes == (3, 2, 2)
    assert [len(a.pods) for _, a in of(world, OpenGate) if isinstance(a, OpenGate)] == [3, 2, 2]
    # Each batch waited for the one before to settle and hold for settleSeconds.
    times = [at for at, _ in of(world, OpenGate)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= world.settle_s + 2 for gap in gaps)


def test_a_batch_that_does_not_settle_fails_with_a_reason() -> None:
    world = World(settle_s=10_000.0)
    world.scale_to(4, T0)
    policy = RolloutPolicy(batch_deadline_seconds=30)
    state, _ = drive(world, setup_for(policy), seconds=200, until=done)
    assert state.phase is Phase.FAILED
    assert state.reason == "BatchDidNotSettle"
    marks = [a for _, a in of(world, MarkDegraded) if isinstance(a, MarkDegraded)]
    assert len(marks) == 1
    assert "batch 1 of 1 (4 pods: orders-0, orders-1, orders-2, orders-3)" in marks[0].message
    assert "did not settle within 30 s" in marks[0].message
    assert "PreparingRebalance" in marks[0].message
    assert "rebalancer.dev/resume-rollout" in marks[0].message


def test_pods_that_never_reach_the_gate_fail_the_batch() -> None:
    world = World(start_delay=lambda _name, _i: 10_000.0)
    world.scale_to(3, T0)
    policy = RolloutPolicy(batch_deadline_seconds=60, gather_seconds=10)
    state, _ = drive(world, setup_for(policy), seconds=120, until=done)
    assert state.phase is Phase.FAILED
    assert state.reason == "BatchNotReleased"
    assert "0 pods are waiting at their gates and 3 have not reached them" in (state.message or "")


def test_failed_rollout_waits_for_a_resume_then_starts_again() -> None:
    world = World(start_delay=lambda _n, incarnation: 10_000.0)
    world.scale_to(2, T0)
    setup = setup_for(RolloutPolicy(batch_deadline_seconds=20, gather_seconds=5))
    failed, _ = drive(world, setup, seconds=100, until=done)
    assert failed.phase is Phase.FAILED
    now = T0 + 200
    same, actions = step(failed, world.observe(setup, now), now)
    assert same.phase is Phase.FAILED
    assert not [a for a in actions if isinstance(a, MarkDegraded)]
    for pod in world.pods.values():  # the cause is fixed: the pods reach their gates
        pod.arrives_at = now
    resumed, actions = step(failed, world.observe(setup, now, resume_token="1"), now)
    assert resumed.phase is not Phase.FAILED
    assert any(isinstance(a, ClearDegraded) for a in actions)
    state, _ = drive(world, setup, start=now + 1, seconds=100, state=resumed, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.rollout_id != failed.rollout_id


def test_resuming_after_the_group_settled_by_itself_leaves_nothing_to_do() -> None:
    world = World(settle_s=10_000.0)
    world.scale_to(2, T0)
    setup = setup_for(RolloutPolicy(batch_deadline_seconds=20))
    failed, _ = drive(world, setup, seconds=100, until=done)
    assert failed.reason == "BatchDidNotSettle"
    world.settle_s = 1.0
    now = T0 + 200
    resumed, _ = step(failed, world.observe(setup, now, resume_token="x"), now)
    assert resumed.phase is Phase.IDLE
    assert resumed.message == "failed rollout cleared: resumed"


def test_a_spec_change_clears_a_failed_rollout() -> None:
    failed = RolloutState(phase=Phase.FAILED, spec_generation=3, target="x", reason="R")
    world = World()
    world.scale_to(1, T0)
    observation = world.observe(setup_for(), T0, spec_generation=4)
    state, actions = step(failed, observation, T0)
    assert ClearDegraded("RolloutCleared", "the failed rollout was cleared: the spec changed") in (
        actions
    )
    # Cleared, the machine goes on in the same step: the pod at its gate is a new rollout.
    assert state.phase is Phase.BATCH_OPENING


def test_crash_lost_open_is_adopted_not_repeated() -> None:
    """Gates opened by a step whose new state was never saved: the batch is not opened again."""
    world = World()
    world.scale_to(4, T0)
    setup = setup_for()
    state, _ = drive(world, setup, seconds=3, until=lambda s: s.phase is Phase.BATCH_OPENING)
    before = state
    now = T0 + 5
    world.tick(now)
    after, actions = step(before, world.observe(setup, now), now)
    assert any(isinstance(a, OpenGate) for a in actions)
    world.apply(actions, now)  # carried out, then the operator dies before saving `after`
    again, replayed = step(before, world.observe(setup, now + 1), now + 1)
    assert again.phase is Phase.BATCH_JOINING
    assert again.batch == 1
    assert sorted(again.opened) == sorted(after.opened)
    assert not [a for a in replayed if isinstance(a, OpenGate)]


# -- StatefulSet rolling updates ----------------------------------------------------------------


def rolling_statefulset(static: bool, **policy: object) -> tuple[World, RolloutState]:
    world = with_pods(World(replicas=6, partition=6), T0)
    world.revision = "r2"
    membership = StaticMembership.ENABLED if static else StaticMembership.DISABLED
    setup = setup_for(
        RolloutPolicy(max_batch_size=2, settle_seconds=2, static_membership=membership, **policy)  # type: ignore[arg-type]
    )
    state, _ = drive(world, setup, seconds=300, until=done)
    return world, state


def test_statefulset_update_lowers_the_partition_then_replaces_each_batch() -> None:
    world, state = rolling_statefulset(static=False)
    assert state.phase is Phase.COMPLETED
    assert state.mechanism is Mechanism.STATEFULSET_REPLACE
    partitions = [a.partition for _, a in of(world, SetStatefulSetPartition)]  # type: ignore[attr-defined]
    assert partitions == [4, 2, 0, 6]  # three batches, then parked again
    deletes = [a.pods for _, a in of(world, DeletePods)]  # type: ignore[attr-defined]
    assert deletes == [("orders-4", "orders-5"), ("orders-2", "orders-3"), ("orders-0", "orders-1")]
    # The partition is in place before a pod is deleted (else it could come back old).
    first_partition = of(world, SetStatefulSetPartition)[0][0]
    first_delete = of(world, DeletePods)[0][0]
    assert first_delete > first_partition
    # Dynamic members: each batch is released together once all its pods wait at the gate.
    opens = [a.pods for _, a in of(world, OpenGate)]  # type: ignore[attr-defined]
    assert opens == deletes
    assert {pod.revision for pod in world.pods.values()} == {"r2"}


def test_a_replacement_the_scheduler_never_looks_at_is_created_again() -> None:
    # orders-4's replacement is lost to the scheduler (recreated while its watch was down).
    world = with_pods(World(replicas=6, partition=6), T0)
    world.revision = "r2"
    world.unnoticed = lambda name, incarnation: name == "orders-4" and incarnation == 2
    setup = setup_for(RolloutPolicy(max_batch_size=2, settle_seconds=2, gather_seconds=120))
    state, _ = drive(world, setup, seconds=400, until=done)
    assert state.phase is Phase.COMPLETED, state.message
    deletes = [(at, a.pods, a.uids) for at, a in of(world, DeletePods)]  # type: ignore[attr-defined]
    nudges = [(at, pods, uids) for at, pods, uids in deletes if uids == ("orders-4#2",)]
    [(at, pods, _)] = nudges
    assert pods == ("orders-4",)
    created = 2.0 + deletes[0][0]  # the first delete, then the controller's restart time
    assert at - created >= UNNOTICED_POD_SECONDS
    assert world.incarnations["orders-4"] == 3
    assert {pod.revision for pod in world.pods.values()} == {"r2"}


def test_static_members_are_released_as_soon_as_their_pods_exist() -> None:
    world = with_pods(World(replicas=4, partition=4), T0)
    world.revision = "r2"
    world.start_delay = lambda name, _: 1.0 if name.endswith(("-3", "-1")) else 6.0
    setup = setup_for(
        RolloutPolicy(
            max_batch_size=2, settle_seconds=2, static_membership=StaticMembership.ENABLED
        )
    )
    state, _ = drive(world, setup, seconds=300, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.static
    opened: dict[str, float] = {}
    for at, action in of(world, OpenGate):
        for pod in action.pods:  # type: ignore[attr-defined]
            opened.setdefault(pod, at)
    created = {pod.name: pod.created_at - T0 for pod in world.pods.values()}
    # Nothing is gathered for a static member: each pod's gate is opened at the planner's
    # first look after its creation, before its gate starts (orders-2 and orders-0 start 6 s
    # after theirs), so its consumer goes the moment it can.
    assert sorted(opened) == ["orders-0", "orders-1", "orders-2", "orders-3"]
    assert all(opened[name] - created[name] <= 1.0 for name in opened), (opened, created)


def test_ordered_ready_statefulset_cannot_gather_a_batch() -> None:
    world = World(pod_management="OrderedReady")
    world.scale_to(4, T0)
    state, _ = drive(world, setup_for(), seconds=5, until=done)
    assert state.phase is Phase.FAILED
    assert state.reason == "PolicyCannotBeMet"
    assert "StatefulSet/orders spec.podManagementPolicy is OrderedReady" in (state.message or "")
    assert "podManagementPolicy: Parallel" in (state.message or "")


def test_idle_parks_the_partition_then_installs_the_gate_when_asked() -> None:
    world = with_pods(World(replicas=3, partition=0, gate_installed=False), T0)
    setup = setup_for(RolloutPolicy(inject_gate=True))
    state, actions = step(RolloutState(), world.observe(setup, T0), T0)
    assert state.phase is Phase.IDLE
    assert state.parked
    assert SetStatefulSetPartition(3) in actions
    # Not yet: with the partition at 0 the template change would replace a pod at once.
    assert InstallGate() not in actions
    world.apply(actions, T0)
    _, actions = step(state, world.observe(setup, T0 + 1), T0 + 1)
    assert InstallGate() in actions


def test_a_pod_the_controller_replaced_by_itself_opens_with_its_ordinals_batch() -> None:
    world = with_pods(World(replicas=4, partition=3), T0)
    world.revision = "r2"
    # Before the operator planned, the controller replaced orders-3 (its partition was 3).
    world.create("orders-3", 3, T0 - 5, "r2")
    setup = setup_for(RolloutPolicy(max_batch_size=2, settle_seconds=1))
    state, _ = drive(world, setup, seconds=300, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.ordinals == (3, 2, 1, 0)
    opens = [a.pods for _, a in of(world, OpenGate) if isinstance(a, OpenGate)]
    assert [set(pods) for pods in opens] == [{"orders-3", "orders-2"}, {"orders-1", "orders-0"}]
    assert world.incarnations == {f"orders-{k}": 2 for k in range(4)}


@pytest.mark.parametrize("left", ["terminating", "gone", "at its gate"])
def test_a_pod_its_controller_is_replacing_at_planning_keeps_its_place(left: str) -> None:
    world = with_pods(World(replicas=3, partition=2), T0)
    world.revision = "r2"
    # The controller is replacing orders-2 (at the partition) as the operator plans.
    if left == "terminating":
        world.pods["orders-2"].deleted_at = T0
    elif left == "gone":
        del world.pods["orders-2"]
        world.create("orders-2", 2, T0 + 3, "r2")
    else:
        world.create("orders-2", 2, T0 - 5, "r2")
    setup = setup_for(RolloutPolicy(max_batch_size=1, settle_seconds=1))
    state, _ = drive(world, setup, seconds=300, until=done)
    assert state.phase is Phase.COMPLETED, state.message
    assert state.ordinals == (2, 1, 0) and state.sizes == (1, 1, 1)
    opens = [a.pods for _, a in of(world, OpenGate) if isinstance(a, OpenGate)]
    assert opens == [("orders-2",), ("orders-1",), ("orders-0",)]
    assert {pod.revision for pod in world.pods.values()} == {"r2"}


def test_parking_can_be_turned_off() -> None:
    world = with_pods(World(replicas=3, partition=0), T0)
    setup = setup_for(RolloutPolicy(park_statefulsets=False))
    _, actions = step(RolloutState(), world.observe(setup, T0), T0)
    assert not [a for a in actions if isinstance(a, SetStatefulSetPartition)]


# -- Deployments ----------------------------------------------------------------------------


def deployment(updated: int, *, paused: bool = False, replicas: int = 6) -> WorkloadView:
    pods = tuple(
        PodView(
            name=f"web-{index}",
            uid=f"u{index}",
            ordinal=None,
            updated=index < updated,
            gate=GateState.NONE,
            gate_batch=None,
            held_at=None,
            ready=True,
            terminating=False,
            created_at=T0 + index,
        )
        for index in range(replicas)
    )
    return WorkloadView(
        kind=WorkloadKind.DEPLOYMENT,
        name="web",
        replicas=replicas,
        current_replicas=replicas,
        updated_replicas=updated,
        ready_replicas=replicas,
        update_revision="new",
        current_revision="old",
        generation=2,
        observed_generation=2,
        paused=paused,
        max_surge=2,
        max_unavailable=0,
        pods=pods,
    )


def stable(members: int, at: float) -> GroupSnapshot:
    return GroupSnapshot(
        state="Stable",
        protocol="classic",
        assignor="range",
        generation=None,
        members=members,
        member_details=(),
        assigned_partitions=12,
        total_partitions=12,
        lag=None,
        observed_at=at,
        sources={"members": Source.BROKER},
    )


def test_ungated_deployment_is_stepped_with_pause_and_resume() -> None:
    setup = setup_for(RolloutPolicy(max_batch_size=3, settle_seconds=0))
    now = T0

    def observe(updated: int, paused: bool) -> Observation:
        return Observation(setup, deployment(updated, paused=paused), stable(6, now))

    state, actions = step(RolloutState(), observe(0, False), now)
    assert state.mechanism is Mechanism.DEPLOYMENT_STEPS
    assert state.sizes == (3, 3)
    assert state.phase is Phase.BATCH_OPENING
    assert not [a for a in actions if isinstance(a, PauseDeployment | ResumeDeployment)]
    now += 1
    state, actions = step(state, observe(1, False), now)  # the controller rolls on
    assert state.phase is Phase.BATCH_OPENING
    now += 1
    state, actions = step(state, observe(3, False), now)
    assert PauseDeployment() in actions  # the batch is in: hold the rest
    assert state.holding_deployment
    for _ in range(3):
        now += 1
        state, actions = step(state, observe(3, True), now)
        if state.batch == 2:
            break
    assert state.batch == 2
    assert ResumeDeployment() in actions
    for _ in range(4):
        now += 1
        state, actions = step(state, observe(6, False), now)
    assert state.phase is Phase.COMPLETED
    assert not state.holding_deployment


def test_a_change_its_controller_has_not_taken_yet_is_looked_at_again_soon() -> None:
    # Woken by the change itself (the workload watch), the planner may look before the
    # controller has observed the new spec: nothing to plan from yet, and the controller's
    # catching up wakes no one, so the step asks to be taken again in half a second.
    setup = setup_for(RolloutPolicy(max_batch_size=3, settle_seconds=0))
    fresh = replace(deployment(6), update_revision="old", generation=3, observed_generation=2)
    state, actions = step(RolloutState(), Observation(setup, fresh, stable(6, T0)), T0)
    assert not state.phase.active
    assert Wait(T0 + CATCH_UP_RECHECK_SECONDS) in actions
    # Caught up and nothing changed: the resting poll is enough.
    caught_up = replace(fresh, observed_generation=3)
    _, actions = step(state, Observation(setup, caught_up, stable(6, T0 + 1)), T0 + 1)
    assert not [a for a in actions if isinstance(a, Wait)], actions


def test_a_failed_deployment_step_says_the_deployment_stays_paused() -> None:
    setup = setup_for(RolloutPolicy(max_batch_size=3, batch_deadline_seconds=10))
    state, _ = step(RolloutState(), Observation(setup, deployment(0), stable(6, T0)), T0)
    state, actions = step(state, Observation(setup, deployment(3), None), T0 + 1)
    assert PauseDeployment() in actions
    state, _ = step(state, Observation(setup, deployment(3, paused=True), None), T0 + 30)
    assert state.phase is Phase.FAILED
    assert "Deployment web stays paused" in (state.message or "")
    assert "kubectl rollout resume deployment/web" in (state.message or "")
    _, actions = step(
        state, Observation(setup, deployment(3, paused=True), None, resume_token="go"), T0 + 40
    )
    assert ResumeDeployment() in actions


def test_disabling_rollouts_hands_the_workload_back() -> None:
    setup = setup_for(RolloutPolicy(enabled=False))
    held = RolloutState(phase=Phase.BATCH_JOINING, holding_deployment=True)
    state, actions = step(held, Observation(setup, deployment(3, paused=True), None), T0)
    assert state.phase is Phase.IDLE
    assert ResumeDeployment() in actions
    world = World(partition=6, replicas=6)
    world.scale_to(6, T0)
    parked = RolloutState(parked=True)
    state, actions = step(parked, world.observe(setup, T0 + 5), T0 + 5)
    assert SetStatefulSetPartition(0) in actions
    assert OpenGate("unmanaged", tuple(f"orders-{i}" for i in range(6))) in actions


def test_scale_steps_raise_replicas_one_batch_at_a_time() -> None:
    world = with_pods(World(replicas=2, gate_installed=False), T0)
    setup = setup_for(RolloutPolicy(gate_joins=False, scale_steps=True, max_batch_size=2))
    state, _ = step(RolloutState(), world.observe(setup, T0), T0)
    assert state.steady_replicas == 2
    world.scale_to(6, T0 + 1)  # the user asks for 6
    state, _ = drive(world, setup, start=T0 + 1, seconds=200, state=state, until=done)
    assert state.phase is Phase.COMPLETED
    assert state.mechanism is Mechanism.SCALE_STEPS
    assert [a.replicas for _, a in of(world, ScaleWorkload)] == [4, 6]  # type: ignore[attr-defined]


# -- pause, holds, waits, progress ----------------------------------------------------------


def test_pause_keeps_the_batch_and_moves_its_timers_on() -> None:
    world = World(start_delay=lambda _n, _i: 500.0)
    world.scale_to(3, T0)
    setup = setup_for(RolloutPolicy(batch_deadline_seconds=60))
    state, _ = drive(world, setup, seconds=10)
    assert state.phase is Phase.BATCH_OPENING
    deadline = state.deadline
    paused_setup = setup_for(RolloutPolicy(batch_deadline_seconds=60, paused=True))
    paused, _ = step(state, world.observe(paused_setup, T0 + 20), T0 + 20)
    assert paused.phase is Phase.PAUSED
    assert paused.paused_from is Phase.BATCH_OPENING
    back, _ = step(paused, world.observe(setup, T0 + 120), T0 + 120)
    assert back.phase is Phase.BATCH_OPENING
    assert back.deadline == pytest.approx((deadline or 0) + 100)


def test_waiting_gates_are_held_while_the_operator_is_here() -> None:
    world = World(start_delay=lambda name, _: 1.0 if name != "orders-2" else 300.0)
    world.scale_to(3, T0)
    setup = setup_for(RolloutPolicy(bypass_gate_after_seconds=60))
    drive(world, setup, seconds=90)
    holds = of(world, HoldGates)
    assert holds[0][1] == HoldGates(("orders-0", "orders-1"))
    refreshes = [at for at, _ in holds]
    assert all(20 <= later - earlier <= 21 for earlier, later in itertools.pairwise(refreshes))


def test_every_step_says_when_to_look_again() -> None:
    world = World(start_delay=lambda _n, _i: 30.0)
    world.scale_to(2, T0)
    setup = setup_for(RolloutPolicy(gather_seconds=40, batch_deadline_seconds=100))
    _, actions = step(RolloutState(), world.observe(setup, T0), T0)
    waits = [a for a in actions if isinstance(a, Wait)]
    # Gathering: the last pod's arrival at its gate is looked for every half second.
    assert waits == [Wait(T0 + GATHER_RECHECK_SECONDS)]


def test_a_released_batch_is_looked_at_by_its_timers_not_every_half_second() -> None:
    world = World(start_delay=lambda _n, _i: 1.0)
    world.scale_to(2, T0)
    # Without bypass (whose hold refreshes are timers too, a third of it apart), the deadline
    # is the only timer left.
    policy = RolloutPolicy(
        gather_seconds=40, batch_deadline_seconds=100, bypass_gate_after_seconds=0
    )
    setup = setup_for(policy)
    state, _ = step(RolloutState(), world.observe(setup, T0), T0)
    state, actions = step(state, world.observe(setup, T0 + 2), T0 + 2)
    assert state.phase is RolloutPhase.BATCH_JOINING
    assert [a for a in actions if isinstance(a, Wait)] == [Wait(T0 + 2 + 100)]


def test_progress_is_recorded_on_each_transition() -> None:
    world = World()
    world.scale_to(2, T0)
    drive(world, setup_for(), seconds=60, until=done)
    reasons = [a.reason for _, a in of(world, RecordProgress)]  # type: ignore[attr-defined]
    assert reasons == [
        "RolloutStarted",
        "BatchOpening",
        "BatchReleased",
        "BatchSettled",
        "RolloutCompleted",
    ]


def test_rebalances_are_counted_from_the_rollout_start() -> None:
    world = World()
    world.scale_to(2, T0)
    setup = setup_for()
    state, _ = step(RolloutState(), world.observe(setup, T0, rebalances=7), T0)
    assert state.rebalances_at_start == 7
    later, actions = step(state, world.observe(setup, T0 + 1, rebalances=9), T0 + 1)
    assert later.rebalances == 2
    assert any(isinstance(a, RecordProgress) and a.rebalances == 2 for a in actions)


@pytest.mark.parametrize(
    "scenario", ["cold-start", "update", "static-update", "failing", "paused", "disabled"]
)
def test_every_transition_is_allowed(scenario: str) -> None:
    policy = RolloutPolicy(max_batch_size=2, settle_seconds=2)
    if scenario == "cold-start":
        world = stair(3.0)
        world.scale_to(5, T0)
    elif scenario == "failing":
        world = World(settle_s=10_000)
        world.scale_to(3, T0)
        policy = RolloutPolicy(batch_deadline_seconds=20)
    else:
        world = with_pods(World(replicas=5, partition=5), T0)
        world.revision = "r2"
        membership = StaticMembership.ENABLED if scenario == "static-update" else None
        if membership is not None:
            policy = replace(policy, static_membership=membership)
    setup = setup_for(policy)
    state = RolloutState()
    seen: set[tuple[Phase, Phase]] = set()
    for index in range(200):
        now = T0 + index
        world.tick(now)
        current = setup
        if scenario == "paused" and 10 <= index < 30:
            current = setup_for(replace(policy, paused=True))
        if scenario == "disabled" and index >= 20:
            current = setup_for(replace(policy, enabled=False))
        token = "again" if scenario == "failing" and index > 100 else None
        state, actions, phases = trace_step(
            state, world.observe(current, now, resume_token=token), now
        )
        world.apply(actions, now)
        for before, after in itertools.pairwise(phases):
            assert allowed(before, after), f"{before} -> {after}"
            seen.add((before, after))
    assert seen


def test_a_long_broker_delay_is_planned_with_its_window() -> None:
    world = World()
    world.scale_to(3, T0)
    setup = setup_for(RolloutPolicy(batch_deadline_seconds=10), BrokerProfile.APACHE_KAFKA, 22.5)
    state, _ = drive(world, setup, seconds=5, until=done)
    assert state.phase is Phase.FAILED
    assert "join window of 22.5 s (group.initial.rebalance.delay.ms of an Empty group)" in (
        state.message or ""
    )


def test_workload_gone_fails_an_active_rollout() -> None:
    setup = setup_for()
    active = RolloutState(phase=Phase.BATCH_JOINING, batch=1, sizes=(2,))
    state, actions = step(active, Observation(setup, None, None), T0)
    assert state.phase is Phase.FAILED
    assert state.reason == "WorkloadNotFound"
    idle, _ = step(RolloutState(), Observation(setup, None, None), T0)
    assert idle.phase is Phase.IDLE
    world = World()
    world.scale_to(1, T0)
    cleared, actions = step(state, world.observe(setup, T0 + 1), T0 + 1)
    assert cleared.phase is not Phase.FAILED
    assert cleared.reason is None
    assert any(isinstance(action, ClearDegraded) for action in actions)


def test_a_policy_that_cannot_be_met_is_flagged_before_any_rollout() -> None:
    world = with_pods(World(replicas=6, partition=6), T0)
    bad = setup_for(RolloutPolicy(batch_deadline_seconds=5))
    state, actions = step(RolloutState(), world.observe(bad, T0), T0)
    assert state.phase is Phase.IDLE
    marks = [a for a in actions if isinstance(a, MarkDegraded)]
    assert [m.reason for m in marks] == ["PolicyCannotBeMet"]
    assert "spec.policy.rollout.batchDeadlineSeconds (5) is shorter than" in marks[0].message
    again, actions = step(state, world.observe(bad, T0 + 1), T0 + 1)
    assert not [a for a in actions if isinstance(a, MarkDegraded)]  # said once
    fixed, actions = step(again, world.observe(setup_for(), T0 + 2), T0 + 2)
    assert ClearDegraded("PolicyFixed", "the rollout policy can be met again") in actions
    assert fixed.reason is None


def test_a_policy_problem_is_said_once_when_a_rollout_meets_it() -> None:
    world = World(pod_management="OrderedReady")
    world.scale_to(4, T0)
    state, actions = step(RolloutState(), world.observe(setup_for(), T0), T0)
    assert state.phase is Phase.FAILED
    assert len([a for a in actions if isinstance(a, MarkDegraded)]) == 1
