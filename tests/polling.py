"""The one way tests wait: ask a probe until it answers truly, or fail naming what did not happen.

Every suite's waiting helper is this loop with the suite's own defaults (how often to ask, which
exceptions mean "not yet"); none keeps a loop of its own. A timeout is an AssertionError, which a
test may catch to say more about what it saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
# What a probe raises while the thing it looks for is not there yet: an assertion inside it.
NOT_YET: tuple[type[BaseException], ...] = (AssertionError,)


def _failure(what: str, within: float, last: object, context: Callable[[], str] | None) -> str:
    told = f"\n{context()}" if context is not None else ""
    shown = f" (last: {last!r})" if last is not None else ""
    return f"{what}: not within {within:g} s{shown}{told}"


def eventually(
    probe: Callable[[], Any],
    what: str,
    within: float = 60.0,
    *,
    every: float = 0.2,
    not_yet: tuple[type[BaseException], ...] = NOT_YET,
    context: Callable[[], str] | None = None,
) -> Any:
    """`probe()`'s first true answer, asked every `every` seconds; the test fails after
    `within` seconds with `what`, the last false answer or error, and `context()` if given."""
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            value = probe()
        except not_yet as error:
            value, last = None, error
        if value:
            return value
        if value is not None and value is not False:
            last = value
        if time.monotonic() > deadline:
            raise AssertionError(_failure(what, within, last, context))
        time.sleep(every)


async def eventually_async(
    probe: Callable[[], Any],
    what: str,
    within: float = 60.0,
    *,
    every: float = 0.2,
    in_thread: bool = False,
    not_yet: tuple[type[BaseException], ...] = NOT_YET,
) -> Any:
    """`eventually` for a test on an event loop: waits without blocking it, and asks a probe
    that blocks (`in_thread`) off the loop."""
    deadline = time.monotonic() + within
    last: object = None
    while True:
        try:
            value = await asyncio.to_thread(probe) if in_thread else probe()
        except not_yet as error:
            value, last = None, error
        if value:
            return value
        if value is not None and value is not False:
            last = value
        if time.monotonic() > deadline:
            raise AssertionError(_failure(what, within, last, None))
        await asyncio.sleep(every)


def never(probe: Callable[[], Any], what: str, within: float, *, every: float = 0.5) -> None:
    """Fail as soon as `probe()` answers truly within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert not probe(), what
        time.sleep(every)
