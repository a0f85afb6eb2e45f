"""The arrival plan of a cold start or scale-up: the cheapest on the coordinator model, recorded
with the runner-up's cost and why, and carried out (pods opened as they appear, or gathered)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.planning.rollout_world import T0, World, drive, roundtrip, setup_for, with_pods

from rebalancer.planning.rollout_actions import OpenGate, RecordProgress
from rebalancer.planning.rollout_choices import SOONER_S, TIE_SHARE, arrival_fields
from rebalancer.planning.rollout_plans import Change, RolloutSetup
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutPhase, RolloutState
from rebalancer.simulation import estimate_arrival_plans
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.plan_costs import (
    ArrivalPlan,
    ArrivalQuestion,
    CostWeights,
    GroupKind,
    PlanCost,
)
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import ProtocolChoice

ON_ARRIVAL, GATHER = ArrivalPlan.ON_ARRIVAL, ArrivalPlan.GATHER
COLD_START = Change(RolloutKind.COLD_START, Mechanism.GATE_QUEUE, static=False)
SCALE_UP = Change(RolloutKind.SCALE_UP, Mechanism.GATE_QUEUE, static=False)


def done(state: RolloutState) -> bool:
    return state.phase in (RolloutPhase.COMPLETED, RolloutPhase.FAILED)


def modelled(policy: RolloutPolicy | None = None) -> RolloutSetup:
    return replace(setup_for(policy), estimate=estimate_arrival_plans)


def fixed(*costs: PlanCost) -> RolloutSetup:
    """A setup whose model says exactly `costs`, whatever it is asked."""

    def estimate(_: ArrivalQuestion) -> tuple[PlanCost, ...]:
        return costs

    return replace(setup_for(), estimate=estimate)


def cost(plan: ArrivalPlan, unowned: float, stop: float, rebalances: int = 1) -> PlanCost:
    return PlanCost(plan, unowned, stop, rebalances, stable_s=10.0)


def stair(spacing: float, **fields: object) -> World:
    """Pods whose gates start `spacing` seconds apart, in ordinal order."""
    return World(
        start_delay=lambda name, _: 1.0 + int(name.rsplit("-", 1)[1]) * spacing,
        **fields,  # type: ignore[arg-type]
    )


def chosen_for(setup: RolloutSetup, world: World | None = None) -> dict[str, object]:
    world = world or World()
    return arrival_fields(setup, world.workload(T0), None, COLD_START, joiners=6)


# -- the choice -----------------------------------------------------------------------------


def test_the_cheaper_plan_is_taken_and_the_runner_up_recorded() -> None:
    fields = chosen_for(fixed(cost(ON_ARRIVAL, 300, 0), cost(GATHER, 200, 0)))
    assert (fields["plan"], fields["plan_cost"]) == ("Gather", 200)
    assert (fields["runner_up"], fields["runner_up_cost"]) == ("OnArrival", 300)
    fields = chosen_for(fixed(cost(ON_ARRIVAL, 200, 0), cost(GATHER, 300, 0)))
    assert (fields["plan"], fields["runner_up"]) == ("OnArrival", "Gather")


def test_stop_the_world_seconds_weigh_on_top_and_the_weights_are_the_users() -> None:
    costs = (cost(ON_ARRIVAL, 100, 80), cost(GATHER, 150, 0))
    assert chosen_for(fixed(*costs))["plan"] == "Gather"  # 180 against 150
    ignore_stops = RolloutPolicy(cost_weights=CostWeights(unowned=1.0, stop_the_world=0.0))
    setup = replace(fixed(*costs), policy=ignore_stops)
    assert chosen_for(setup)["plan"] == "OnArrival"  # 100 against 150


def scale_up_plan(
    assignor: str, weights: CostWeights | None = None, arrival_plan: ArrivalPlan | None = None
) -> str:
    """The plan of 24 pods joining a classic group of 24 on 48 partitions, on the model."""
    world = with_pods(World(assignor=assignor, replicas=24), T0)
    group = replace(world.group(T0 + 200), total_partitions=48, assigned_partitions=48)
    policy = RolloutPolicy(cost_weights=weights or CostWeights(), arrival_plan=arrival_plan)
    setup = modelled(policy)
    fields = arrival_fields(setup, world.workload(T0), group, SCALE_UP, joiners=24)
    return str(fields["plan"])


def test_a_cooperative_scale_up_opens_on_arrival_as_gathering_only_delays_the_joiners() -> None:
    """Both plans move the same partitions, one at a time; gathered, the joiners' partitions
    wait for the last pod (measured on Kafka: 12.8 s against 10.1 s on arrival, N=24)."""
    assert scale_up_plan("cooperative-sticky") == "OnArrival"


def test_the_weight_of_waiting_partitions_is_the_users() -> None:
    """An eager scale-up opened on arrival stops every partition at each of its rebalances:
    by default the model gathers it, and a user to whom the joiners' wait matters more says so."""
    assert scale_up_plan("range") == "Gather"
    assert scale_up_plan("range", CostWeights(waiting=10.0)) == "OnArrival"


