"""The status blocks the pure decisions build are checked against the status model in every
test that calls them (tests/status_blocks.py), even where the test imported the decision by
name and nothing is written."""

from __future__ import annotations

import pytest

from rebalancer.planning.enforcement_writes import EnforceWrite
from rebalancer.planning.recommendations import (
    CurrentSettings,
    LearningAction,
    LearningDecision,
    render_learning_status,
)
from rebalancer.planning.rollout_statuses import RolloutWrite
from rebalancer.structs.status_patches import StatusCheck


def test_a_decision_imported_by_name_is_checked(status_writes: list[StatusCheck]) -> None:
    decision = LearningDecision(
        LearningAction.NONE, CurrentSettings(), "LearningOff", "learning is off"
    )
    render_learning_status(decision, None, None)
    RolloutWrite(rollout={"phase": "Idle"}, conditions=[])
    assert [check.fields for check in status_writes] == [
        {
            "learning": {
                "action": "none",
                "reason": "LearningOff",
                "message": "learning is off",
                "lastAppliedTime": None,
            }
        },
        {"rollout": {"phase": "Idle"}},
    ]


@pytest.mark.status_violations_expected
def test_a_block_with_an_undeclared_key_is_named(status_writes: list[StatusCheck]) -> None:
    EnforceWrite(enforcement={"lastStauts": "enforced"})
    EnforceWrite()  # leaves status.enforcement as it is: nothing to check
    (check,) = status_writes
    assert [violation.path for violation in check.violations] == ["status.enforcement.lastStauts"]
