"""bench/scale_compare.py: figures of several scale runs side by side, sorted by groups, with
the growth from the smallest to the largest and targets that scale with the groups."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import scale_compare as compare  # noqa: E402


def run(groups: int, requests_per_s: float, **more: Any) -> dict[str, Any]:
    return {
        "groups": groups,
        "replicas": 3,
        "created_in_s": groups / 10,
        "all_status_after_last_s": 90.0,
        "latency_s": {"50": 30.0, "99": 50.0},
        "requests_per_reconcile": 6.0,
        "interval_seconds": 30,
        "soak_requests_per_s": requests_per_s,
        "soak_kafka_requests_per_interval": 20.0,
        "rss_mb_largest_replica": 300.0,
        **more,
    }


def test_runs_are_sorted_by_groups_and_growth_is_largest_over_smallest() -> None:
    rows = {row["figure"]: row for row in compare.figure_rows([run(10_000, 6.0), run(1_000, 1.5)])}
    soak = rows["soak API requests/s"]
    assert soak["values"] == [1.5, 6.0]
    assert soak["growth"] == 4.0
    # 0.02 x groups / interval: the target grows with the groups.
    assert soak["targets"] == [0.02 * 1_000 / 30, 0.02 * 10_000 / 30]
    assert rows["creation to status p99 (s)"]["targets"] == [60.0, 60.0]


def test_a_figure_one_run_did_not_measure_has_no_growth() -> None:
    churned = run(10_000, 6.0, churn={"requests_per_s": 7.0, "api_requests_per_change": 4.0})
    rows = {row["figure"]: row for row in compare.figure_rows([run(1_000, 1.5), churned])}
    assert rows["churn: API requests/s"]["values"] == [None, 7.0]
    assert rows["churn: API requests/s"]["growth"] is None
    assert rows["killed replica's groups served again, max (s)"]["values"] == [None, None]
    table = compare.table([run(1_000, 1.5), churned])
    assert "| churn: API requests/s | - | 7 | - | - |" in table
