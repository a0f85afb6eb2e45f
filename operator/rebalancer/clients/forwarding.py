"""Member reports passed on among sharded replicas (docs/sharding.md).

The Services send member reports to one replica (the holder of shard 0), but the group a
report is about may be served by any replica, and the observers read reports from their own
replica's hub. The replica that accepts a report keeps it and posts it, as it came, to every
other live replica (the address each one's member Lease gives), marked so that it goes no
further. A report lost on the way is sent again at the member's next interval.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from rebalancer.clients.receiving import FORWARDED_HEADER
from rebalancer.clients.sharding import ShardHolder

logger = logging.getLogger(__name__)
TIMEOUT_SECONDS = 5.0
# Passes in flight at once: beyond this a report is kept here only (a flood must not pile up
# tasks; members send again).
MAX_IN_FLIGHT = 1000


class ReportForwarder:
    def __init__(self, holder: ShardHolder) -> None:
        self.holder = holder
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._failing: set[str] = set()

    def pass_on(self, body: bytes, authorization: str | None) -> None:
        for url in self.holder.peer_urls():
            if len(self._tasks) >= MAX_IN_FLIGHT:
                return
            task = asyncio.ensure_future(self._post(url, body, authorization))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _post(self, url: str, body: bytes, authorization: str | None) -> None:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
            self._session = aiohttp.ClientSession(timeout=timeout)
        headers = {"Content-Type": "application/json", FORWARDED_HEADER: self.holder.identity}
        if authorization is not None:
            headers["Authorization"] = authorization
        try:
            async with self._session.post(f"{url}/v1/reports", data=body, headers=headers) as got:
                if got.status >= 300:
                    raise aiohttp.ClientError(f"answered {got.status}")
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if url not in self._failing:  # once per peer until it answers again
                logger.warning("could not pass a member report on to %s: %s", url, error)
            self._failing.add(url)
            return
        self._failing.discard(url)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._session is not None:
            await self._session.close()
            self._session = None
