"""bench/streams_timeline.py: a Streams fleet's change read from its instances' own events."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from streams_timeline import Incarnation, figures  # noqa: E402

TASKS = frozenset({"0_0", "0_1", "0_2", "0_3"})


def state(at: float, to: str, *active: str) -> dict[str, Any]:
    return {"event": "state", "at": at, "to": to, "active": list(active)}


def restored(at: float, records: int, seconds: float) -> dict[str, Any]:
    return {"event": "restored", "at": at, "records": records, "seconds": seconds}


def test_a_cold_start_counts_the_wait_for_the_first_owner_and_no_move() -> None:
    lives = [
        Incarnation("app-0", [state(12.0, "REBALANCING"), state(14.0, "RUNNING", "0_0", "0_1")]),
        Incarnation("app-1", [state(13.0, "REBALANCING"), state(16.0, "RUNNING", "0_2", "0_3")]),
    ]
    found = figures(lives, TASKS, 10.0, 30.0)
    assert found.stable_at == 16.0
    # Four tasks from 10 to 14, two more until 16.
    assert found.unowned_task_s == 4 * 4 + 2 * 2
    assert found.tasks_moved == 0


def test_a_task_that_runs_elsewhere_is_a_move_and_its_restore_is_counted() -> None:
    before = [state(1.0, "RUNNING", "0_0", "0_1"), state(20.0, "PENDING_SHUTDOWN")]
    lives = [
        Incarnation("app-0", before),
        Incarnation(
            "app-1",
            [
                state(1.0, "RUNNING", "0_2", "0_3"),
                state(21.0, "REBALANCING"),
                state(22.0, "RUNNING", "0_0", "0_2", "0_3"),
                restored(22.0, 500, 0.4),
            ],
        ),
        Incarnation("app-0", [state(25.0, "RUNNING", "0_1")]),
    ]
    found = figures(lives, TASKS, 19.0, 40.0)
    assert found.tasks_moved == 1  # 0_0 to app-1; 0_1 came back to its own pod's name
    assert found.stable_at == 25.0
    # 0_0 and 0_1 unowned 20-22, 0_1 until 25; REBALANCING keeps what app-1 ran.
    assert found.unowned_task_s == 2 * 2 + 3 * 1
    assert (found.restored_tasks, found.restored_records) == (1, 500)


def test_a_change_that_leaves_a_task_without_owner_has_no_stable_moment() -> None:
    lives = [Incarnation("app-0", [state(1.0, "RUNNING", "0_0", "0_1", "0_2")])]
    found = figures(lives, TASKS, 0.0, 10.0)
    assert found.stable_at is None
    assert found.unowned_task_s == 4 * 1 + 1 * 9
