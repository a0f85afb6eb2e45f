"""The sidecar's HTTP endpoint: POST /v1/enforce, GET /v1/enforce/{id}, /v1/group, /healthz,
/metrics. Everything under /v1 needs the bearer token from the mounted Secret.

Checks run cheapest first and each one stops the request: token (401), rate limit (429), body
(400), then the engine's own refusals (404 unknown group, 409 not a member, 503 Kafka down).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from pathlib import Path
from typing import Protocol

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from rebalancer.sidecar import metrics
from rebalancer.sidecar.agent import EnforceAnswer, EnforceRefused
from rebalancer.sidecar.limits import RateLimiter
from rebalancer.structs.enforcement import MAX_REASON, REQUEST_ID
from rebalancer.structs.errors import RebalancerError

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
MAX_WAIT_SECONDS = 120.0
DEFAULT_WAIT_SECONDS = 5.0


class Engine(Protocol):
    group_id: str

    async def submit(
        self,
        group_id: str,
        request_id: str,
        reason: str,
        retry_when_stable: bool,
        wait_seconds: float,
    ) -> EnforceAnswer: ...

    def lookup(self, request_id: str) -> EnforceAnswer | None: ...

    def health(self) -> tuple[bool, dict[str, object]]: ...

    def describe(self) -> dict[str, object]: ...


class TokenFile:
    """The bearer token, read again whenever the mounted Secret's file changes (rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token: bytes | None = None

    def current(self) -> bytes | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            self._stamp, self._token = None, None
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            try:
                token = self.path.read_bytes().strip()
            except OSError:
                return None
            self._stamp, self._token = stamp, token or None
        return self._token


class _Problem(RebalancerError):
    def __init__(self, status: int, answer: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.answer = answer
        self.message = message
        self.field = field


def _error(status: int, message: str, **extra: object) -> web.Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return web.json_response({"error": message, **extra}, status=status, headers=headers)


def _authorized(request: web.Request, tokens: TokenFile) -> bool:
    expected = tokens.current()
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if expected is None or scheme.lower() != "bearer":
        return False
    # Constant time: how much of a guess matched must not show in the answer's timing.
    return hmac.compare_digest(given.strip().encode(), expected)


def _parse(raw: bytes) -> tuple[str, str, str, bool, float]:
    try:
        body = json.loads(raw)
    # Deeply nested brackets exhaust json's recursion: answer 400 rather than 500.
    except (ValueError, RecursionError):
        raise _Problem(400, "invalid", "the body is not JSON") from None
    if not isinstance(body, dict):
        raise _Problem(400, "invalid", "the body must be a JSON object")
    group_id = body.get("groupId")
    if not isinstance(group_id, str) or not group_id:
        raise _Problem(400, "invalid", "groupId is required: the Kafka group.id", "groupId")
    request_id = body.get("requestId")
    if not isinstance(request_id, str) or REQUEST_ID.match(request_id) is None:
        raise _Problem(
            400,
            "invalid",
            "requestId is required: 1 to 128 letters, digits or ._:@/+=- (the same id is "
            "acted on once)",
            "requestId",
        )
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise _Problem(400, "invalid", f"reason must be a string of at most {MAX_REASON}", "reason")
    retry = body.get("retryWhenStable", False)
    if not isinstance(retry, bool):
        raise _Problem(400, "invalid", "retryWhenStable must be true or false", "retryWhenStable")
    wait = body.get("waitSeconds", DEFAULT_WAIT_SECONDS)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 120:
        raise _Problem(
            400,
            "invalid",
            f"waitSeconds must be a number from 0 to {MAX_WAIT_SECONDS:g}",
            "waitSeconds",
        )
    return group_id, request_id, reason, retry, float(wait)


def build_app(engine: Engine, tokens: TokenFile, limiter: RateLimiter) -> web.Application:
    async def enforce(request: web.Request) -> web.Response:
        if not _authorized(request, tokens):
            metrics.count_answer("unauthorized")
            return _error(401, "missing or wrong bearer token")
        retry_after = limiter.take()
        if retry_after > 0:
            metrics.count_answer("rate_limited")
            seconds = max(1, int(retry_after + 0.999))
            response = _error(429, f"too many enforcement requests; retry in {seconds} s")
            response.headers["Retry-After"] = str(seconds)
            return response
        try:
            raw = await request.read()
            group_id, request_id, reason, retry, wait = _parse(raw)
        except web.HTTPRequestEntityTooLarge:
            metrics.count_answer("invalid")
            return _error(413, f"the body is larger than {MAX_BODY} bytes")
        except _Problem as problem:
            metrics.count_answer(problem.answer)
            return _error(problem.status, problem.message, field=problem.field)
        try:
            answer = await engine.submit(group_id, request_id, reason, retry, wait)
        except EnforceRefused as refused:
            metrics.count_answer(refused.answer)
            return _error(refused.status, str(refused), groupId=engine.group_id)
        metrics.count_answer("duplicate" if answer.duplicate else "accepted")
        return web.json_response(answer.to_json(), status=200 if answer.final else 202)

    async def status(request: web.Request) -> web.Response:
        if not _authorized(request, tokens):
            metrics.count_answer("unauthorized")
            return _error(401, "missing or wrong bearer token")
        answer = engine.lookup(request.match_info["request_id"])
        if answer is None:
            return _error(404, "no such request in the control log")
        return web.json_response(answer.to_json())

    async def group(request: web.Request) -> web.Response:
        if not _authorized(request, tokens):
            metrics.count_answer("unauthorized")
            return _error(401, "missing or wrong bearer token")
        return web.json_response(engine.describe())

    async def healthz(_request: web.Request) -> web.Response:
        healthy, details = engine.health()
        return web.json_response(details, status=200 if healthy else 503)

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/v1/enforce", enforce)
    app.router.add_get("/v1/enforce/{request_id}", status)
    app.router.add_get("/v1/group", group)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", make_aiohttp_handler(metrics.REGISTRY))
    return app
