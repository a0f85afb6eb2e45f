"""Scoring and choosing settings, without Spark: small fleets on the simulator, plain tables."""

from __future__ import annotations

from dataclasses import replace

from rebalancer.learning.choosing import (
    ONLY_OWN_DELAYS_NOTE,
    OWN_DELAY_NOTE,
    START_UPS_NOTE,
    GroupFacts,
    GroupScores,
    choose,
)
from rebalancer.learning.inputs import HistoryInputs
from rebalancer.learning.outputs import build_output
from rebalancer.learning.scoring import (
    GroupProfile,
    ScoreRow,
    batch_candidates,
    latency_at,
    score_group,
    session_candidates,
    startup_cost_s,
)


def facts(name: str, cluster: str = "k", members: int = 4) -> GroupFacts:
    return GroupFacts(
        cluster=cluster,
        namespace="shop",
        name=name,
        group_id=name,
        members=members,
        partitions=12,
        rollouts_per_day=1.0,
        departures_per_day=0.0,
        processing_ms=500.0,
        latency_p50_ms=100.0,
        latency_p90_ms=200.0,
        join_samples=100,
        rebalance_samples=10,
        departure_samples=0,
    )


def startup(delay: float, batch: int, cost: float, per_day: float | None = None) -> ScoreRow:
    return ScoreRow("startup", delay, batch, 0.0, cost, cost if per_day is None else per_day)


def test_the_cluster_delay_minimises_the_sum_over_its_groups() -> None:
    # Alone, a prefers 0 ms and b prefers 5000 ms; b's start-ups happen more often.
    a = GroupScores(
        facts("a"),
        (startup(0, 4, 1.0), startup(3000, 4, 3.0), startup(5000, 4, 5.0)),
    )
    b = GroupScores(
        facts("b"),
        (startup(0, 4, 9.0, 90.0), startup(3000, 4, 4.0, 40.0), startup(5000, 4, 2.0, 20.0)),
    )
    clusters, choices = choose([a, b])
    assert clusters[0].delay_ms == 5000
    assert clusters[0].curve == ((0, 91.0), (3000, 43.0), (5000, 25.0))
    assert {c.facts.name: c.delay_ms for c in choices} == {"a": 5000, "b": 5000}
    assert choices[0].default_cost_per_day_s == 3.0


def test_a_streams_groups_delay_is_chosen_from_its_own_start_ups() -> None:
    # Classic a and b share the broker's delay; streams group s prefers 8000 ms alone and
    # starts up so often that, counted with them, it would pull the cluster's delay up.
    a = GroupScores(facts("a"), (startup(0, 4, 1.0), startup(3000, 4, 3.0), startup(8000, 4, 8.0)))
    b = GroupScores(facts("b"), (startup(0, 4, 2.0), startup(3000, 4, 4.0), startup(8000, 4, 9.0)))
    streams = replace(facts("s"), protocol="streams", current_delay_ms=3000.0)
    s = GroupScores(
        streams,
        (startup(0, 4, 9.0, 900.0), startup(3000, 4, 6.0, 600.0), startup(8000, 4, 1.0, 100.0)),
    )
    clusters, choices = choose([a, b, s])
    by_name = {choice.facts.name: choice for choice in choices}
    # The cluster's curve and delay are the classic groups' alone.
    assert clusters[0].delay_ms == 0
    assert clusters[0].curve == ((0, 3.0), (3000, 7.0), (8000, 17.0))
    assert (clusters[0].groups, clusters[0].own_delay_groups) == (2, 1)
    assert clusters[0].current_delay_ms is None
    assert (by_name["a"].delay_ms, by_name["a"].delay_scope) == (0, "cluster")
    assert (by_name["s"].delay_ms, by_name["s"].delay_scope) == (8000, "group")
    assert by_name["s"].notes[0] == OWN_DELAY_NOTE
    # Its cost and gain are its own delay's against the default 3000 ms.
    assert (by_name["s"].cost_per_day_s, by_name["s"].default_cost_per_day_s) == (100.0, 600.0)
    # The same classic groups alone choose exactly as before.
    alone, _ = choose([a, b])
    assert (alone[0].delay_ms, alone[0].curve, alone[0].notes) == (
        clusters[0].delay_ms,
        clusters[0].curve,
        clusters[0].notes,
    )


def test_a_cluster_of_streams_groups_alone_chooses_no_broker_delay() -> None:
    s = GroupScores(
        replace(facts("s"), protocol="streams"), (startup(0, 4, 5.0), startup(3000, 4, 2.0))
    )
    clusters, choices = choose([s])
    assert clusters[0].delay_ms is None and clusters[0].notes == (ONLY_OWN_DELAYS_NOTE,)
    assert (choices[0].delay_ms, choices[0].delay_scope) == (3000, "group")


