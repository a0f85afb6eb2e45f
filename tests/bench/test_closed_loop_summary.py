"""bench/closed_loop_summary.py: the before/after table, the ratios and the verdict, on plain
result lines (no lab)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import closed_loop_summary as summary  # noqa: E402


def line(
    phase: str, scenario: str, rebalances: int, stable: float, unowned: float, loop: str = "l1"
) -> dict[str, Any]:
    return {
        "loop": loop,
        "phase": phase,
        "scenario": scenario,
        "measured": {
            "rebalances": rebalances,
            "time_to_stable_s": stable,
            "unowned_ps": unowned,
        },
    }


def row(rows: list[summary.Comparison], scenario: str, figure: str) -> summary.Comparison:
    return next(r for r in rows if r.scenario == scenario and r.figure == figure)


def test_medians_spreads_and_ratios_per_scenario_and_figure() -> None:
    lines = [
        line("before", "rolling-update", 4, 30.0, 200.0),
        line("before", "rolling-update", 6, 40.0, 300.0),
        line("before", "rolling-update", 5, 35.0, 250.0),
        line("after", "rolling-update", 2, 20.0, 100.0),
        line("after", "rolling-update", 2, 24.0, 140.0),
        line("after", "rolling-update", 3, 22.0, 120.0),
    ]
    rows = summary.compare(lines)
    assert len(rows) == len(summary.SCENARIOS) * len(summary.FIGURES)
    stable = row(rows, "rolling-update", "time_to_stable_s")
    assert stable.before is not None and stable.after is not None
    assert (stable.before.median, stable.before.low, stable.before.high) == (35.0, 30.0, 40.0)
    assert (stable.after.median, stable.after.low, stable.after.high) == (22.0, 20.0, 24.0)
    assert stable.ratio == pytest.approx(22.0 / 35.0)
    assert stable.verdict == "better"
    assert stable.change == "-13.0 (-37 %)"
    rebalances = row(rows, "rolling-update", "rebalances")
    assert rebalances.ratio == pytest.approx(0.4)
    assert rebalances.verdict == "better"
    # No cold start in these lines: nothing to compare, no verdict.
    cold = row(rows, "cold-start", "rebalances")
    assert cold.before is None and cold.ratio is None and cold.verdict == "-"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (1.0, 1.0, "same"),
        (0.0, 0.0, "same"),
        (1.0, 2.0, "worse"),  # a whole rebalance more
        (2.0, 1.0, "better"),
    ],
)
def test_rebalance_verdicts_move_by_whole_rebalances(
    before: float, after: float, expected: str
) -> None:
    lines = [
        line("before", "cold-start", int(before), 10.0, 100.0),
        line("after", "cold-start", int(after), 10.0, 100.0),
    ]
    assert row(summary.compare(lines), "cold-start", "rebalances").verdict == expected


def test_small_moves_of_times_and_partition_seconds_are_the_same() -> None:
    lines = [
        line("before", "cold-start", 1, 12.0, 600.0),
        line("after", "cold-start", 1, 12.8, 640.0),  # +7 %: within 10 %
    ]
    rows = summary.compare(lines)
    assert row(rows, "cold-start", "time_to_stable_s").verdict == "same"
    assert row(rows, "cold-start", "unowned_ps").verdict == "same"
    lines[1] = line("after", "cold-start", 1, 14.0, 700.0)  # +17 %
    rows = summary.compare(lines)
    assert row(rows, "cold-start", "time_to_stable_s").verdict == "worse"
    assert row(rows, "cold-start", "unowned_ps").verdict == "worse"


def test_a_ratio_from_zero() -> None:
    lines = [line("before", "cold-start", 0, 10.0, 0.0), line("after", "cold-start", 2, 10.0, 50.0)]
    rows = summary.compare(lines)
    assert row(rows, "cold-start", "rebalances").ratio == float("inf")
    assert row(rows, "cold-start", "unowned_ps").verdict == "worse"
    assert "inf" in summary.table(rows)


def test_the_verdict_names_what_lost_and_by_how_much() -> None:
    lines = [
        line("before", "cold-start", 1, 12.0, 600.0),
        line("after", "cold-start", 1, 18.0, 900.0),
        line("before", "rolling-update", 6, 40.0, 300.0),
        line("after", "rolling-update", 2, 20.0, 100.0),
    ]
    result = summary.verdict(summary.compare(lines))
    assert not result.wins
    text = result.text()
    assert text.startswith("the learned settings LOSE on Kafka")
    assert "cold-start time to Stable (s) +6.0 (+50 %) (1.50x)" in text
    assert "better on rolling-update rebalances" in text


def test_the_learned_settings_win_only_when_nothing_is_worse() -> None:
    lines = [
        line("before", "cold-start", 1, 12.0, 600.0),
        line("after", "cold-start", 1, 12.0, 600.0),
        line("before", "rolling-update", 6, 40.0, 300.0),
        line("after", "rolling-update", 2, 20.0, 100.0),
    ]
    result = summary.verdict(summary.compare(lines))
    assert result.wins
    assert result.text().startswith("the learned settings WIN on Kafka")
    same = [line("before", "cold-start", 1, 12.0, 600.0), line("after", "cold-start", 1, 12, 600)]
    assert summary.verdict(summary.compare(same)).text().startswith("no difference")


def test_the_table_has_a_line_per_scenario_and_figure() -> None:
    lines = [
        line("before", "cold-start", 1, 12.0, 600.0),
        line("before", "cold-start", 2, 14.0, 650.0),
        line("after", "cold-start", 1, 11.0, 500.0),
    ]
    text = summary.table(summary.compare(lines))
    rows = text.splitlines()
    assert rows[0].startswith("scenario")
    assert len(rows) == 2 + len(summary.SCENARIOS) * len(summary.FIGURES)
    cold = next(r for r in rows if r.startswith("cold-start") and "time to Stable" in r)
    assert "13.0 [12.0-14.0] (n=2)" in cold
    assert "11.0 (n=1)" in cold
    assert "0.85x" in cold


def test_loops_in_order_and_the_newest_chosen(tmp_path: Path) -> None:
    lines = [line("before", "cold-start", 1, 1, 1, "a"), line("before", "cold-start", 1, 1, 1, "b")]
    assert summary.loops([*lines, lines[0]]) == ["a", "b"]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(f"{json.dumps(item)}\n" for item in lines))
    assert summary.main([str(path)]) == 0


def test_the_models_replay_is_compared_the_same_way() -> None:
    lines = [
        {**line("before", "cold-start", 1, 12.0, 600.0), "simulated": {"rebalances": 2}},
        {**line("after", "cold-start", 1, 12.0, 600.0), "simulated": {"rebalances": 1}},
    ]
    rows = summary.compare(lines, "simulated")
    assert row(rows, "cold-start", "rebalances").verdict == "better"
    assert row(rows, "cold-start", "unowned_ps").before is None
    assert "The coordinator model's replay" in summary.report(lines)


def test_what_a_policy_change_changed() -> None:
    before = {"rollout": {"enabled": True}, "learning": {"mode": "off"}}
    after = {"rollout": {"enabled": True, "maxBatchSize": 6}, "learning": {"mode": "auto"}}
    assert summary.changed(before, after) == [
        "learning.mode: off -> auto",
        "rollout.maxBatchSize: None -> 6",
    ]


def test_rebalances_are_new_generations_after_t0() -> None:
    reports = [
        (1.0, "assigned", 7),
        (2.0, "heartbeat", 7),
        (10.0, "revoked", 8),
        (10.5, "assigned", 8),
        (12.0, "assigned", 9),
        (30.0, "assigned", 10),  # after the end
    ]
    assert summary.rebalances_in(reports, 5.0, 20.0) == 2
    assert summary.rebalances_in(reports, 0.0, 20.0) == 3  # a cold start: every generation


def test_a_group_that_starts_again_at_generation_one_still_counts() -> None:
    # The group went Empty and the broker dropped it: its next life counts from 1 again, far
    # below the highest generation of the one before.
    reports = [
        (1.0, "assigned", 73),
        (2.0, "revoked", 73),
        (10.0, "assigned", 1),
        (20.0, "revoked", 1),
        (22.0, "assigned", 2),
        (23.0, "assigned", 3),
    ]
    assert summary.rebalances_in(reports, 5.0, 15.0) == 1
    assert summary.rebalances_in(reports, 15.0, 30.0) == 2


def test_a_recommendation_that_changed_nothing_neither_wins_nor_loses() -> None:
    lines = [
        line("before", "rolling-update", 10, 34.1, 39.0),
        line("after", "rolling-update", 9, 37.1, 22.0),
    ]
    policy = {"rollout": {"enabled": True}, "learning": {"mode": "off"}}
    lines[1]["recommendation"] = {
        "applied": {
            "policy_before": policy,
            "policy_after": {**policy, "learning": {"mode": "auto"}},
        }
    }
    assert summary.policy_changes(lines) == []
    result = summary.verdict(summary.compare(lines), applied=False)
    assert not result.wins
    assert result.text().startswith("nothing applied")
    assert "rolling-update unowned partition-s -17" in result.text()
    assert "nothing applied" in summary.report(lines)
    lines[1]["recommendation"]["applied"]["policy_after"] = {
        "rollout": {"enabled": True, "maxBatchSize": 6},
        "learning": {"mode": "auto"},
    }
    assert summary.policy_changes(lines) == ["rollout.maxBatchSize: None -> 6"]
    assert "WIN" in summary.report(lines)
