"""The rollout targets as expectations on the coordinator simulator.

The planner drives a modelled workload (tests.planning.rollout_world); when each pod's consumer
starts or stops follows from the planner's actions; those times are then played on the
simulator's model of the broker, which counts the rebalances. The benchmark measures the same
targets on the lab with real consumers.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.planning.rollout_world import T0, World, drive, setup_for, with_pods

from rebalancer.planning.rollout_actions import DeletePods
from rebalancer.planning.rollout_plans import expected_batch_seconds
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    FixedOffsets,
    MemberPlan,
    Scenario,
    join_window,
    simulate,
)
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.rollout_policy import ConsumerTimings, RolloutPolicy, StaticMembership

# From a gate's exit to the consumer's first JoinGroup: application start-up, which the gate
# does not remove. Up to 400 ms here.
STARTUP_MS = (0.0, 130.0, 260.0, 390.0, 70.0, 200.0, 330.0, 20.0, 150.0, 280.0)


def finished(state: RolloutState) -> bool:
    return state.phase in (RolloutPhase.COMPLETED, RolloutPhase.FAILED)


def setup(profile: BrokerProfile, session_ms: int = 45000, **policy: object) -> object:
    consumers = ConsumerTimings(session_timeout_ms=session_ms, heartbeat_interval_ms=3000)
    rollout = RolloutPolicy(consumers=consumers, **policy)  # type: ignore[arg-type]
    window = join_window(
        CoordinatorSettings(initial_rebalance_delay_ms=rollout.initial_rebalance_delay_ms),
        profile,
        ConsumerSettings(session_timeout_ms=session_ms, heartbeat_interval_ms=3000),
    )
    return setup_for(rollout, profile, window)


def managed_cold_start(arrivals_s: list[float], profile: BrokerProfile, session_ms: int) -> World:
    world = World(
        replicas=len(arrivals_s),
        start_delay=lambda name, _: arrivals_s[int(name.rsplit("-", 1)[1])],
    )
    world.scale_to(len(arrivals_s), T0)
    state, _ = drive(
        world,
        setup(profile, session_ms, batch_deadline_seconds=600),  # type: ignore[arg-type]
        seconds=400,
        until=finished,
    )
    assert state.phase is RolloutPhase.COMPLETED
    return world


def consumer_starts_ms(world: World) -> list[float]:
    starts = []
    for index in range(world.replicas):
        start = world.pods[world.pod_name(index)].consumer_start()
        assert start is not None
        starts.append((start - T0) * 1000 + STARTUP_MS[index % len(STARTUP_MS)])
    return starts


def play(
    starts_ms: list[float],
    profile: BrokerProfile,
    session_ms: int = 45000,
    *,
    static: bool = False,
    departures: dict[int, Departure] | None = None,
    assignor: str = "round-robin",
) -> Scenario:
    consumer = ConsumerSettings(
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=3000,
        assignor=assignor,  # type: ignore[arg-type]
    )
    members = tuple(
        MemberPlan(
            name=f"orders-{index}",
            start_ms=start,
            instance_id=f"orders-{index}" if static else None,
            departures=(departures[index],) if departures and index in departures else (),
        )
        for index, start in enumerate(starts_ms)
    )
    return Scenario(
        members=members,
        starts=FixedOffsets(tuple(starts_ms)),
        profile=profile,
        consumer=consumer,
        partitions=48,
    )


arrivals = st.lists(
    st.floats(min_value=0.0, max_value=60.0, allow_nan=False), min_size=2, max_size=16
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrivals)
def test_managed_cold_start_is_one_rebalance_on_kafka_however_spread(
    arrivals_s: list[float],
) -> None:
    world = managed_cold_start(arrivals_s, BrokerProfile.APACHE_KAFKA, 45000)
    result = simulate(play(consumer_starts_ms(world), BrokerProfile.APACHE_KAFKA))
    assert result.rebalance_count == 1
    assert result.rebalances[0].cause == "initial-join"
    assert len(result.rebalances[0].members) == len(arrivals_s)


def test_naive_cold_start_rebalances_once_per_window_missed() -> None:
    arrivals_s = [0.0, 4.0, 8.0, 12.0, 16.0, 20.0]
    naive = play([a * 1000 for a in arrivals_s], BrokerProfile.APACHE_KAFKA)
    assert simulate(naive).rebalance_count > 1
    managed = managed_cold_start(arrivals_s, BrokerProfile.APACHE_KAFKA, 45000)
    assert (
        simulate(play(consumer_starts_ms(managed), BrokerProfile.APACHE_KAFKA)).rebalance_count == 1
    )


def test_kafka_batch_takes_the_expected_time() -> None:
    """The planner's estimate (and so its deadline check) matches the simulator: the initial
    delay slides once when more than one member joins during it."""
    kafka = setup(BrokerProfile.APACHE_KAFKA)
    for size in (1, 6):
        result = simulate(play([0.0] * size, BrokerProfile.APACHE_KAFKA))
        expected = expected_batch_seconds(kafka, True, size, False)  # type: ignore[arg-type]
        assert result.time_to_stable_s is not None
        assert abs(result.time_to_stable_s - expected) < 0.5


def test_managed_scale_up_costs_one_rebalance() -> None:
    world = with_pods(World(replicas=6), T0)
    world.start_delay = lambda name, _: 1.0 + 2.5 * (int(name.rsplit("-", 1)[1]) - 6)
    world.scale_to(12, T0)
    state, _ = drive(world, setup(BrokerProfile.APACHE_KAFKA), seconds=300, until=finished)  # type: ignore[arg-type]
    assert state.phase is RolloutPhase.COMPLETED
    offset = 60_000.0  # the first six started a minute before the scale-up
    starts = [0.0] * 6 + [offset + s for s in consumer_starts_ms(world)[6:]]
    result = simulate(play(starts, BrokerProfile.APACHE_KAFKA))
    later = [r for r in result.rebalances if r.start_s * 1000 >= offset]
    assert len(later) == 1
    assert later[0].cause == "member-join"
    naive = [0.0] * 6 + [offset + 1000 + 2500 * i for i in range(6)]
    naive_later = [
        r
        for r in simulate(play(naive, BrokerProfile.APACHE_KAFKA)).rebalances
        if r.start_s * 1000 >= offset
    ]
    assert len(naive_later) > 1


def rolling_update(
    static: bool, restart_s: float, batch: int
) -> tuple[World, dict[int, Departure]]:
    """A managed StatefulSet update of 6 pods; each replaced pod's stop and restart times."""
    world = with_pods(World(replicas=6, partition=6, restart_s=restart_s), T0)
    world.revision = "r2"
    membership = StaticMembership.ENABLED if static else StaticMembership.DISABLED
    policy_setup = setup(
        BrokerProfile.APACHE_KAFKA,
        max_batch_size=batch,
        settle_seconds=5,
        static_membership=membership,
    )
    state, _ = drive(world, policy_setup, seconds=600, until=finished)  # type: ignore[arg-type]
    assert state.phase is RolloutPhase.COMPLETED
    offset_ms = 60_000.0
    departures: dict[int, Departure] = {}
    for at, action in world.log:
        if isinstance(action, DeletePods):
            for name in action.pods:
                index = int(name.rsplit("-", 1)[1])
                stopped = offset_ms + (at - T0) * 1000
                start = world.pods[name].consumer_start()
                assert start is not None
                back = offset_ms + (start - T0) * 1000 + STARTUP_MS[index]
                departures[index] = Departure(stopped, "leave", back - stopped)
    assert len(departures) == 6
    return world, departures


def test_static_rolling_update_costs_no_rebalance() -> None:
    _, departures = rolling_update(static=True, restart_s=3.0, batch=2)
    result = simulate(
        play([0.0] * 6, BrokerProfile.APACHE_KAFKA, static=True, departures=departures)
    )
    assert result.rebalance_count == 1  # the initial join; the update itself costs none


def test_dynamic_rolling_update_costs_at_most_two_rebalances_per_batch() -> None:
    _, departures = rolling_update(static=False, restart_s=3.0, batch=2)
    result = simulate(play([0.0] * 6, BrokerProfile.APACHE_KAFKA, departures=departures))
    batches = 3
    assert result.rebalance_count - 1 <= 2 * batches
    causes = {r.cause for r in result.rebalances[1:]}
    assert causes <= {"member-leave", "member-join"}
