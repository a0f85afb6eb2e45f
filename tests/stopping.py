"""A stand-in for the `stopped` flag kopf hands a daemon, for tests that run a loop directly."""

from __future__ import annotations

import asyncio
import contextlib


class Stopped:
    """What kopf hands a daemon: false until it is to stop, and a wait that ends early then."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> None:  # noqa: ASYNC109  (kopf's own)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), timeout)