def test_the_plan_opened_ahead_is_taken_only_when_the_spec_names_it() -> None:
    assert scale_up_plan("range", arrival_plan=ArrivalPlan.OPEN_AHEAD) == "OpenAhead"


def test_a_tie_goes_to_fewer_rebalances() -> None:
    close = 100 * (1 + TIE_SHARE / 2)
    costs = (cost(ON_ARRIVAL, 100, 0, rebalances=4), cost(GATHER, close, 0, rebalances=1))
    assert chosen_for(fixed(*costs))["plan"] == "Gather"
    apart = 100 * (1 + 2 * TIE_SHARE)
    costs = (cost(ON_ARRIVAL, 100, 0, rebalances=4), cost(GATHER, apart, 0, rebalances=1))
    assert chosen_for(fixed(*costs))["plan"] == "OnArrival"


def test_a_tie_goes_to_a_plan_stable_seconds_sooner_before_fewer_rebalances() -> None:
    """A cooperative scale-up: both plans move the same partitions; gathered, the batch pays
    both of cooperative's rounds after its last pod; opened as they come, during."""
    sooner = PlanCost(ON_ARRIVAL, 88.3, 88.3, rebalances=3, stable_s=11.2)
    fewer = PlanCost(GATHER, 88.5, 88.5, rebalances=2, stable_s=13.6)
    assert chosen_for(fixed(sooner, fewer))["plan"] == "OnArrival"
    barely = replace(sooner, stable_s=fewer.stable_s - SOONER_S / 2)
    assert chosen_for(fixed(barely, fewer))["plan"] == "Gather"


def test_a_plan_named_in_the_spec_is_taken_and_the_models_choice_said() -> None:
    policy = RolloutPolicy(arrival_plan=GATHER)
    setup = replace(fixed(cost(ON_ARRIVAL, 100, 0), cost(GATHER, 400, 0)), policy=policy)
    fields = chosen_for(setup)
    assert (fields["plan"], fields["plan_cost"]) == ("Gather", 400)
    assert (fields["runner_up"], fields["runner_up_cost"]) == ("OnArrival", 100)
    assert "arrivalPlan" in str(fields["plan_reason"])
    assert "the model would take OnArrival" in str(fields["plan_reason"])


def test_rolling_updates_have_no_arrival_plan() -> None:
    change = Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static=True)
    fields = arrival_fields(modelled(), World().workload(T0), None, change, joiners=6)
    assert set(fields.values()) == {None}


@pytest.mark.parametrize(
    ("protocol", "assignor", "members"),
    [
        ("consumer", "uniform", 0),
        ("consumer", "uniform", 6),
        ("classic", "range", 0),
        ("classic", "range", 6),
        ("classic", "cooperative-sticky", 0),
        ("classic", "cooperative-sticky", 6),
    ],
)
def test_the_model_never_leaves_a_cheaper_plan_on_the_table(
    protocol: str, assignor: str, members: int
) -> None:
    """Whatever the group, the plan taken costs no more than any other on the model (beyond a
    tie, which fewer rebalances break)."""
    world = World(protocol=protocol, assignor=assignor, replicas=members)
    if members:
        world = with_pods(world, T0)
    setup = modelled()
    change = Change(
        RolloutKind.SCALE_UP if members else RolloutKind.COLD_START, Mechanism.GATE_QUEUE, False
    )
    fields = arrival_fields(setup, world.workload(T0), world.group(T0 + 200), change, joiners=6)
    assert fields["plan"] in ("OnArrival", "Gather")
    assert isinstance(fields["plan_cost"], int) and isinstance(fields["runner_up_cost"], int)
    assert fields["plan_cost"] <= fields["runner_up_cost"] * (1 + TIE_SHARE) + 1
    assert "no start-up history" in str(fields["plan_reason"])


