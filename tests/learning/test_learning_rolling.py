"""Batch sizes chosen on rolling updates too, by the planner's cost: partition-seconds without
an owner, the operator's defaults as the bar, ties to the fewest rebalances."""

from __future__ import annotations

import dataclasses

from rebalancer.learning.choosing import DEFAULTS_NOTE, GroupFacts, GroupScores, choose
from rebalancer.learning.jobs import rolling_updates_per_day
from rebalancer.learning.rolling_updates import (
    RollingGroup,
    default_batch,
    gap_samples,
    mean_update,
)
from rebalancer.learning.scoring import (
    QUANTILE_SHARES,
    DepartureProfile,
    GroupProfile,
    ScoreRow,
    _consumer,
    batch_candidates,
    score_group,
)

MEMBERS = 24


def facts(rolling_per_day: float = 5.0, startups_per_day: float = 1.0) -> GroupFacts:
    return GroupFacts(
        cluster="k",
        namespace="shop",
        name="orders",
        group_id="orders",
        members=MEMBERS,
        partitions=48,
        rollouts_per_day=rolling_per_day + startups_per_day,
        departures_per_day=rolling_per_day * MEMBERS,
        processing_ms=0.0,
        latency_p50_ms=7000.0,
        latency_p90_ms=9400.0,
        join_samples=100,
        rebalance_samples=10,
        departure_samples=120,
        rolling_updates_per_day=rolling_per_day,
    )


def startup(batch: int, unowned_s: float, rebalances: float) -> ScoreRow:
    return ScoreRow("startup", 3000.0, batch, 0.0, 10.0, 10.0, unowned_s, rebalances)


def rolling(batch: int, unowned_s: float, rebalances: float, per_day: float = 1.0) -> ScoreRow:
    cost = unowned_s
    return ScoreRow("rolling", 0.0, batch, 0.0, cost, cost * per_day, unowned_s, rebalances)


def chosen_batch(rows: tuple[ScoreRow, ...], group_facts: GroupFacts | None = None) -> int | None:
    _, choices = choose([GroupScores(group_facts or facts(), rows)])
    return choices[0].batch_size


STARTUPS = (startup(24, 12.0, 1), startup(12, 12.5, 3), startup(8, 13.0, 5), startup(6, 13.5, 7))


def test_a_batch_that_loses_partition_seconds_on_rolling_updates_is_not_chosen() -> None:
    # The whole group: fewest rebalances and the best start-up, but every owner gone at once
    # in each of five rolling updates a day.
    rows = (*STARTUPS, rolling(24, 9.0, 4), rolling(12, 4.0, 10), rolling(6, 4.2, 18))
    assert chosen_batch(rows) == 12


def test_a_cheaper_batch_wins_and_a_tie_goes_to_fewer_rebalances() -> None:
    cheaper = (*STARTUPS, rolling(24, 9.0, 4), rolling(12, 2.0, 10), rolling(6, 4.2, 18))
    assert chosen_batch(cheaper) == 12
    # 8 and 12 tie on partition-seconds (within 5 %): 12 rebalances less.
    tied = (*STARTUPS, rolling(12, 3.0, 10), rolling(8, 2.95, 14), rolling(6, 4.2, 18))
    assert chosen_batch(tied) == 12


def test_the_operators_defaults_win_a_tie_they_share() -> None:
    rows = (*STARTUPS, rolling(12, 4.2, 10), rolling(6, 4.2, 10))
    _, choices = choose([GroupScores(facts(), rows)])
    assert choices[0].batch_size is None
    assert DEFAULTS_NOTE in choices[0].notes


