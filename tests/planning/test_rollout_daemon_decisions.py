"""What the rollout daemon writes after a step and when it looks again (planning.rollout_statuses
rollout_write and pace): decided from the two states and the step's actions."""

from __future__ import annotations

from rebalancer.planning.rollout_actions import ClearDegraded, Wait
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollout_statuses import pace, rollout_write
from rebalancer.structs.conditions import ConditionStatus, ConditionType

IDLE = RolloutState()
JOINING = RolloutState(phase=RolloutPhase.BATCH_JOINING, batch=1, sizes=(2, 2), rollout_id="r1")
OPENING = RolloutState(phase=RolloutPhase.BATCH_OPENING, batch=2, sizes=(2, 2), rollout_id="r1")
DONE = RolloutState(phase=RolloutPhase.COMPLETED, batch=2, sizes=(2, 2), rollout_id="r1")


def test_an_unchanged_rollout_is_not_written_again() -> None:
    first = rollout_write(IDLE, JOINING, (), None)
    assert first is not None
    assert rollout_write(JOINING, JOINING, (), first.rollout) is None


def test_a_cleared_failure_is_written_even_when_the_rollout_is_not_new() -> None:
    cleared = ClearDegraded("RolloutCleared", "the failed rollout was cleared: resumed")
    written = IDLE.to_status()
    write = rollout_write(IDLE, IDLE, (cleared,), written)
    assert write is not None
    [degraded] = [c for c in write.conditions if c.type is ConditionType.DEGRADED]
    assert (degraded.status, degraded.reason) == (ConditionStatus.FALSE, "RolloutCleared")


def test_a_completed_rollout_names_its_revision_and_turns_progressing_off() -> None:
    write = rollout_write(JOINING, DONE, (), None)
    assert write is not None
    assert write.rollout["completedRevision"] == "r1"
    [progressing] = write.conditions
    assert (progressing.status, progressing.reason) == (ConditionStatus.FALSE, "RolloutCompleted")


def test_a_new_active_phase_is_looked_at_at_once_but_not_twice_in_a_row() -> None:
    timings = {"active_poll": 1.0, "resting_poll": 30.0}
    first = pace(JOINING, OPENING, (), 100.0, followed_at_once=False, **timings)
    assert first.at_once and first.delay == 0.0 and not first.wake_observer
    second = pace(JOINING, OPENING, (), 100.0, followed_at_once=True, **timings)
    assert not second.at_once and second.delay == 1.0


def test_a_timer_shortens_the_wait_and_a_batch_out_wakes_the_observer() -> None:
    timings = {"active_poll": 1.0, "resting_poll": 30.0, "followed_at_once": False}
    soon = pace(JOINING, JOINING, (Wait(100.5),), 100.0, **timings)
    assert soon.delay == 0.5 and soon.wake_observer and not soon.at_once
    floor = pace(JOINING, JOINING, (Wait(99.0),), 100.0, **timings)
    assert floor.delay == 0.2
    resting = pace(IDLE, IDLE, (), 100.0, **timings)
    assert resting.delay == 30.0 and not resting.wake_observer
    ended = pace(JOINING, DONE, (), 100.0, **timings)
    assert ended.wake_observer and ended.delay == 30.0
