"""The streams group model (KIP-1071): its initial delay, its sticky assignor and what a move
costs, against cases worked out by hand from Kafka 4.4's coordinator."""

from __future__ import annotations

import pytest

from rebalancer.simulation.streams_groups import run_streams_startup, sticky_targets


def test_the_sticky_assignor_keeps_tasks_with_their_owners_up_to_the_quota() -> None:
    """16 tasks. A second member: the quota is 8, the owner keeps 0..7 (partition order) and
    the newcomer takes the rest. A third: the quota is 6; the first keeps 0..5, which leaves
    10 tasks for 2 members (quota 5), so the second keeps 8..12 and the third takes the five
    left over: 8 + 5 tasks moved in all."""
    two = sticky_targets(16, ["a", "b"], {"a": set(range(16))})
    assert two == {"a": set(range(8)), "b": set(range(8, 16))}
    three = sticky_targets(16, ["a", "b", "c"], two)
    assert three == {"a": set(range(6)), "b": set(range(8, 13)), "c": {6, 7, 13, 14, 15}}


def test_the_sticky_assignor_spreads_unowned_tasks_evenly() -> None:
    targets = sticky_targets(7, ["a", "b", "c"], {})
    assert sorted(len(tasks) for tasks in targets.values()) == [2, 2, 3]
    assert set().union(*targets.values()) == set(range(7))


def test_without_a_delay_the_second_member_takes_tasks_from_the_first() -> None:
    """Joins at 0 and 2 s, 4 tasks, heartbeats every 5 s, 500 ms restoration. With no delay the
    first member gets all 4 at once; the second's join re-targets 2 of them to it; the first
    revokes them at its heartbeat at 5 s, the second takes them at its heartbeat at 7 s and
    processes them after restoring, at 7.5 s: 2 tasks each 2.5 s unprocessed."""
    run = run_streams_startup(
        joins_ms=[0.0, 2000.0], tasks=4, initial_delay_ms=0.0, heartbeat_ms=5000.0, restore_ms=500.0
    )
    assert run.tasks_moved == 2
    assert run.time_to_stable_s == pytest.approx(7.5)
    assert run.moved_unowned_task_s == pytest.approx(5.0)
    assert run.assignments == 2


def test_a_delay_that_covers_the_joins_moves_nothing() -> None:
    """The same joins with 3000 ms: one target for both at 3 s, each member takes its 2 tasks
    at its next heartbeat (5 s and 7 s); nothing moved, so nothing restored."""
    run = run_streams_startup(
        joins_ms=[0.0, 2000.0],
        tasks=4,
        initial_delay_ms=3000.0,
        heartbeat_ms=5000.0,
        restore_ms=500.0,
    )
    assert run.tasks_moved == 0
    assert run.moved_unowned_task_s == 0
    assert run.time_to_stable_s == pytest.approx(7.0)
    assert run.assignments == 1
    # Before their targets reached them no task was processed: 4 tasks for 5 s, 2 for 2 s more.
    assert run.unowned_task_s == pytest.approx(4 * 5.0 + 2 * 2.0)


def test_later_joins_do_not_restart_the_delay() -> None:
    """Kafka schedules a streams group's delay if absent, at the first join of the Empty group.
    Joins at 0, 2.5 and 4 s with 3000 ms: the target is computed at 3 s for two members and again
    at the third join (4 s, the assignment interval having passed); the third member takes its
    share at its join, the first at 5 s, the second at 7.5 s. A delay restarted by each join
    would have held every task until 7 s, and the first member's heartbeat at 10 s."""
    run = run_streams_startup(
        joins_ms=[0.0, 2500.0, 4000.0],
        tasks=6,
        initial_delay_ms=3000.0,
        heartbeat_ms=5000.0,
        restore_ms=300.0,
    )
    assert run.assignments == 2
    assert run.time_to_stable_s == pytest.approx(7.5)


def test_joins_within_the_assignment_interval_share_one_target() -> None:
    """No delay: the first join is assigned at once; the joins at 0.2 and 0.6 s wait for the
    assignment interval (1 s) and share the target computed then."""
    run = run_streams_startup(
        joins_ms=[0.0, 200.0, 600.0],
        tasks=6,
        initial_delay_ms=0.0,
        heartbeat_ms=5000.0,
        restore_ms=300.0,
    )
    assert run.assignments == 2
    # The first member had all 6 and keeps 2: 4 moved.
    assert run.tasks_moved == 4


def test_a_start_up_needs_a_join() -> None:
    with pytest.raises(ValueError, match="joins_ms"):
        run_streams_startup(
            joins_ms=[], tasks=4, initial_delay_ms=0.0, heartbeat_ms=5000.0, restore_ms=0.0
        )
