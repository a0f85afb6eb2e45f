"""Faults of a Kubernetes API server on the way to it: a reverse proxy in front of the real
kube-apiserver that answers chosen requests with an error status and cuts the watches passing
through it, the way a load balancer, an overloaded API server or a restart does to clients.

Clients that are to meet the faults are pointed at `FaultyApi.url` (plain HTTP on 127.0.0.1);
everything else is passed to the API server unchanged, streamed (watches included). The ERROR
events the API server sends down a watch (410 Gone for a resourceVersion etcd has compacted) are
noted on the way in `watch_errors`. A request that carries a bearer token (a ServiceAccount's) is
passed on with it and no client certificate, so the API server sees that identity; one without
is passed on as the admin, whose certificate the proxy presents.

    with FaultyApi(plane) as faulty:
        faulty.inject(status=503, method="GET", path_regex="/pods", times=3)
        faulty.drop_watches()
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import aiohttp
from aiohttp import web

from rebalancer_lab.controlplane import ControlPlane

# Headers that belong to one connection, not to the request (RFC 9110 7.6.1), and those the
# proxy sets again itself.
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}


@dataclass
class Fault:
    status: int
    method: str
    path_regex: str
    times: int
    message: str
    retry_after: int = 0
    text: str | None = None  # answered as plain text instead of a Status object

    def matches(self, method: str, path: str) -> bool:
        return (
            self.times > 0
            and method == self.method
            and re.search(self.path_regex, path) is not None
        )


class FaultyApi:
    """See the module docstring. Runs its own event loop on a thread of its own."""

    def __init__(self, plane: ControlPlane) -> None:
        self.upstream = plane.server
        self._ca, self._pki = str(plane.ca_file), plane.pki
        self._faults: list[Fault] = []
        # Each watch passing through: the client's connection and the API server's answer.
        self._watches: dict[int, tuple[asyncio.BaseTransport, aiohttp.ClientResponse]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="faulty-api", daemon=True
        )
        self._runner: web.AppRunner | None = None
        self._sessions: dict[bool, aiohttp.ClientSession] = {}
        self.port = 0
        # (method, path) of each request answered with a fault, in order.
        self.met: list[tuple[str, str, int]] = []
        # (path, code) of each ERROR event the API server sent down a watch passing through, in
        # order: how a watch that resumes from a compacted resourceVersion learns it (410 Gone
        # inside a 200 answer, which no status code shows).
        self.watch_errors: list[tuple[str, int]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- faults -------------------------------------------------------------------------------

    def inject(
        self,
        *,
        status: int,
        method: str,
        path_regex: str,
        times: int = 1,
        message: str = "",
        retry_after: int = 0,
        text: str | None = None,
    ) -> Fault:
        """The next `times` requests of `method` whose path matches get `status` instead (with
        `text` as a plain-text body, as a server still starting may answer, instead of a Status
        object)."""
        fault = Fault(status, method.upper(), path_regex, times, message, retry_after, text)
        with self._lock:
            self._faults.append(fault)
        return fault

    def active(self) -> list[Fault]:
        """Faults not yet met as often as they were injected."""
        with self._lock:
            return [fault for fault in self._faults if fault.times > 0]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def drop_watches(self) -> int:
        """Cut every watch passing through now; how many were cut."""
        return asyncio.run_coroutine_threadsafe(self._drop(), self._loop).result(10)

    async def _drop(self) -> int:
        watches = list(self._watches.values())
        self._watches.clear()
        for transport, upstream in watches:
            transport.close()
            upstream.close()
        return len(watches)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig of the proxy (no credentials: the proxy presents the admin's)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faulty", "cluster": {"server": self.url}}],
            "users": [{"name": "faulty", "user": {}}],
            "contexts": [
                {
                    "name": "faulty",
                    "context": {"cluster": "faulty", "user": "faulty", "namespace": namespace},
                }
            ],
            "current-context": "faulty",
        }
        path.write_text(json.dumps(config))
        return path

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> FaultyApi:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        for admin in (True, False):
            context = ssl.create_default_context(cafile=self._ca)
            if admin:
                context.load_cert_chain(str(self._pki / "admin.crt"), str(self._pki / "admin.key"))
            self._sessions[admin] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context, limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                auto_decompress=False,
            )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        await self._drop()
        if self._runner is not None:
            await self._runner.cleanup()
        for session in self._sessions.values():
            await session.close()

    # -- forwarding ---------------------------------------------------------------------------

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    self.met.append((method, path, fault.status))
                    return fault
        return None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        fault = self._take_fault(request.method, request.path)
        if fault is not None:
            return _status_response(fault)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        admin = "authorization" not in {k.lower() for k in headers}
        body = await request.read()
        # Passed on as it came: aiohttp would label a body without a Content-Type
        # application/octet-stream, which kube-apiserver refuses with 415 (the Kubernetes
        # client sends SelfSubjectAccessReviews without one, and kube-apiserver reads JSON).
        typed = "content-type" in {k.lower() for k in headers}
        upstream = await self._sessions[admin].request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
            skip_auto_headers=() if typed else ("Content-Type",),
        )
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value)
            await response.prepare(request)
            watch = request.query.get("watch") in ("1", "true")
            if watch and request.transport is not None:
                self._watches[id(response)] = (request.transport, upstream)
            events = _WatchErrors(request.path, self.watch_errors) if watch else None
            try:
                async for chunk in upstream.content.iter_any():
                    if events is not None:
                        events.feed(chunk)
                    await response.write(chunk)
            except (ConnectionResetError, aiohttp.ClientError, asyncio.CancelledError):
                return response
            finally:
                self._watches.pop(id(response), None)
            await response.write_eof()
            return response


class _WatchErrors:
    """Reads a watch stream's lines as they pass and records its ERROR events."""

    def __init__(self, path: str, into: list[tuple[str, int]]) -> None:
        self.path, self.into = path, into
        self.rest = b""

    def feed(self, chunk: bytes) -> None:
        *lines, self.rest = (self.rest + chunk).split(b"\n")
        for line in lines:
            if b'"ERROR"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == "ERROR":
                self.into.append((self.path, int((event.get("object") or {}).get("code") or 0)))


def _status_response(fault: Fault) -> web.Response:
    """The error as kube-apiserver writes one: a Status object (or the fault's plain text)."""
    if fault.text is not None:
        return web.Response(status=fault.status, text=fault.text)
    reasons = {
        403: "Forbidden",
        409: "Conflict",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
    }
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": fault.message or f"injected fault ({fault.status})",
        "reason": reasons.get(fault.status, "InternalError"),
        "code": fault.status,
    }
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
    return web.json_response(status, status=fault.status, headers=headers)
