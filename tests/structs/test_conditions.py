from __future__ import annotations

from rebalancer.structs.conditions import (
    Condition,
    ConditionStatus,
    ConditionType,
    merge_conditions,
)

READY_TRUE = Condition(ConditionType.READY, ConditionStatus.TRUE, "GroupStable", "ok")
READY_FALSE = Condition(ConditionType.READY, ConditionStatus.FALSE, "Rebalancing", "busy")


def test_new_condition_gets_transition_time_and_generation() -> None:
    merged = merge_conditions([], [READY_TRUE], now="2026-01-01T00:00:00Z", generation=3)
    assert merged == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "GroupStable",
            "message": "ok",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 3,
        }
    ]


def test_unchanged_status_keeps_transition_time() -> None:
    first = merge_conditions([], [READY_TRUE], now="T1", generation=1)
    again = merge_conditions(first, [READY_TRUE], now="T2", generation=2)
    assert again[0]["lastTransitionTime"] == "T1"
    assert again[0]["observedGeneration"] == 2


def test_changed_status_moves_transition_time() -> None:
    first = merge_conditions([], [READY_TRUE], now="T1", generation=1)
    changed = merge_conditions(first, [READY_FALSE], now="T2", generation=1)
    assert changed[0]["lastTransitionTime"] == "T2"
    assert changed[0]["reason"] == "Rebalancing"


def test_other_conditions_are_kept_in_order() -> None:
    foreign = [{"type": "Custom", "status": "True"}]
    merged = merge_conditions(foreign, [READY_TRUE], now="T", generation=None)
    assert [c["type"] for c in merged] == ["Custom", "Ready"]
    assert "observedGeneration" not in merged[1]
