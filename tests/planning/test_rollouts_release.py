"""The moment a batch's gates let go: past the patches, past a just-started gate's warm-up."""

from __future__ import annotations

import pytest

from rebalancer.planning.rollout_actions import (
    GATE_WARMUP_BASE_SECONDS,
    GATE_WARMUP_PER_GATE_SECONDS,
    RELEASE_LEAD_SECONDS,
    STARTED_AT_RESOLUTION_SECONDS,
    gate_warmup_s,
    release_moment,
)
from rebalancer.structs.gates import GATE_OPEN_AT_MAX_WAIT_SECONDS


def test_gates_that_waited_long_go_one_lead_after_the_patches() -> None:
    assert release_moment(100.0, [10.0, 50.0, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_a_gate_that_only_just_started_gets_its_warm_up() -> None:
    # startedAt 100 (whole seconds), seen at 101: it started by 101 and watches by 101 + warm-up.
    moment = release_moment(101.0, [10.0, 100.0])
    alone = GATE_WARMUP_BASE_SECONDS + GATE_WARMUP_PER_GATE_SECONDS
    assert moment == pytest.approx(100.0 + STARTED_AT_RESOLUTION_SECONDS + alone)


def test_a_gate_seen_running_now_started_no_later_than_now() -> None:
    # startedAt 100 could hide a start up to 101, but the gate was already running at 100.
    assert release_moment(100.0, [100.0]) == pytest.approx(100.0 + gate_warmup_s([100.0]))


def test_gates_started_together_get_a_longer_warm_up() -> None:
    # Measured on the lab: a gate alone watches within 0.25 s, 12 started together within 0.8 s.
    assert gate_warmup_s([100.0]) >= 0.25
    assert gate_warmup_s([100.0] * 12) >= 0.8
    assert gate_warmup_s([90.0] * 11 + [100.0]) == gate_warmup_s([100.0])
    assert release_moment(100.0, [99.0] * 12) > release_moment(100.0, [99.0])


def test_unknown_start_times_leave_the_lead_alone() -> None:
    assert release_moment(100.0, [None, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_the_moment_stays_within_what_a_gate_honours() -> None:
    moment = release_moment(100.0, [130.0])  # a clock far ahead of the operator's
    assert moment - 100.0 < GATE_OPEN_AT_MAX_WAIT_SECONDS
