"""The moment a batch's gates let go: past the patches, past a just-started gate's warm-up."""

from __future__ import annotations

import pytest

from rebalancer.planning.rollout_actions import (
    GATE_WARMUP_SECONDS,
    RELEASE_LEAD_SECONDS,
    release_moment,
)
from rebalancer.structs.gates import GATE_OPEN_AT_MAX_WAIT_SECONDS


def test_gates_that_waited_long_go_one_lead_after_the_patches() -> None:
    assert release_moment(100.0, [10.0, 50.0, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_a_gate_that_only_just_started_gets_its_warm_up() -> None:
    assert release_moment(100.0, [10.0, 99.5]) == pytest.approx(99.5 + GATE_WARMUP_SECONDS)


def test_unknown_start_times_leave_the_lead_alone() -> None:
    assert release_moment(100.0, [None, None]) == pytest.approx(100.0 + RELEASE_LEAD_SECONDS)


def test_the_moment_stays_within_what_a_gate_honours() -> None:
    moment = release_moment(100.0, [130.0])  # a clock far ahead of the operator's
    assert moment - 100.0 < GATE_OPEN_AT_MAX_WAIT_SECONDS