def test_a_cooperative_scale_up_is_told_what_a_shorter_heartbeat_would_save() -> None:
    """Its members hear of each rebalance at their next heartbeat; a KIP-848 group's heartbeat
    is the broker's, and a group already at 1 s has nothing to gain."""

    def reason(protocol: str, assignor: str, setup: RolloutSetup) -> str:
        world = with_pods(World(protocol=protocol, assignor=assignor, replicas=24), T0)
        # Two partitions for each member after the change, so every joiner takes some.
        group = replace(world.group(T0 + 200), total_partitions=48, assigned_partitions=48)
        fields = arrival_fields(setup, world.workload(T0), group, SCALE_UP, joiners=24)
        return str(fields["plan_reason"])

    told = reason("classic", "cooperative-sticky", modelled())
    assert "with heartbeat.interval.ms 1000" in told and "spec.policy.settings" in told
    assert "heartbeat.interval.ms" not in reason("consumer", "uniform", modelled())
    setup = modelled()
    consumers = replace(setup.policy.consumers, heartbeat_interval_ms=1000)
    fast = replace(setup, policy=replace(setup.policy, consumers=consumers))
    assert "heartbeat.interval.ms" not in reason("classic", "cooperative-sticky", fast)


# -- carried out ----------------------------------------------------------------------------


