"""TCP proxies that can cut the connections through them: a network cut between one client and
the servers behind the proxies, every other client keeping its connections.

    with TcpCut("127.0.0.1", broker.side_routes()) as proxy:
        proxy.cut("refuse")  # every open connection dropped, new ones refused
        proxy.heal()  # new connections pass again

Each route listens on one port of `host` and forwards every connection to another port of the
same host, bytes both ways as they come. `cut(mode)` drops every open connection at once (a
reset to both ends) and, until `heal()`, meets a new connection with:

- "refuse": nothing listens, so the connection is refused, as from a port a firewall rejects;
- "blackhole": the connection is accepted and nothing is forwarded either way, as over a link
  that carries nothing: the client's requests go unanswered until its own timeouts give up.
  `heal()` drops these connections, as the client's timeouts would.

The proxies run on an event loop of their own, in a thread: callers need not be asynchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
import threading
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

MODES = ("refuse", "blackhole")
CHUNK = 65536
CALL_TIMEOUT_S = 30.0
T = TypeVar("T")


class TcpCut:
    """Proxies on `host`, one a route (listening port, port forwarded to)."""

    def __init__(self, host: str, routes: Sequence[tuple[int, int]]) -> None:
        if not routes:
            raise ValueError("routes: give at least one (listening port, target port)")
        self.host = host
        self.routes = list(routes)
        self.mode: str | None = None  # None: connections pass
        self.cuts = 0
        self.passed = 0  # connections forwarded so far
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-cut", daemon=True)
        self._servers: dict[int, asyncio.Server] = {}
        # Client side -> server side of each forwarded connection; connections held in a
        # blackhole have no server side.
        self._open: dict[asyncio.StreamWriter, asyncio.StreamWriter | None] = {}

    @property
    def addresses(self) -> str:
        """The proxies' host:port list, as a bootstrap.servers value."""
        return ",".join(f"{self.host}:{listen}" for listen, _ in self.routes)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # -- the caller's side ---------------------------------------------------------------------

    def start(self) -> TcpCut:
        self._thread.start()
        self._call(self._listen_all())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def cut(self, mode: str) -> int:
        """Drop every open connection and meet new ones as `mode` says until `heal()`; the
        number of connections dropped."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
        return self._call(self._cut(mode))

    def heal(self) -> None:
        self._call(self._heal())

    def __enter__(self) -> TcpCut:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(CALL_TIMEOUT_S)

    # -- on the proxies' loop ------------------------------------------------------------------

    async def _listen_all(self) -> None:
        for listen, target in self.routes:
            if listen not in self._servers:
                handler = functools.partial(self._accepted, target)
                self._servers[listen] = await asyncio.start_server(
                    handler, self.host, listen, reuse_address=True
                )

    def _close_servers(self) -> None:
        for server in self._servers.values():
            server.close()  # stops listening at once; the connections are dropped apart
        self._servers.clear()

    def _drop_all(self) -> int:
        dropped = len(self._open)
        for client, upstream in list(self._open.items()):
            _reset(client)
            if upstream is not None:
                _reset(upstream)
        self._open.clear()
        return dropped

    async def _cut(self, mode: str) -> int:
        self.mode = mode
        self.cuts += 1
        if mode == "refuse":
            self._close_servers()
        dropped = self._drop_all()
        logger.info("cut (%s): %d connections dropped", mode, dropped)
        return dropped

    async def _heal(self) -> None:
        self.mode = None
        held = self._drop_all()  # the blackhole's, which never reached a server
        await self._listen_all()
        logger.info("healed (%d connections held in a blackhole dropped)", held)

    async def _shutdown(self) -> None:
        self._close_servers()
        self._drop_all()
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accepted(
        self, target: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self.mode is not None:
            await self._met_by_cut(reader, writer)
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection(self.host, target)
        except OSError:
            _reset(writer)  # the server is down: the client sees its connection fail
            return
        if self.mode is not None:  # cut while connecting
            _reset(upstream)
            await self._met_by_cut(reader, writer)
            return
        self.passed += 1
        self._open[writer] = upstream
        try:
            await _first_done(_pump(reader, upstream), _pump(upstream_reader, writer))
        finally:
            if self._open.pop(writer, None) is not None:
                _reset(writer)
                _reset(upstream)

    async def _met_by_cut(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A connection accepted during a cut: held in a blackhole, else reset (one accepted
        in the moment before the proxy stopped listening)."""
        if self.mode != "blackhole":
            _reset(writer)
            return
        self._open[writer] = None
        try:
            with contextlib.suppress(ConnectionError):
                while await reader.read(CHUNK):
                    pass  # read and dropped
        finally:
            if writer in self._open:
                self._open.pop(writer)
                _reset(writer)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


async def _first_done(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Until one direction ends (the end of a Kafka connection ends both)."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a cut link's far end is told by a REJECT."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
