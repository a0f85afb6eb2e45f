"""The one interruptible wait: a wake-up, a stop or the time ends it, and `settle` holds a
wake-up back."""

from __future__ import annotations

import asyncio
import time

from tests.stopping import Stopped

from rebalancer.sleeping import sleep_or_wake


async def timed(sleeping: asyncio.Future[None] | asyncio.Task[None]) -> float:
    started = time.monotonic()
    await asyncio.wait_for(sleeping, 5)
    return time.monotonic() - started


async def test_the_time_ends_it_when_nothing_else_does() -> None:
    taken = await timed(asyncio.ensure_future(sleep_or_wake(0.2, asyncio.Event().wait, Stopped())))
    assert 0.15 < taken < 1.0


async def test_a_wake_up_ends_it_at_once() -> None:
    wakeup = asyncio.Event()
    sleeping = asyncio.ensure_future(sleep_or_wake(60, wakeup.wait, Stopped()))
    await asyncio.sleep(0.05)
    wakeup.set()
    assert await timed(sleeping) < 1.0


async def test_a_stop_ends_it_at_once_settling_or_not() -> None:
    for settle in (0.0, 30.0):
        stopped = Stopped()
        sleeping = asyncio.ensure_future(
            sleep_or_wake(60, asyncio.Event().wait, stopped, settle=settle)
        )
        await asyncio.sleep(0.05)
        stopped.event.set()
        assert await timed(sleeping) < 1.0


async def test_settle_holds_a_wake_up_back_until_it_is_over() -> None:
    wakeup = asyncio.Event()
    wakeup.set()
    started = time.monotonic()
    await sleep_or_wake(60, wakeup.wait, Stopped(), settle=0.3)
    assert 0.25 < time.monotonic() - started < 2.0


async def test_settle_longer_than_the_sleep_is_the_sleep() -> None:
    started = time.monotonic()
    await sleep_or_wake(0.1, asyncio.Event().wait, Stopped(), settle=30)
    assert time.monotonic() - started < 1.0


async def test_a_condition_wakes_it_without_a_stopper() -> None:
    changed = asyncio.Condition()

    async def notify() -> None:
        await asyncio.sleep(0.05)
        async with changed:
            changed.notify_all()

    notifying = asyncio.ensure_future(notify())
    async with changed:
        started = time.monotonic()
        await sleep_or_wake(60, changed.wait)
        assert time.monotonic() - started < 1.0
    await notifying
    async with changed:
        started = time.monotonic()
        await sleep_or_wake(0.1, changed.wait)
        assert 0.05 < time.monotonic() - started < 1.0