def test_a_smaller_batch_must_beat_the_whole_group_by_more_than_noise() -> None:
    group = GroupScores(facts("a"), (startup(0, 4, 10.0), startup(0, 2, 9.8), startup(0, 1, 5.0)))
    assert group.best_startup(0).batch_size == 1  # type: ignore[union-attr]
    close = GroupScores(facts("a"), (startup(0, 4, 10.0), startup(0, 2, 9.8)))
    assert close.best_startup(0).batch_size == 4  # type: ignore[union-attr]


def test_groups_without_start_up_history_keep_no_delay() -> None:
    group = GroupScores(facts("a"), (ScoreRow("departure", 0, 0, 10000.0, 1.0, 1.0),))
    clusters, choices = choose([group])
    assert clusters[0].delay_ms is None
    assert choices[0].session_timeout_ms == 10000.0
    assert any("start-up" in note for note in choices[0].notes)


def test_candidate_grids() -> None:
    assert batch_candidates(12) == (12, 6, 4, 3)
    assert batch_candidates(1) == (1,)
    assert session_candidates(3000.0)[0] == 10000.0
    assert session_candidates(5000.0)[0] == 15000.0
    assert latency_at((), 0.5) == 0.0
    assert latency_at((5.0,), 0.9) == 5.0


def test_a_wide_start_up_spread_costs_more_and_scoring_is_deterministic() -> None:
    tight = GroupProfile("k", "shop", "a", "a", 4, 12, tuple(100.0 + i for i in range(21)))
    wide = GroupProfile("k", "shop", "b", "b", 4, 12, tuple(500.0 * i for i in range(21)))
    assert startup_cost_s(tight, 3000.0, 4) < startup_cost_s(wide, 3000.0, 4)
    assert score_group(tight, delays_ms=(0.0, 3000.0)) == score_group(
        tight, delays_ms=(0.0, 3000.0)
    )
    # Tight joins never need the default's 3 s wait.
    rows = {r.delay_ms: r.cost_s for r in score_group(tight, delays_ms=(0.0, 3000.0))}
    assert rows[0.0] < rows[3000.0]


def test_start_ups_alone_recommend_no_batch_and_are_costed_as_planned() -> None:
    # A smaller start-up batch scores better on the simulator, but a cold start is planned per
    # change by the arrival plan: a learned cap would only split it. The delay is chosen on
    # start-ups of the whole group, as the operator releases them.
    group = GroupScores(
        facts("a"),
        (startup(0, 4, 10.0), startup(0, 2, 5.0), startup(3000, 4, 8.0), startup(3000, 2, 1.0)),
    )
    clusters, choices = choose([group])
    assert choices[0].batch_size is None
    assert START_UPS_NOTE in choices[0].notes
    assert clusters[0].delay_ms == 3000
    assert choices[0].startup_cost_s == 8.0


def test_the_summary_and_report_say_a_streams_groups_delay_is_per_group() -> None:
    a = GroupScores(facts("a"), (startup(0, 4, 1.0), startup(3000, 4, 3.0)))
    s = GroupScores(
        replace(facts("s"), protocol="streams", current_delay_ms=10000.0),
        (startup(0, 4, 5.0), startup(3000, 4, 2.0)),
    )
    clusters, choices = choose([a, s])
    inputs = HistoryInputs(root="h", base="h", protocol="file", files=(), rows=0, size_bytes=0)
    output = build_output("r1", "h", inputs, clusters, choices, [], [])
    groups = output.summary["groups"]
    assert (groups["shop/s"]["delayScope"], groups["shop/s"]["protocol"]) == ("group", "streams")
    assert groups["shop/s"]["initialRebalanceDelayMs"] == 3000
    assert (groups["shop/a"]["delayScope"], groups["shop/a"]["protocol"]) == ("cluster", None)
    assert output.summary["clusters"]["k"]["ownDelayGroups"] == 1
    assert output.recommendations.column("delay_scope").to_pylist() == ["cluster", "group"]
    report = output.report_md
    section = report[report.index("## Initial delay per streams group") :]
    assert "per group" in section
    assert "spec.policy.groupConfigs.streams.initialRebalanceDelayMs" in section
    assert "| shop/s | k | 10,000 | 3,000 |" in section
    # Without streams groups the report has no such section.
    classic_only = build_output("r2", "h", inputs, *choose([a]), [], [])
    assert "streams group" not in classic_only.report_md