def test_the_batch_is_a_rolling_updates_and_leaves_start_ups_whole() -> None:
    # Start-ups split in two cost more on this group, however frequent: the batch learned from
    # rolling updates is applied to them only (rollout.updateBatchSize), so it is chosen on
    # them alone and the start-ups are costed as the arrival plan runs them, whole.
    rows = (
        *(startup(24, 10.0, 1), startup(12, 14.0, 3)),
        *(rolling(24, 9.0, 4), rolling(12, 5.0, 10), rolling(6, 8.0, 18)),
    )
    for startups_per_day in (1.0, 50.0):
        group_facts = facts(rolling_per_day=1.0, startups_per_day=startups_per_day)
        _, choices = choose([GroupScores(group_facts, rows)])
        assert choices[0].batch_size == 12
        assert choices[0].startup_cost_s == 10.0


def test_rolling_updates_are_counted_from_the_members_leaves() -> None:
    leaves = DepartureProfile("leave", per_day=120.0)
    crashes = DepartureProfile("crash", per_day=30.0)
    assert rolling_updates_per_day(6.0, (leaves, crashes), 24) == 5.0
    assert rolling_updates_per_day(2.0, (leaves,), 24) == 2.0  # no more than the rollouts
    assert rolling_updates_per_day(6.0, (crashes,), 24) == 0.0


def profile(assignor: str) -> GroupProfile:
    latencies = tuple(4000.0 + 6000.0 * share for share in QUANTILE_SHARES)
    return GroupProfile(
        "k", "shop", "orders", "orders", MEMBERS, 48, latencies, processing_ms=0.0,
        assignor=assignor, rollouts_per_day=6.0, rolling_updates_per_day=5.0,
    )  # fmt: skip


def test_on_the_model_a_whole_group_rolling_update_loses_the_most_partition_seconds() -> None:
    for assignor in ("cooperative-sticky", "round-robin"):
        group_profile = profile(assignor)
        group = RollingGroup(MEMBERS, 48, _consumer(group_profile))
        gaps = gap_samples(group_profile.latency_quantiles_ms, QUANTILE_SHARES, MEMBERS, 2, 0)
        whole = mean_update(group, MEMBERS, gaps)
        quarter = mean_update(group, default_batch(MEMBERS), gaps)
        assert whole.unowned_ps > 1.5 * quarter.unowned_ps, assignor
        assert whole.rebalances < quarter.rebalances, assignor


def test_the_scored_group_gets_rolling_rows_and_a_batch_no_costlier_than_the_defaults() -> None:
    group_profile = profile("cooperative-sticky")
    rows = score_group(group_profile, delays_ms=(3000.0,), samples=2)
    batches = {row.batch_size for row in rows if row.kind == "rolling"}
    assert batches == {*batch_candidates(MEMBERS), default_batch(MEMBERS)}
    group_facts = dataclasses.replace(facts(), rolling_updates_per_day=5.0)
    scores = GroupScores(group_facts, tuple(rows))
    choice = scores.best_batch(3000.0)
    assert choice is not None
    assert choice.batch_size != MEMBERS
    defaults = scores.rolling(default_batch(MEMBERS))
    assert defaults is not None
    assert choice.rolling.unowned_s <= defaults.unowned_s * 1.05
    without = score_group(dataclasses.replace(group_profile, rolling_updates_per_day=0.0),
                          delays_ms=(3000.0,), samples=2)  # fmt: skip
    assert not [row for row in without if row.kind == "rolling"]


def test_the_expected_gain_is_counted_as_the_batch_was_chosen() -> None:
    # The batch of 12 saves partition-seconds on rolling updates; start-ups are released whole
    # whatever it is. The gain that licenses applying it is the one it was chosen for.
    rows = (
        ScoreRow("startup", 3000.0, 24, 0.0, 20.0, 20.0, 12.0, 1),
        ScoreRow("startup", 3000.0, 12, 0.0, 45.0, 45.0, 12.0, 3),
        *(rolling(24, 9.0, 4, per_day=5), rolling(12, 2.7, 10, per_day=5)),
        rolling(6, 3.7, 15, per_day=5),
    )
    _, choices = choose([GroupScores(facts(), rows)])
    assert choices[0].batch_size == 12
    assert choices[0].improvement > 0.1
