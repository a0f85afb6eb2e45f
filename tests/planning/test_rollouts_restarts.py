"""Restart safety: an operator restart (state through status.rollout) or a crash before saving
changes nothing about which pods are released in which batch."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.planning.rollout_world import T0, World, drive, roundtrip, setup_for, with_pods

from rebalancer.planning.rollout_actions import DeletePods, OpenGate
from rebalancer.planning.rollout_states import (
    Mechanism,
    RolloutKind,
    RolloutPhase,
    RolloutState,
    decode_ordinals,
    encode_ordinals,
    stamp,
)
from rebalancer.structs.rollout_policy import RolloutPolicy, StaticMembership
from rebalancer.structs.times import format_rfc3339, parse_rfc3339

Phase = RolloutPhase
SECONDS = 400.0


def finished(state: RolloutState) -> bool:
    return state.phase in (Phase.COMPLETED, Phase.FAILED)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[str, list[float], RolloutPolicy]:
    """A scenario: cold start, scale-up or StatefulSet update, pod start delays, a policy."""
    scenario = draw(st.sampled_from(["cold-start", "scale-up", "update", "static-update"]))
    replicas = draw(st.integers(min_value=1, max_value=8))
    delays = draw(
        st.lists(
            st.floats(min_value=0.0, max_value=40.0, allow_nan=False),
            min_size=replicas,
            max_size=replicas,
        )
    )
    policy = RolloutPolicy(
        max_batch_size=draw(st.none() | st.integers(min_value=1, max_value=replicas)),
        gather_seconds=draw(st.integers(min_value=0, max_value=60)),
        settle_seconds=draw(st.integers(min_value=0, max_value=8)),
        batch_deadline_seconds=draw(st.integers(min_value=60, max_value=200)),
        gate_timeout_seconds=0,
        static_membership=(
            StaticMembership.ENABLED if scenario == "static-update" else StaticMembership.DISABLED
        ),
    )
    return scenario, delays, policy


def build(scenario: str, delays: list[float]) -> World:
    replicas = len(delays)

    def delay(name: str, incarnation: int) -> float:
        ordinal = int(name.rsplit("-", 1)[1])
        return 0.5 + delays[min(ordinal, replicas - 1)] / incarnation

    if scenario == "cold-start":
        world = World(replicas=replicas, start_delay=delay)
        world.scale_to(replicas, T0)
    elif scenario == "scale-up":
        world = with_pods(World(replicas=max(replicas // 2, 1), start_delay=delay), T0)
        world.scale_to(max(replicas, 2), T0)
    else:
        world = with_pods(World(replicas=replicas, partition=replicas, start_delay=delay), T0)
        world.revision = "r2"
    return world


def outcome(world: World, state: RolloutState) -> tuple[object, ...]:
    opens = [
        (round(at, 3), action)
        for at, action in world.log
        if isinstance(action, OpenGate) and action.pods
    ]
    return (state.phase, state.batch, state.sizes, state.members_joined, tuple(opens))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(min_value=0, max_value=int(SECONDS) - 1))
def test_a_restart_at_any_step_gives_the_same_rollout(
    scenario: tuple[str, list[float], RolloutPolicy], cut: int
) -> None:
    kind, delays, policy = scenario
    setup = setup_for(policy)
    straight_world = build(kind, delays)
    straight, _ = drive(straight_world, setup, seconds=SECONDS, until=finished)
    restarted_world = build(kind, delays)
    restarted, _ = drive(restarted_world, setup, seconds=SECONDS, restart_at=cut, until=finished)
    assert outcome(restarted_world, restarted) == outcome(straight_world, straight)
    # Every action, waits included, is the same: the restart is invisible.
    assert [a for a in restarted_world.log] == [a for a in straight_world.log]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.integers(min_value=0, max_value=int(SECONDS) - 1))
def test_a_crash_before_saving_neither_repeats_nor_skips_a_batch(
    scenario: tuple[str, list[float], RolloutPolicy], crash: int
) -> None:
    kind, delays, policy = scenario
    setup = setup_for(policy)
    world = build(kind, delays)
    state, _ = drive(world, setup, seconds=SECONDS, crash_at=crash, until=finished)
    assert state.phase is Phase.COMPLETED
    labels = [
        action.batch for _, action in world.log if isinstance(action, OpenGate) and action.pods
    ]
    batches = [int(label.rsplit("/", 1)[1]) for label in dict.fromkeys(labels)]
    assert batches == list(range(1, len(batches) + 1))  # in order, none skipped
    opened: dict[str, str] = {}
    for _, action in world.log:
        if isinstance(action, OpenGate):
            for pod in action.pods:
                uid = world.pods[pod].uid if pod in world.pods else pod
                # A pod is only ever (re)asked to open by the batch that first opened it.
                assert opened.setdefault(f"{uid}", action.batch) == action.batch or (
                    uid not in world.opened_batches()
                )
    assert {pod.revision for pod in world.pods.values()} == {world.revision}
    assert all(pod.opened_at is not None or not pod.gated for pod in world.pods.values())
    assert state.members_joined >= len([p for p in world.pods.values() if p.batch])


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=1e9, max_value=4e9, allow_nan=False))
def test_times_survive_status(moment: float) -> None:
    held = stamp(moment)
    assert stamp(parse_rfc3339(format_rfc3339(held, milliseconds=True))) == held


@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=60))
def test_ordinals_survive_status(ordinals: list[int]) -> None:
    assert decode_ordinals(encode_ordinals(tuple(ordinals))) == tuple(ordinals)


def test_ordinal_runs_are_short() -> None:
    assert encode_ordinals((11, 10, 9, 8, 5, 3, 2)) == "11-8,5,3-2"


@given(
    st.builds(
        RolloutState,
        phase=st.sampled_from(list(Phase)),
        kind=st.none() | st.sampled_from(list(RolloutKind)),
        mechanism=st.none() | st.sampled_from(list(Mechanism)),
        rollout_id=st.none() | st.text(min_size=1, max_size=8),
        batch=st.integers(min_value=0, max_value=50),
        sizes=st.lists(st.integers(min_value=1, max_value=100), max_size=10).map(tuple),
        ordinals=st.lists(st.integers(min_value=0, max_value=300), max_size=20).map(tuple),
        opened=st.lists(st.text(min_size=1, max_size=10), max_size=5).map(tuple),
        started_at=st.none() | st.floats(min_value=1e9, max_value=3e9).map(stamp),
        deadline=st.none() | st.floats(min_value=1e9, max_value=3e9).map(stamp),
        paused_from=st.none() | st.sampled_from(list(Phase)),
        holding_deployment=st.booleans(),
        rebalances_at_start=st.none() | st.integers(min_value=0, max_value=10**6),
    )
)
def test_state_survives_status(state: RolloutState) -> None:
    assert RolloutState.from_status(json.loads(json.dumps(state.to_status()))) == state


def test_status_shows_progress_the_way_kubectl_prints_it() -> None:
    state = RolloutState(
        phase=Phase.BATCH_JOINING,
        batch=2,
        sizes=(3, 3, 2),
        members_joined=3,
        rebalances=1,
        started_at=T0,
        message="waiting",
    )
    status = state.to_status()
    assert status["phase"] == "BatchJoining"
    assert (status["batch"], status["batches"], status["batchSizes"]) == (2, 3, [3, 3, 2])
    assert (status["membersJoined"], status["rebalances"]) == (3, 1)
    assert status["startedAt"] == "2023-11-14T22:13:20.000Z"


def test_unreadable_status_starts_from_idle() -> None:
    state = RolloutState.from_status({"phase": "Sideways", "batch": "x"})
    assert state.phase is Phase.IDLE
    assert state.message is not None
    assert RolloutState.from_status(None) == RolloutState()


def test_a_restart_mid_batch_carries_on_with_that_batch() -> None:
    world = with_pods(World(replicas=6, partition=6), T0)
    world.revision = "r2"
    setup = setup_for(RolloutPolicy(max_batch_size=2, settle_seconds=2))
    state, _ = drive(world, setup, seconds=400, until=lambda s: s.batch == 2)
    assert state.phase is Phase.BATCH_OPENING
    resumed = roundtrip(state)
    assert resumed == state
    final, _ = drive(world, setup, start=T0 + 401, seconds=400, state=resumed, until=finished)
    assert final.phase is Phase.COMPLETED
    deleted = [a for _, a in world.log if isinstance(a, DeletePods)]
    assert len(deleted) == 3  # one per batch: nothing deleted twice after the restart
