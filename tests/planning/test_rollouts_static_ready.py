"""Static members: each batch is followed by the next once its pods are Ready and back within
their session's budget (they take their assignment back without a rebalance, KIP-345); the
group's settle check runs after the last batch."""

from __future__ import annotations

import itertools
from dataclasses import replace

from tests.planning.rollout_world import T0, World, drive, setup_for, with_pods

from rebalancer.planning.rollout_actions import DeletePods, SetStatefulSetPartition
from rebalancer.planning.rollout_plans import (
    Change,
    RolloutSetup,
    advances_on_ready,
    plan_notes,
    static_budget_s,
)
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.rollout_policy import ConsumerTimings, RolloutPolicy, StaticMembership

STATIC_UPDATE = Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static=True)
# The world's group looks unsettled this long after each replacement (a slow observer, a long
# poll): waiting for it after every batch would cost this much each time.
SETTLE_S = 18.0


def static_setup(profile: BrokerProfile = BrokerProfile.APACHE_KAFKA) -> RolloutSetup:
    policy = RolloutPolicy(
        static_membership=StaticMembership.ENABLED,
        settle_seconds=2,
        consumers=ConsumerTimings(session_timeout_ms=30000, heartbeat_interval_ms=3000),
    )
    return setup_for(policy, profile=profile, window_s=15.0)


def updating_world(start_delay: float = 1.0) -> World:
    world = World(
        replicas=4,
        gate_installed=False,
        settle_s=SETTLE_S,
        restart_s=2.0,
        start_delay=lambda _name, incarnation: start_delay if incarnation > 1 else 1.0,
        static=True,
    )
    with_pods(world, T0)
    world.revision = "r2"
    return world


def done(state: RolloutState) -> bool:
    return state.phase is RolloutPhase.COMPLETED


def deletions(world: World) -> list[tuple[float, tuple[str, ...]]]:
    return [(at, a.pods) for at, a in world.log if isinstance(a, DeletePods)]


def first_batch_ready(world: World, setup: RolloutSetup) -> tuple[RolloutState, float]:
    """The rollout with its first batch out, and a moment at which its replacement is Ready
    (the world ticked up to it)."""
    state, _ = drive(
        world,
        setup,
        seconds=60,
        tick=0.5,
        until=lambda s: s.phase is RolloutPhase.BATCH_JOINING,
    )
    assert state.batch == 1
    later = (state.opened_at or T0) + 6.0
    world.tick(later - 3.0)
    world.tick(later)
    return state, later


def test_each_pod_follows_the_last_once_it_is_ready_and_the_group_settles_at_the_end() -> None:
    world = updating_world()
    state, _ = drive(world, static_setup(), seconds=300, tick=0.5, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    deleted = deletions(world)
    assert [pods for _, pods in deleted] == [
        ("orders-3",),
        ("orders-2",),
        ("orders-1",),
        ("orders-0",),
    ]
    # Restart (2 s), start (1 s), Ready (0.3 s) and a half-second look: far less than the
    # 18 s the group takes to settle after each one.
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(deleted)]
    assert all(gap <= 5.0 for gap in gaps), gaps
    # After the last pod the group must settle (its rejoin held 18 s) and stay so.
    last_deleted = deleted[-1][0]
    completed_at = state.phase_since
    assert completed_at is not None
    assert completed_at >= last_deleted + SETTLE_S + 2


def test_a_pod_away_longer_than_its_session_covers_waits_for_the_group() -> None:
    setup = static_setup()
    budget = static_budget_s(setup)
    world = updating_world(start_delay=budget + 2.0)
    state, _ = drive(world, setup, seconds=400, tick=0.5, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    deleted = deletions(world)
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(deleted)]
    # Each batch now waits for the settle: the restart, then the group, then settleSeconds.
    assert all(gap >= budget + 2.0 + SETTLE_S for gap in gaps), gaps