def test_a_kip848_cold_start_opens_every_pod_as_it_appears() -> None:
    """No join barrier: gathered pods would leave every partition unowned while they wait, so
    each pod is opened as soon as it exists, before its gate runs."""
    world = stair(2.0, protocol="consumer", assignor="uniform")
    world.scale_to(6, T0)
    state, _ = drive(world, modelled(RolloutPolicy(settle_seconds=2)), seconds=200, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    assert state.plan == "OnArrival"
    assert state.runner_up == "Gather"
    assert state.plan_cost is not None and state.runner_up_cost is not None
    assert state.plan_cost < state.runner_up_cost
    opened = {name: at for at, action in world.log if isinstance(action, OpenGate)
              for name in action.pods}  # fmt: skip
    assert sorted(opened) == [f"orders-{index}" for index in range(6)]
    for name, at in opened.items():
        assert at <= world.pods[name].arrives_at, f"{name} waited at its gate"
    said = [
        a for _, a in world.log if isinstance(a, RecordProgress) and a.reason == "RolloutPlanned"
    ]
    assert len(said) == 1
    assert "OnArrival" in said[0].message and "Gather" in said[0].message


def test_pods_created_after_the_release_are_opened_too() -> None:
    world = World(protocol="consumer", assignor="uniform")
    world.scale_to(3, T0)
    setup = modelled(RolloutPolicy(settle_seconds=2))
    state, _ = drive(world, setup, seconds=3, until=done)
    assert state.phase is RolloutPhase.BATCH_JOINING
    assert state.plan == "OnArrival" and len(state.opened) == 3
    state, _ = drive(world, setup, start=T0 + 3, seconds=120, state=state, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    assert all(pod.opened_at is not None for pod in world.pods.values())


def test_an_eager_scale_up_is_gathered_into_one_release() -> None:
    """A Stable group has no initial delay: pods joining one by one would stop every partition
    once each (eager), so the batch is gathered."""
    world = with_pods(stair(1.0, replicas=6), T0)
    world.scale_to(12, T0)
    state, _ = drive(world, modelled(RolloutPolicy(arrival_plan=GATHER)), seconds=200, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    assert state.kind is RolloutKind.SCALE_UP
    assert state.plan == "Gather"
    opens = [a for _, a in world.log if isinstance(a, OpenGate)]
    assert [len(a.pods) for a in opens] == [6]


def test_a_scale_up_opened_ahead_opens_who_waits_at_its_moment_and_the_rest_as_they_come() -> None:
    """The model assumed arrivals over 6 s and an open of 1 s: the pods waiting 5 s after the
    change open together, the later ones as they come."""
    arrivals = {6: 1.0, 7: 2.1, 8: 3.2, 9: 4.3, 10: 5.4, 11: 6.5}

    def start_delay(name: str, _incarnation: int) -> float:
        return arrivals.get(int(name.rsplit("-", 1)[1]), 1.0)

    world = with_pods(World(replicas=6, start_delay=start_delay), T0)
    world.scale_to(12, T0)
    policy = RolloutPolicy(settle_seconds=2, arrival_plan=ArrivalPlan.OPEN_AHEAD)
    state, _ = drive(world, modelled(policy), seconds=200, until=done)
    assert state.phase is RolloutPhase.COMPLETED
    assert state.plan == "OpenAhead"
    opens = [(at, a) for at, a in world.log if isinstance(a, OpenGate)]
    first_at, first = opens[0]
    assert first_at == T0 + 5 and sorted(first.pods) == [f"orders-{i}" for i in (6, 7, 8, 9)]
    later = {name: at for at, a in opens[1:] for name in a.pods}
    assert sorted(later) == ["orders-10", "orders-11"]
    # Opened at the planner's next look, before or as they reach their gates.
    assert all(at <= world.pods[name].arrives_at + 1.0 for name, at in later.items())
    assert not any(a.together for _, a in opens)


def test_the_plan_survives_an_operator_restart() -> None:
    world = stair(2.0, protocol="consumer", assignor="uniform")
    world.scale_to(6, T0)
    state, _ = drive(world, modelled(), seconds=2)
    assert state.plan == "OnArrival"
    back = roundtrip(state)
    assert (back.plan, back.plan_cost, back.runner_up, back.runner_up_cost, back.plan_reason) == (
        state.plan, state.plan_cost, state.runner_up, state.runner_up_cost, state.plan_reason
    )  # fmt: skip
    status = state.to_status()
    assert status["plan"] == "OnArrival" and "planReason" in status and "runnerUpCost" in status


def test_the_template_says_the_protocol_of_a_group_the_broker_describes_as_classic() -> None:
    """An Empty or unknown group is described as classic; the consumers' template knows better."""
    world = World(protocol="classic", assignor="range", replicas=3)
    view = replace(world.workload(T0), group_protocol="consumer")
    fields = arrival_fields(modelled(), view, world.group(T0), COLD_START, joiners=3)
    assert "KIP-848" in str(fields["plan_reason"])
    view = replace(world.workload(T0), assignment_strategy="cooperative-sticky")
    fields = arrival_fields(modelled(), view, world.group(T0), COLD_START, joiners=3)
    assert "cooperative classic group" in str(fields["plan_reason"])


def test_pods_opened_on_arrival_go_at_once_and_a_gathered_batch_together() -> None:
    """A gathered batch lets go at one moment; pods released on arrival have nobody to wait for."""
    world = stair(2.0, protocol="consumer", assignor="uniform")
    world.scale_to(6, T0)
    drive(world, modelled(), seconds=30, until=done)
    opens = [a for _, a in world.log if isinstance(a, OpenGate)]
    assert opens and not any(a.together for a in opens)
    world = stair(0.5)
    world.scale_to(6, T0)
    drive(world, modelled(RolloutPolicy(arrival_plan=GATHER)), seconds=30, until=done)
    opens = [a for _, a in world.log if isinstance(a, OpenGate)]
    assert len(opens) == 1 and opens[0].together


def test_a_gathered_scale_up_lets_each_gate_go_as_it_sees_its_patch() -> None:
    """A scale-up joins a group that has members, whose rebalance holds the batch's joins
    together; a common release moment would only wait for the slowest gate."""
    world = with_pods(stair(0.5, replicas=3), T0)
    world.scale_to(6, T0)
    state, _ = drive(world, modelled(RolloutPolicy(arrival_plan=GATHER)), seconds=30, until=done)
    assert state.kind is RolloutKind.SCALE_UP and state.plan == "Gather"
    opens = [a for _, a in world.log if isinstance(a, OpenGate)]
    assert len(opens) == 1 and len(opens[0].pods) == 3 and not opens[0].together


def test_a_protocol_the_spec_declares_counts_where_the_template_says_none() -> None:
    world = World(protocol="classic", assignor="range", replicas=3)
    setup = replace(modelled(), protocol=ProtocolChoice.CONSUMER)
    fields = arrival_fields(setup, world.workload(T0), world.group(T0), COLD_START, joiners=3)
    assert "KIP-848" in str(fields["plan_reason"])


def test_a_streams_group_is_costed_on_the_kip848_model_and_the_reason_says_so() -> None:
    """A streams group (KIP-1071) has no JoinGroup barrier: without a model of its own it is
    asked about as KIP-848, declared or seen, never as an eager classic group."""
    world = World(protocol="classic", assignor="range", replicas=3)
    asked: list[ArrivalQuestion] = []

    def estimate(question: ArrivalQuestion) -> tuple[PlanCost, ...]:
        asked.append(question)
        return estimate_arrival_plans(question)

    declared = replace(setup_for(), estimate=estimate, protocol=ProtocolChoice.STREAMS)
    fields = arrival_fields(declared, world.workload(T0), world.group(T0), COLD_START, joiners=3)
    reason = str(fields["plan_reason"])
    assert "a streams group (no join barrier), costed on the KIP-848 coordinator model" in reason
    assert "eager" not in reason
    assert (asked[0].group, asked[0].streams) == (GroupKind.KIP848, True)
    # Seen as one under auto (the observer's status.group.protocol) with members.
    seen = replace(world.group(T0), protocol="streams", members=3, state=GroupState.STABLE)
    automatic = replace(setup_for(), estimate=estimate)
    arrival_fields(automatic, world.workload(T0), seen, SCALE_UP, joiners=3)
    assert (asked[1].group, asked[1].streams) == (GroupKind.KIP848, True)
    # A KIP-848 group is still said to be one.
    consumer = replace(declared, protocol=ProtocolChoice.CONSUMER)
    fields = arrival_fields(consumer, world.workload(T0), world.group(T0), COLD_START, joiners=3)
    assert (asked[2].group, asked[2].streams) == (GroupKind.KIP848, False)
    assert "a KIP-848 group (no join barrier)" in str(fields["plan_reason"])


def test_a_gate_that_holds_only_the_join_is_asked_about_with_the_start_up_taken_off() -> None:
    """The consumers behind a join-holding gate have started already: the model is asked about
    joins that follow the open at once, and says so."""
    world = World(replicas=6)
    asked: list[ArrivalQuestion] = []

    def estimate(question: ArrivalQuestion) -> tuple[PlanCost, ...]:
        asked.append(question)
        return estimate_arrival_plans(question)

    setup = replace(setup_for(), estimate=estimate)
    held = replace(world.workload(T0), gate_holds_join=True)
    pod_fields = arrival_fields(setup, world.workload(T0), None, COLD_START, joiners=6)
    join_fields = arrival_fields(setup, held, None, COLD_START, joiners=6)
    asked = [q for q in asked if q.heartbeat_ms == 3000]  # not what a shorter one would save
    assert asked[1].start_ms < asked[0].start_ms / 5
    assert "1.5 s after their gates open" in str(pod_fields["plan_reason"])
    assert "0.2 s after their gates open" in str(join_fields["plan_reason"])


def test_an_hpas_scale_up_is_gathered_for_its_window_whatever_the_model_prefers() -> None:
    """autoscalerWindowSeconds asks for an HPA's quick steps to join as one wave: gathering is
    the user's word there, and the model's preference is said beside it."""
    scale_up = Change(RolloutKind.SCALE_UP, Mechanism.GATE_QUEUE, static=False)
    setup = fixed(cost(ON_ARRIVAL, 100, 0), cost(GATHER, 300, 0))
    view = World().workload(T0)
    fields = arrival_fields(setup, view, None, scale_up, joiners=2, hpa_window=True)
    assert (fields["plan"], fields["runner_up"]) == ("Gather", "OnArrival")
    assert "autoscalerWindowSeconds" in str(fields["plan_reason"])
    assert arrival_fields(setup, view, None, scale_up, joiners=2)["plan"] == "OnArrival"
    # A cold start has no HPA steps to gather.
    assert arrival_fields(setup, view, None, COLD_START, 2, hpa_window=True)["plan"] == "OnArrival"
