"""How soon a group is looked at again: often while it moves, at its interval after a change,
and up to quiet_factor times its interval once it has looked the same for a few looks."""

from __future__ import annotations

import itertools

import pytest

from rebalancer.planning.observe_cadence import (
    BUSY_RECHECK_SECONDS,
    PENDING_RECHECK_SECONDS,
    QUIET_LOOKS_BEFORE_STRETCH,
    QUIET_MAX_SECONDS,
    Cadence,
    Look,
    next_delay,
    on_grid,
)

QUIET = Look(changed=False, busy=False, pending=False)


def delays(interval: float, looks: list[Look], factor: float) -> list[float]:
    cadence = Cadence()
    found = []
    for look in looks:
        delay, cadence = next_delay(interval, look, cadence, quiet_factor=factor)
        found.append(delay)
    return found


def test_a_quiet_group_stretches_after_a_few_looks_and_a_change_resets_it() -> None:
    looks = [QUIET] * 5 + [Look(changed=True, busy=False, pending=False), QUIET]
    stretched = [30.0] * (QUIET_LOOKS_BEFORE_STRETCH - 1) + [120.0] * (
        6 - QUIET_LOOKS_BEFORE_STRETCH
    )
    assert delays(30, looks, factor=4) == [*stretched, 30.0, 30.0]


def test_factor_one_keeps_every_group_at_its_interval() -> None:
    assert delays(10, [QUIET] * 10, factor=1) == [10.0] * 10


def test_moving_groups_are_looked_at_often_and_pending_ones_sooner() -> None:
    busy = Look(changed=False, busy=True, pending=False)
    pending = Look(changed=False, busy=True, pending=True)
    assert delays(30, [QUIET] * 4 + [busy, pending, QUIET], factor=4) == [
        30.0,
        30.0,
        120.0,
        120.0,
        BUSY_RECHECK_SECONDS,
        PENDING_RECHECK_SECONDS,
        30.0,
    ]
    # Never later than the group's own interval.
    assert delays(1, [busy], factor=4) == [1.0]


def test_the_stretch_stops_below_the_stale_alert() -> None:
    assert delays(120, [QUIET] * 4, factor=10)[-1] == QUIET_MAX_SECONDS
    # A longer interval of the spec's own is kept.
    assert delays(900, [QUIET] * 4, factor=10)[-1] == 900.0


def test_a_factor_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="quiet_factor must be at least 1"):
        next_delay(10, QUIET, Cadence(), quiet_factor=0.5)


def test_groups_at_rest_of_one_interval_look_at_the_same_instants() -> None:
    # Three groups created a few seconds apart, each looking every 30 s from its own start.
    starts = [1_800_000_003.2, 1_800_000_011.9, 1_800_000_024.4]
    looks: list[list[float]] = []
    for start in starts:
        times, now = [], start
        for _ in range(4):
            now += on_grid(30.0, now, 30.0)
            times.append(now)
        looks.append(times)
    # Every look on the grid, so the groups share each instant where more than one looks (one
    # describe batch, not three), and each keeps its pace: 30 s apart.
    for times in looks:
        assert all(t % 30 == 0 for t in times)
        assert [b - a for a, b in itertools.pairwise(times)] == [30.0, 30.0, 30.0]
    assert set(looks[0]) & set(looks[1]) & set(looks[2]) == {
        1_800_000_060.0,
        1_800_000_090.0,
        1_800_000_120.0,
    }


def test_a_look_on_the_grid_is_never_sooner_than_half_its_delay() -> None:
    for phase in (0.0, 0.1, 14.9, 15.0, 15.1, 29.9):
        now = 1_800_000_000.0 + phase
        delay = on_grid(30.0, now, 30.0)
        assert 15.0 <= delay <= 45.0
        assert (now + delay) % 30 == pytest.approx(0, abs=1e-6)
    # A stretched quiet delay lands on the same grid, about as far away.
    now = 1_800_000_007.0
    assert (now + on_grid(120.0, now, 30.0)) % 30 == pytest.approx(0, abs=1e-6)
    assert 105.0 <= on_grid(120.0, now, 30.0) <= 135.0


def test_nothing_to_align_to_leaves_the_delay() -> None:
    assert on_grid(5.0, 1_800_000_000.3, 0.0) == 5.0
    assert on_grid(0.0, 1_800_000_000.3, 30.0) == 0.0
