"""The moment a batch's gates let go: past the patches, past a just-started gate's warm-up."""

from __future__ import annotations

import pytest

from rebalancer.planning.rollout_actions import (
    GATE_WARMUP_SECONDS,
    RELEASE_LEAD_SECONDS,
    STARTED_AT_RESOLUTION_SECONDS,
    release_moment,
)
from rebalancer.structs.gates import GATE_OPEN_AT_MAX_WAIT_SECONDS


def test_gates_that_waited_long_go_one_lead_after_the_patches() -> None:
    assert release_moment(100.0, [10.0, 50.0, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_a_gate_that_only_just_started_gets_its_warm_up() -> None:
    # startedAt 100 (whole seconds): the gate started before 101, so it watches by 101 + warm-up.
    moment = release_moment(101.5, [10.0, 100.0])
    assert moment == pytest.approx(100.0 + STARTED_AT_RESOLUTION_SECONDS + GATE_WARMUP_SECONDS)


def test_a_gate_seen_running_now_started_no_later_than_now() -> None:
    # startedAt 100 could hide a start up to 101, but the gate was already running at 100.
    assert release_moment(100.0, [100.0]) == pytest.approx(100.0 + GATE_WARMUP_SECONDS)


def test_the_lead_is_shorter_than_a_gates_warm_up() -> None:
    # Patches go out concurrently and arrive within 0.1 s; a gate's start is the longer wait.
    assert RELEASE_LEAD_SECONDS < GATE_WARMUP_SECONDS
    assert release_moment(100.0, [50.0]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_unknown_start_times_leave_the_lead_alone() -> None:
    assert release_moment(100.0, [None, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_the_moment_stays_within_what_a_gate_honours() -> None:
    moment = release_moment(100.0, [130.0])  # a clock far ahead of the operator's
    assert moment - 100.0 < GATE_OPEN_AT_MAX_WAIT_SECONDS
