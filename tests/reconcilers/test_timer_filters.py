"""The per-group kopf timers run only for groups that have something for them: kopf starts a
timer for a resource only while its `when` filter holds, and at a thousand groups the timers'
idle runs were what held the operator's event loop (BENCHMARKS.md, Scale)."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

import rebalancer.handlers.enforcing
import rebalancer.handlers.settings  # noqa: F401  (registers its handlers)

BARE = {"groupId": "orders", "policy": {"rollout": {"enabled": True}}}


def timer(handler_id: str) -> Any:
    found = [
        handler
        for handler in kopf.get_default_registry()._spawning.get_all_handlers()
        if handler.id == handler_id
    ]
    assert len(found) == 1, handler_id
    return found[0]


@pytest.mark.parametrize(
    ("handler_id", "asking"),
    [
        ("enforce", {"policy": {"enforce": {"scheduleSeconds": 600}}}),
        ("settings_followed", {"policy": {"settings": {"sessionTimeoutMs": 45000}}}),
    ],
)
def test_a_timer_runs_only_for_groups_that_ask_for_it(
    handler_id: str, asking: dict[str, Any]
) -> None:
    when = timer(handler_id).when
    assert when is not None, f"{handler_id} runs for every group"
    assert not when(spec=BARE, status={})
    assert when(spec={**BARE, **asking}, status={})


def test_the_settings_timer_runs_while_delivered_settings_are_to_be_taken_back() -> None:
    assert timer("settings_followed").when(spec=BARE, status={"settings": {"applied": True}})