def test_a_new_generation_since_the_release_waits_for_the_group() -> None:
    world = updating_world()
    setup = static_setup()
    state, later = first_batch_ready(world, setup)
    state = state.moved(generation_at_open=5)
    observation = world.observe(setup, later)
    assert observation.group is not None
    moved = replace(observation, group=replace(observation.group, generation=6))
    after, actions = step(state, moved, later)
    assert (after.phase, after.batch, after.sizes) == (RolloutPhase.BATCH_JOINING, 1, state.sizes)
    assert not any(isinstance(action, SetStatefulSetPartition) for action in actions)
    same = replace(observation, group=replace(observation.group, generation=5))
    after, actions = step(state, same, later)
    # The window slides: the next ordinal joins the batch and its partition is set.
    assert (after.phase, after.batch) == (RolloutPhase.BATCH_JOINING, 1)
    assert after.sizes == (2, 1, 1)
    assert SetStatefulSetPartition(2) in actions


def test_only_static_replacements_with_a_budget_skip_the_settle_between_batches() -> None:
    setup = static_setup()
    update = RolloutKind.ROLLING_UPDATE
    assert advances_on_ready(setup, True, Mechanism.STATEFULSET_REPLACE, update)
    assert not advances_on_ready(setup, False, Mechanism.STATEFULSET_REPLACE, update)
    # A Deployment's new pods taking over identity slots replace members as a StatefulSet's do;
    # static members joining a cold start or scale-up are new members all the same.
    assert advances_on_ready(setup, True, Mechanism.GATE_QUEUE, update)
    assert not advances_on_ready(setup, True, Mechanism.GATE_QUEUE, RolloutKind.SCALE_UP)
    assert not advances_on_ready(setup, True, Mechanism.GATE_QUEUE, RolloutKind.COLD_START)
    redpanda = static_setup(BrokerProfile.REDPANDA)
    assert advances_on_ready(redpanda, True, Mechanism.STATEFULSET_REPLACE, update)
    # A session no longer than a heartbeat covers no restart: no budget, the settle check stays.
    short = setup_for(
        replace(
            setup.policy,
            consumers=ConsumerTimings(session_timeout_ms=3000, heartbeat_interval_ms=3000),
        ),
        window_s=3.0,
    )
    assert static_budget_s(short) == 0
    assert not advances_on_ready(short, True, Mechanism.STATEFULSET_REPLACE, update)


def test_the_plan_note_says_when_the_next_pod_follows() -> None:
    notes = plan_notes(static_setup(), updating_world().workload(T0), STATIC_UPDATE)
    assert any("as each replaced pod is Ready the next is replaced" in note for note in notes)
    assert any("must settle after the last pod" in note for note in notes)


def test_the_window_slides_past_a_slow_restart_and_never_holds_more_than_the_batch() -> None:
    world = World(
        replicas=8,
        gate_installed=False,
        settle_s=SETTLE_S,
        restart_s=2.0,
        # orders-7's new pod takes 12 s to start; every other one 1 s.
        start_delay=lambda name, n: 12.0 if (name, n) == ("orders-7", 2) else 1.0,
        static=True,
    )
    with_pods(world, T0)
    world.revision = "r2"
    setup = static_setup()
    setup = replace(setup, policy=replace(setup.policy, max_batch_size=2))
    state = RolloutState()
    away_most = 0
    for index in range(600):
        now = T0 + index * 0.5
        world.tick(now)
        state, actions = step(state, world.observe(setup, now), now)
        world.apply(actions, now)
        view = world.workload(now)
        back = {pod.name for pod in view.live_pods if pod.updated and pod.ready}
        replaced = {name for _, names in deletions(world) for name in names}
        away_most = max(away_most, len(replaced - back))
        if done(state):
            break
    assert state.phase is RolloutPhase.COMPLETED
    deleted = {name: at for at, names in deletions(world) for name in names}
    assert sorted(deleted) == [f"orders-{k}" for k in range(8)]
    # orders-7 is away about 14 s: the window slides on past it, one pod at a time, instead
    # of waiting for it before orders-5 and the rest (each of which is back in about 4 s).
    assert deleted["orders-3"] < deleted["orders-7"] + 14.0
    assert away_most == 2


def test_dynamic_members_turning_static_are_not_slid_past() -> None:
    # The settings change that turns static membership on: the pods it replaces are dynamic
    # members, each of which leaves the group (a rebalance) as it stops.
    world = updating_world()
    world.static = False
    setup = static_setup()
    state, later = first_batch_ready(world, setup)
    after, actions = step(state, world.observe(setup, later), later)
    assert after.sizes == state.sizes
    assert not any(isinstance(action, SetStatefulSetPartition) for action in actions)
