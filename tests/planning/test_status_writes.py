"""A ConsumerGroup's status is PATCHed when something a user would see changed, and otherwise
only when its freshness stamp is --status-refresh-seconds old."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.planning.status_writes import (
    CHANGED,
    FORCED,
    REFRESH,
    lag_bucket,
    status_write_reason,
    visible_status,
)

REFRESH_S = 600.0


def fields(observed_at: str = "2026-12-02T06:00:00Z", **group: Any) -> dict[str, Any]:
    return {
        "observedGeneration": 3,
        "conditions": [{"type": "Ready", "status": "True", "reason": "GroupStable"}],
        "group": {"state": "Stable", "members": 3, "generation": 7, "observedAt": observed_at}
        | group,
    }


def reason(now: dict[str, Any], last: dict[str, Any] | None, age: float, forced: bool = False):  # type: ignore[no-untyped-def]
    return status_write_reason(
        visible_status(now),
        None if last is None else visible_status(last),
        forced=forced,
        last_written_at=1000.0,
        now=1000.0 + age,
        refresh_seconds=REFRESH_S,
    )


def test_only_the_freshness_stamp_moved_waits_for_the_refresh() -> None:
    last = fields()
    later = fields(observed_at="2026-12-02T06:00:30Z")
    assert reason(later, last, age=30) is None
    assert reason(later, last, age=REFRESH_S - 1) is None
    assert reason(later, last, age=REFRESH_S) == REFRESH


@pytest.mark.parametrize(
    "change",
    [
        {"state": "PreparingRebalance"},
        {"members": 2},
        {"generation": 8},
        {"rebalances": 1},
    ],
)
def test_a_visible_change_is_written_at_once(change: dict[str, Any]) -> None:
    assert reason(fields(**change), fields(), age=1) == CHANGED


def test_a_condition_change_is_written_at_once() -> None:
    now = fields()
    now["conditions"] = [{"type": "Ready", "status": "False", "reason": "GroupRebalancing"}]
    assert reason(now, fields(), age=1) == CHANGED


def test_lag_is_written_when_it_moves_to_another_half_decade() -> None:
    assert reason(fields(lag=1100), fields(lag=1000), age=1) is None
    assert reason(fields(lag=2900), fields(lag=1000), age=1) is None
    assert reason(fields(lag=3200), fields(lag=1000), age=1) == CHANGED
    assert reason(fields(lag=0), fields(lag=3), age=1) == CHANGED
    # Lag known and then not: a change.
    assert reason(fields(), fields(lag=5), age=1) == CHANGED


def test_the_first_write_and_a_forced_one_go_whatever_changed() -> None:
    assert reason(fields(), None, age=0) == CHANGED
    assert reason(fields(), fields(), age=0, forced=True) == FORCED


def test_lag_buckets() -> None:
    assert [lag_bucket(v) for v in (0, 1, 3, 4, 10, 31, 32, 1000)] == [0, 1, 1, 2, 3, 3, 4, 7]
    assert lag_bucket(None) is None and lag_bucket(-1) is None and lag_bucket(True) is None


def test_the_visible_status_keeps_the_written_fields_intact() -> None:
    written = fields(lag=1234)
    visible = visible_status(written)
    assert "observedAt" not in visible["group"] and visible["group"]["lagBucket"] == 7
    # The fields written are not changed by the comparison.
    assert written["group"]["lag"] == 1234 and "observedAt" in written["group"]
