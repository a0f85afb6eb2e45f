"""Degraded while the sidecars cannot join the group's protocol (planning/enforce_conditions)."""

from __future__ import annotations

from rebalancer.planning.enforce_conditions import enforcement_conditions
from rebalancer.structs.conditions import ConditionStatus, ConditionType


def test_an_unsupported_protocol_is_degraded_with_the_sidecars_words() -> None:
    message = "protocol type 'connect' (protocol 'sessioned') is not a consumer group's"
    (condition,) = enforcement_conditions({"lastStatus": "unsupported", "message": message})
    assert (condition.type, condition.status) == (ConditionType.DEGRADED, ConditionStatus.TRUE)
    assert condition.reason == "EnforceUnsupported"
    assert condition.message == message


def test_other_outcomes_say_nothing() -> None:
    for status in ("enforced", "failed", "in-progress", "skipped-in-progress"):
        assert enforcement_conditions({"lastStatus": status, "message": "x"}) == []
    assert enforcement_conditions(None) == []
    assert enforcement_conditions({}) == []
