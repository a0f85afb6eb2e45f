"""bench/scale_figures.py: who serves a group from its servedBy, the take-over times of a killed
replica's groups from list samples, RSS growth over a window and the targets, on plain samples
(no lab)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import scale_figures as figures  # noqa: E402

KILLED, LIVE_A, LIVE_B = 100, 200, 300


def test_served_by_names_the_replica_pid_or_nothing() -> None:
    assert figures.served_pid("node-1/4242 (shard 3 of 12)") == 4242
    assert figures.served_pid(None) is None
    assert figures.served_pid("") is None
    # A pod's name, not host/pid: no pid to compare with.
    assert figures.served_pid("rebalancer-6d8f7-x2k4q (shard 3 of 12)") is None
    assert figures.served_pid("node-1/4242") is None


def test_each_group_moves_at_the_first_sample_naming_a_live_replica() -> None:
    moving = {"a", "b", "c"}
    samples: list[figures.Owners] = [
        (0.8, {"a": KILLED, "b": KILLED, "c": KILLED}),
        (11.9, {"a": LIVE_A, "b": KILLED, "c": None}),
        (12.7, {"a": LIVE_A, "b": LIVE_B, "c": None}),
        (13.5, {"a": LIVE_B, "b": LIVE_B, "c": LIVE_A}),
    ]
    times = figures.takeover_times(moving, samples, {LIVE_A, LIVE_B})
    # "a" moving on again later does not count; "c" between owners (None) is not served.
    assert times == {"a": 11.9, "b": 12.7, "c": 13.5}


def test_samples_out_of_order_and_groups_that_never_move() -> None:
    moving = {"a", "b"}
    samples: list[figures.Owners] = [
        (5.0, {"a": LIVE_A, "b": KILLED}),
        (2.0, {"a": LIVE_A, "b": KILLED}),
    ]
    times = figures.takeover_times(moving, samples, {LIVE_A})
    assert times == {"a": 2.0}
    summary = figures.takeover_summary(times, moving)
    assert summary["groups"] == 2
    assert summary["moved"] == 1
    assert summary["not_moved"] == 1
    assert summary["not_moved_names"] == ["b"]
    assert summary["max_s"] == 2.0


def test_takeover_summary_percentiles() -> None:
    times = {f"g{i}": float(i) for i in range(1, 12)}
    summary = figures.takeover_summary(times, set(times))
    assert (summary["p50_s"], summary["max_s"], summary["not_moved"]) == (6.0, 11.0, 0)
    empty = figures.takeover_summary({}, {"x"})
    assert (empty["p50_s"], empty["max_s"], empty["not_moved"]) == (None, None, 1)


def test_rss_growth_over_the_second_half_of_a_window() -> None:
    samples = [{"t": float(t), "rss_mb": 100.0 + t} for t in range(10, 310, 10)]
    # Second half of [0, 300]: samples from 150 s to 300 s.
    assert figures.rss_growth(samples, 0.0, 300.0) == 150.0
    # Second half of [0, 100]: 50 s to 100 s; later samples are outside the window.
    assert figures.rss_growth(samples, 0.0, 100.0) == 50.0
    assert figures.rss_growth(samples[:1], 0.0, 20.0) is None


def result(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "groups": 10000,
        "interval_seconds": 30,
        "reconciled": 10000,
        "all_status_after_last_s": 95.0,
        "latency_s": {50: 20.0, 90: 40.0, 99: 59.0, "max": 70.0},
        "soak_requests_per_s": 6.0,
        "soak_kafka_requests_per_interval": 202.0,
        "rss_mb_largest_replica": 480.0,
        "soak_rss_growth_second_half_mb": 2.0,
    }
    return base | changes


def test_targets_scale_with_groups_and_interval() -> None:
    rows = {row["figure"]: row for row in figures.target_rows(result(), coordinators=1)}
    api = rows["soak API requests/s"]
    assert api["target"] == round(0.02 * 10000 / 30, 2)
    assert api["met"] is True
    kafka = rows["soak Kafka requests per interval"]
    assert (kafka["target"], kafka["met"]) == (201.0, False)
    assert all(row["met"] for name, row in rows.items() if "Kafka" not in name)
    # No kill: no take-over row.
    assert not any("killed" in name for name in rows)


def test_targets_not_met_and_a_missing_status() -> None:
    late = result(
        reconciled=9990,
        all_status_after_last_s=None,
        takeover_max_s=16.2,
        after_takeover={"requests_per_s": 7.0, "kafka_per_interval": 150.0},
    )
    rows = {row["figure"]: row for row in figures.target_rows(late, coordinators=3)}
    assert rows["ConsumerGroups with status"]["met"] is False
    assert "all with status after the last creation (s)" not in rows
    assert rows["killed replica's groups served again, max (s)"]["met"] is False
    assert rows["soak Kafka requests per interval"]["target"] == 203.0
    assert rows["after the take-over: API requests/s"]["met"] is False
    assert rows["after the take-over: Kafka requests per interval"]["met"] is True


def test_groups_are_dealt_round_robin_over_the_namespaces() -> None:
    assert {figures.namespace_of(i, 1) for i in range(5)} == {"default"}
    assert [figures.namespace_of(i, 3) for i in range(4)] == [
        "scale-000",
        "scale-001",
        "scale-002",
        "scale-000",
    ]
    assert len({figures.namespace_of(i, 100) for i in range(10_000)}) == 100


def test_one_percent_a_minute_changes_each_group_once_before_any_twice() -> None:
    # 10,000 groups, 1 % a minute for 3 minutes: 300 changes, one every 0.6 s.
    schedule = figures.churn_schedule(10_000, 1.0, 180)
    assert len(schedule) == 300
    assert schedule[1][0] - schedule[0][0] == 0.6
    assert schedule[-1][0] < 180
    assert len({index for _, index in schedule}) == 300
    # Fewer groups than changes: the second round starts after the first is complete.
    small = figures.churn_schedule(10, 50.0, 240)
    assert [index for _, index in small[:12]] == [*range(10), 0, 1]
    assert figures.churn_schedule(10, 0.0, 240) == []


def test_a_restart_is_seen_at_the_first_later_look_counting_more_rebalances() -> None:
    restarts: list[figures.Restart] = [(10.0, "a", 4), (20.0, "b", None), (30.0, "a", 6)]
    looks: list[figures.Counts] = [
        (9.0, {"a": 5, "b": None}),  # before the restart: not its effect
        (12.0, {"a": 4, "b": None}),
        (14.0, {"a": 6, "b": None}),
        (26.0, {"a": 6, "b": 1}),  # b had no count before: any is more
        (40.0, {"a": 6, "b": 1}),
    ]
    assert figures.restart_latencies(restarts, looks) == [4.0, 6.0, None]
    assert figures.restart_latencies([], looks) == []
