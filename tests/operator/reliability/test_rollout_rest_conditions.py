"""The Progressing condition a rollout leaves behind when it comes to rest."""

from __future__ import annotations

from rebalancer.planning.rollout_states import RolloutKind, RolloutPhase, RolloutState
from rebalancer.planning.rollout_statuses import ended_conditions, rollout_conditions
from rebalancer.structs.conditions import ConditionStatus, ConditionType

SETTLING = RolloutState(
    phase=RolloutPhase.BATCH_SETTLING, kind=RolloutKind.ROLLING_UPDATE, batch=2, sizes=(1, 1)
)


def test_completing_turns_progressing_off_at_once() -> None:
    done = SETTLING.moved(phase=RolloutPhase.COMPLETED, message="2 batches, 2 members joined")
    # At rest the rollout imposes nothing: without this, the last "batch 2 of 2" stayed True.
    assert rollout_conditions(done) == []
    (found,) = ended_conditions(SETTLING, done)
    assert found.type is ConditionType.PROGRESSING
    assert found.status is ConditionStatus.FALSE
    assert found.reason == "RolloutCompleted"
    assert "rolling-update completed: 2 batches" in found.message


def test_only_the_step_that_comes_to_rest_says_so() -> None:
    done = SETTLING.moved(phase=RolloutPhase.COMPLETED)
    assert ended_conditions(done, done) == []
    assert ended_conditions(SETTLING, SETTLING) == []
    # Failed and Paused say so through their own conditions.
    assert ended_conditions(SETTLING, SETTLING.moved(phase=RolloutPhase.FAILED)) == []
    assert ended_conditions(SETTLING, SETTLING.moved(phase=RolloutPhase.PAUSED)) == []
    (idle,) = ended_conditions(SETTLING, SETTLING.moved(phase=RolloutPhase.IDLE))
    assert idle.reason == "RolloutIdle" and idle.status is ConditionStatus.FALSE
