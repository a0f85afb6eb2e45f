"""The one interruptible wait every loop uses: sleep, but wake on an event or a stop.

Plain asyncio and nothing else, so that the operator's daemons and the in-pod sidecar (which
must not import kopf) share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Protocol


class Stopping(Protocol):
    """What kopf hands a daemon as `stopped`: true once it is to stop, and a wait that ends
    early then."""

    def __bool__(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> Awaitable[object]: ...


async def sleep_or_wake(
    seconds: float,
    woken: Callable[[], Awaitable[object]],
    stopped: Stopping | None = None,
    *,
    settle: float = 0.0,
) -> None:
    """Sleep `seconds`, but end early when `woken()` completes or `stopped` is set.

    `woken` is called once, at the moment a wake-up may end the sleep (an `Event.wait` or, with
    its lock held, a `Condition.wait`). `settle` is the least time slept before a wake-up counts:
    the observer takes it from the operator's spacing, because members report in bursts and one
    look at the group after the burst says all that a look per report would. A stop always ends
    the sleep, settling or not.
    """
    if stopped is None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken(), timeout=seconds)
        return
    deadline = time.monotonic() + seconds
    if settle > 0:
        await stopped.wait(min(settle, seconds))
        seconds = deadline - time.monotonic()
        if stopped or seconds <= 0:
            return
    waiting = {asyncio.ensure_future(stopped.wait(seconds)), asyncio.ensure_future(woken())}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waiting:
            task.cancel()
