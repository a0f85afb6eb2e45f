"""A workload's measured start-ups, from its history rows, and the arrival plan they feed: the
model is asked about the pods this workload really has, and says so in the plan's reason."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.planning.rollout_world import T0, World, setup_for, with_pods

from rebalancer.planning.rollout_choices import (
    ASSUMED_START_MS,
    arrival_fields,
    arrival_question,
)
from rebalancer.planning.rollout_plans import Change, RolloutSetup
from rebalancer.planning.rollout_states import Mechanism, RolloutKind
from rebalancer.planning.startup_history import (
    MIN_MEASURED_PODS,
    START_GAP_SECONDS,
    StartupHistory,
    startup_history,
)
from rebalancer.simulation import estimate_arrival_plans
from rebalancer.structs.history import RebalanceCause, RebalanceEvent, RecordType, member_event

SCALE_UP = Change(RolloutKind.SCALE_UP, Mechanism.GATE_QUEUE, static=False)
COLD_START = Change(RolloutKind.COLD_START, Mechanism.GATE_QUEUE, static=False)


def record(event: RebalanceEvent) -> dict[str, Any]:
    """A row as the store gives it back (clients.recording writes RebalanceEvent.to_record)."""
    row = event.to_record()
    row.pop("namespace")
    return row


def pod_start(pod: str, started: float, gate: float | None, run: int = 0) -> dict[str, Any]:
    event = member_event(
        RecordType.POD_START,
        namespace="shop",
        name="orders",
        group_id="orders",
        cluster="k:9092",
        member=pod,
        at=started,
        members=0,
        source="kubernetes",
        record_key=f"pod-start/{pod}-uid/{run}",
    )
    return record(replace(event, started_at=gate))


def join(pod: str, at: float, name: str = "orders") -> dict[str, Any]:
    event = member_event(
        RecordType.MEMBER_JOIN,
        namespace="shop",
        name=name,
        group_id="orders",
        cluster="k:9092",
        member=pod,
        at=at,
        members=1,
        source="member-reports",
    )
    return record(event)


def start_up(
    first: float, pods: int, spacing: float, join_after: float, prefix: str = "orders"
) -> list[dict[str, Any]]:
    """`pods` pods reaching their gates `spacing` s apart from `first`, each opened 0.5 s later
    and joined `join_after` s after its container started."""
    rows: list[dict[str, Any]] = []
    for index in range(pods):
        pod = f"{prefix}-{index}"
        gate = first + index * spacing
        rows += [pod_start(pod, gate + 0.5, gate), join(pod, gate + 0.5 + join_after)]
    return rows


def rebalance_row() -> dict[str, Any]:
    event = RebalanceEvent(
        "shop", "orders", "orders", "k:9092", 3, 2, RebalanceCause.MEMBER_JOINED,
        T0, None, 3, ("orders-0",), (), "member-reports", "Stable",
    )  # fmt: skip
    return record(event)


# -- what the history says ------------------------------------------------------------------


def test_arrivals_count_from_each_starts_first_gate_and_joins_from_the_container() -> None:
    rows = start_up(T0, 4, 1.0, 0.8) + start_up(T0 + 600, 4, 3.0, 2.0, prefix="later")
    history = startup_history([*rows, rebalance_row()], name="orders", group_id="orders")
    assert (history.starts, history.pods) == (2, 8)
    assert history.arrival_offsets_ms == (0, 0, 1000, 2000, 3000, 3000, 6000, 9000)
    assert history.join_delays_ms == (800,) * 4 + (2000,) * 4
    assert history.enough
    assert history.arrivals_ms(3) == (0.0, 2500.0, 9000.0)
    assert history.join_median_ms == 1400.0


def test_gates_further_apart_than_the_gap_are_different_starts() -> None:
    rows = start_up(T0, 2, 1.0, 1.0) + start_up(T0 + START_GAP_SECONDS + 2, 2, 1.0, 1.0, "b")
    history = startup_history(rows, name="orders", group_id="orders")
    assert history.starts == 2 and history.arrival_offsets_ms == (0, 0, 1000, 1000)


def test_restarts_and_lone_pods_time_joins_but_say_nothing_of_a_spread() -> None:
    rows = start_up(T0, 1, 0.0, 1.0)
    rows += [pod_start("orders-0", T0 + 100, None, run=1), join("orders-0", T0 + 103)]
    history = startup_history(rows, name="orders", group_id="orders")
    assert (history.starts, history.pods, history.arrival_offsets_ms) == (0, 0, ())
    assert history.join_delays_ms == (1000, 3000)


def test_other_groups_repeats_and_joins_too_late_are_left_out() -> None:
    rows = start_up(T0, 3, 1.0, 1.0)
    rows += [rows[0], join("orders-1", T0 + 1.2, name="payments")]
    rows += [pod_start("orders-9", T0 + 2.5, T0 + 2), join("orders-9", T0 + 2.5 + 500)]
    history = startup_history(rows, name="orders", group_id="orders")
    assert history.arrival_offsets_ms == (0, 1000, 2000, 2000)
    assert history.join_delays_ms == (1000, 1000, 1000)


# -- what the model is asked ----------------------------------------------------------------


def slow_and_spread() -> StartupHistory:
    """Three past scale-ups of 8 pods, gates 2.5 s apart, consumers joining 4 s after."""
    rows: list[dict[str, Any]] = []
    for number in range(3):
        rows += start_up(T0 + number * 3600, 8, 2.5, 4.0, prefix=f"s{number}")
    return startup_history(rows, name="orders", group_id="orders")


def fast_and_together() -> StartupHistory:
    rows: list[dict[str, Any]] = []
    for number in range(3):
        rows += start_up(T0 + number * 3600, 8, 0.01, 0.5, prefix=f"f{number}")
    return startup_history(rows, name="orders", group_id="orders")


def with_history(history: StartupHistory | None) -> RolloutSetup:
    return replace(setup_for(), estimate=estimate_arrival_plans, startups=history)


def scale_up_fields(
    history: StartupHistory | None, protocol: str = "classic", assignor: str = "range"
) -> dict[str, object]:
    world = with_pods(World(protocol=protocol, assignor=assignor, replicas=6), T0)
    return arrival_fields(
        with_history(history), world.workload(T0), world.group(T0 + 200), SCALE_UP, joiners=6
    )


def test_a_measured_history_is_what_the_model_is_asked_about() -> None:
    world = World()
    default = arrival_question(with_history(None), world.workload(T0), None, 6)
    measured = arrival_question(with_history(slow_and_spread()), world.workload(T0), None, 6)
    assert not default.measured and measured.measured
    assert default.arrivals_ms == (0.0, 1200.0, 2400.0, 3600.0, 4800.0, 6000.0)
    assert measured.arrivals_ms == (0.0, 2500.0, 7500.0, 10000.0, 15000.0, 17500.0)
    assert (default.start_ms, measured.start_ms) == (ASSUMED_START_MS, 4000.0)


def test_slow_spread_starts_cost_the_runner_up_more_and_the_reason_says_why() -> None:
    default, measured = scale_up_fields(None), scale_up_fields(slow_and_spread())
    assert (default["plan"], measured["plan"]) == ("Gather", "Gather")
    assert isinstance(measured["runner_up_cost"], int)
    assert isinstance(default["runner_up_cost"], int)
    # Pods joining one by one over 17.5 s stop every partition more often than over 6 s.
    assert measured["runner_up_cost"] > default["runner_up_cost"] * 1.5
    reason = str(measured["plan_reason"])
    assert "no start-up history" not in reason
    assert (
        "from 3 past starts of this workload (24 pods): arrivals over 16.8 s (p90), "
        "join 4.0 s after open (p90 4.0 s)"
    ) in reason


def test_pods_that_start_together_make_a_kip848_scale_up_cheaper_on_arrival() -> None:
    """Assumed 6 s apart, the pods of a KIP-848 scale-up cost as much gathered as opened on
    arrival (a tie, taken by the sooner Stable plan); measured starting together, opening each
    on arrival costs clearly less, and the reason says it was measured."""
    assumed = scale_up_fields(None, "consumer", "uniform")
    measured = scale_up_fields(fast_and_together(), "consumer", "uniform")
    assert measured["plan"] == "OnArrival"
    assert "past start" in str(measured["plan_reason"])
    assert "no start-up history" in str(assumed["plan_reason"])
    assert isinstance(measured["plan_cost"], int) and isinstance(assumed["plan_cost"], int)
    assert measured["plan_cost"] < assumed["plan_cost"]


def test_too_short_a_history_keeps_the_assumption_and_says_so() -> None:
    rows = start_up(T0, MIN_MEASURED_PODS - 1, 2.5, 4.0)
    short = startup_history(rows, name="orders", group_id="orders")
    assert short.pods == MIN_MEASURED_PODS - 1 and not short.enough
    world = World()
    question = arrival_question(with_history(short), world.workload(T0), None, 6)
    assert question == arrival_question(with_history(None), world.workload(T0), None, 6)
    fields = arrival_fields(with_history(short), world.workload(T0), None, COLD_START, 6)
    assert "no start-up history for this workload" in str(fields["plan_reason"])
    assert scale_up_fields(short) == scale_up_fields(None)
