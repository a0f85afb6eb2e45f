"""bench/streams_closed_loop.py: what the loop reads from status and the recommendation, and how
it states a cold start and the before/after rows (no lab)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import streams_closed_loop as loop  # noqa: E402
from closed_loop import learning_decided  # noqa: E402
from streams import Cell, Run, Setup  # noqa: E402
from streams_timeline import Figures  # noqa: E402

DELAY = "streams.initial.rebalance.delay.ms"


def status_with(value: str, source: str, state: str = "applied") -> dict[str, Any]:
    configs = {DELAY: {"value": value, "source": source}}
    return {"settings": {"perGroupConfigs": {"state": state, "configs": configs}}}


def policy_with(delay: Any) -> dict[str, Any]:
    return {"groupConfigs": {"streams": {"initialRebalanceDelayMs": delay}}}


def test_the_loop_policy_turns_the_streams_block_on_with_nothing_set_and_learning_off() -> None:
    body = {"spec": {"policy": {"protocol": "streams", "rollout": {"enabled": True}}}}
    policy = loop.loop_policy(body)["spec"]["policy"]
    assert policy["groupConfigs"] == {"streams": {}}
    assert policy["learning"] == {"mode": "off"}
    assert policy["rollout"] == {"enabled": True}


def test_the_read_back_is_the_delay_config_with_its_source_and_state() -> None:
    shown = loop.delay_read_back(status_with("1000", "group-config"))
    assert shown == {"value": "1000", "source": "group-config", "state": "applied"}
    assert loop.delay_read_back({}) is None
    other = {"settings": {"perGroupConfigs": {"state": "not-needed", "message": "none"}}}
    assert loop.delay_read_back(other) is None


def test_the_delay_is_in_force_only_when_spec_and_the_broker_agree_on_the_groups_own() -> None:
    assert loop.delay_in_force(policy_with(1000), status_with("1000", "group-config"), 1000)
    # the spec not yet patched, the broker's default still in force, or another value read back
    assert not loop.delay_in_force({}, status_with("1000", "group-config"), 1000)
    assert not loop.delay_in_force(policy_with(1000), status_with("3000", "default-config"), 1000)
    assert not loop.delay_in_force(policy_with(1000), status_with("1000", "default-config"), 1000)
    assert not loop.delay_in_force(policy_with(1000), status_with("3000", "group-config"), 1000)
    assert not loop.delay_in_force(policy_with(1000), status_with("1000", "x", "failed"), 1000)
    assert not loop.delay_in_force(policy_with(1000), {}, 1000)


def test_only_a_groups_own_delay_is_learned() -> None:
    assert loop.learned_delay({"delayScope": "group", "initialRebalanceDelayMs": 1500.0}) == 1500
    assert loop.learned_delay({"delayScope": "cluster", "initialRebalanceDelayMs": 1500.0}) is None
    assert loop.learned_delay({"delayScope": "group", "initialRebalanceDelayMs": None}) is None
    assert loop.learned_delay(None) is None


def test_why_unchanged_names_a_missing_or_default_delay_with_the_evidence() -> None:
    summary = {"messages": ["one group only"]}
    group = {
        "delayScope": "group",
        "initialRebalanceDelayMs": 3000.0,
        "evidence": {"joins": 7, "latencyP50Ms": 5100.0},
        "notes": ["not enough start-up history to choose a delay or batch size"],
    }
    assert loop.why_unchanged({**group, "initialRebalanceDelayMs": 1000.0}, summary, 3000) is None
    default = loop.why_unchanged(group, summary, 3000)
    assert default is not None
    assert "broker's default 3000 ms" in default
    assert "'joins': 7" in default
    none = loop.why_unchanged({**group, "initialRebalanceDelayMs": None}, summary, 3000)
    assert none is not None
    assert "no delay of the group's own" in none
    assert "not enough start-up history" in none
    missing = loop.why_unchanged(None, summary, 3000)
    assert missing is not None
    assert "nothing was recommended" in missing
    assert "one group only" in missing


def run(stable_at: float | None, epochs: int | None) -> Run:
    cell = Cell("streams", "cold-start", 4, 8, "0")
    found = Figures(stable_at, 42.5, 3, 2, 100, 0.5, 9)
    setup = Setup(False, True, 60000, True)
    return Run(cell, "managed", 2, setup, found, 100.0, None, epochs, 1, True, 30.0)


def test_a_cold_start_is_stated_under_the_closed_loop_names() -> None:
    measured = loop.measured_of(run(112.25, 2))
    assert measured["rebalances"] == 2
    assert measured["time_to_stable_s"] == 12.25
    assert measured["unowned_ps"] == 42.5
    assert measured["tasks_moved"] == 3
    assert measured["restored_tasks"] == 2
    assert loop.measured_of(run(None, None))["time_to_stable_s"] is None


def test_the_extra_rows_give_median_and_range_per_phase() -> None:
    lines = [
        {"phase": "before", "measured": {"tasks_moved": 1, "restored_tasks": 0}},
        {"phase": "before", "measured": {"tasks_moved": 5, "restored_tasks": None}},
        {"phase": "before", "measured": {"tasks_moved": 3, "restored_tasks": 0}},
        {"phase": "after", "measured": {"tasks_moved": 0, "restored_tasks": 0}},
    ]
    rows = loop.extra_rows(lines)
    assert rows[0] == "tasks moved: before 3 [1-5], after 0 [0-0]"
    assert rows[1] == "stores restored: before 0 [0-0], after 0 [0-0]"


def test_learning_is_decided_once_applied_or_told_why_not() -> None:
    assert learning_decided({}) is None
    assert learning_decided({"learning": {"reason": "LearningOff"}}) is None
    applied = {"learning": {"reason": "Applying", "lastAppliedTime": "2026-12-03T23:00:00Z"}}
    assert learning_decided(applied) == applied["learning"]
    nothing = {"learning": {"reason": "NothingToApply"}}
    assert learning_decided(nothing) == nothing["learning"]


def test_the_warm_ups_come_first_and_only_when_asked_for() -> None:
    assert loop.phases(1, 3) == [("warm-up", 1), ("before", 3), ("after", 3)]
    assert loop.phases(0, 2) == [("before", 2), ("after", 2)]
