"""The pure decisions that build a block of the ConsumerGroup status, and where each block goes.

Most unit tests call these decisions without writing anything; `watch_status_builders` checks
every block they return against the status model, as clients/patching checks a write, so a
decision that returns a key the CRD does not declare fails the test that called it. A decision
that builds a new status block belongs in BUILDERS.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

from rebalancer.structs.status_patches import StatusCheck, check_status_patch

# (module, function, the block's path under status)
BUILDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("rebalancer.planning.statuses", "render_group", ("group",)),
    ("rebalancer.planning.streams_observing", "render_streams_group", ("group",)),
    ("rebalancer.planning.streams_observing", "streams_group_fields", ("group",)),
    ("rebalancer.planning.consumer_settings_plans", "settings_status", ("settings",)),
    ("rebalancer.planning.consumer_settings_plans", "sidecar_status", ("settings", "sidecar")),
    ("rebalancer.planning.broker_delay", "delay_status", ("settings", "brokerDelay")),
    (
        "rebalancer.planning.group_configs",
        "configs_status",
        ("settings", "perGroupConfigs", "configs"),
    ),
    ("rebalancer.planning.recommendations", "render_learning_status", ("learning",)),
    ("rebalancer.structs.conditions", "merge_conditions", ("conditions",)),
)
# (module, class, attribute holding the block, the block's path under status)
RECORDS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("rebalancer.planning.rollout_statuses", "RolloutWrite", "rollout", ("rollout",)),
    ("rebalancer.planning.enforcement_writes", "EnforceWrite", "enforcement", ("enforcement",)),
)


def _under(path: tuple[str, ...], block: object) -> dict[str, object]:
    for key in reversed(path[1:]):
        block = {key: block}
    return {path[0]: block}


def watch_status_builders(monkeypatch: pytest.MonkeyPatch, checks: list[StatusCheck]) -> None:
    """Check every block the BUILDERS return and the RECORDS hold while the test runs."""
    replacements: dict[int, object] = {}
    for module_name, function, path in BUILDERS:
        original = getattr(importlib.import_module(module_name), function)
        replacements[id(original)] = _checking(original, path, checks)
    _replace_everywhere(monkeypatch, replacements)
    for module_name, class_name, attribute, path in RECORDS:
        kind = getattr(importlib.import_module(module_name), class_name)
        monkeypatch.setattr(
            kind, "__init__", _checking_init(kind.__init__, attribute, path, checks)
        )


def _checking(
    original: Callable[..., Any], path: tuple[str, ...], checks: list[StatusCheck]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def checking(*args: Any, **kwargs: Any) -> Any:
        block = original(*args, **kwargs)
        checks.append(check_status_patch(_under(path, block)))
        return block

    return checking


def _checking_init(
    original: Callable[..., None], attribute: str, path: tuple[str, ...], checks: list[StatusCheck]
) -> Callable[..., None]:
    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        block = getattr(self, attribute)
        if block is not None:
            checks.append(check_status_patch(_under(path, block)))

    return init


def _replace_everywhere(monkeypatch: pytest.MonkeyPatch, replacements: dict[int, object]) -> None:
    """Where a module imported a builder by name, that name is replaced too."""
    for module, attribute, original in _places(len(sys.modules)):
        monkeypatch.setattr(module, attribute, replacements[id(original)])


@functools.cache
def _places(modules: int) -> tuple[tuple[object, str, object], ...]:
    """Each (module, name, builder) where a builder is bound; found again only when modules
    were imported since (`modules` is how many), as scanning them all per test costs."""
    builders = {
        id(getattr(importlib.import_module(module), function)): None
        for module, function, _ in BUILDERS
    }
    found = []
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("rebalancer", "tests", "test_")):
            continue
        for attribute, value in list(vars(module).items()):
            if id(value) in builders:
                found.append((module, attribute, value))
    return tuple(found)
