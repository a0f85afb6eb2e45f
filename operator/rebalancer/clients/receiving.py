"""The operator's HTTP endpoint: member reports in, health out (docs/member-reports.md)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable

from aiohttp import web

from rebalancer.metrics import (
    metrics_handler,
    record_report_accepted,
    record_report_rejected,
    record_report_unclaimed,
)
from rebalancer.structs.reports import MemberReport, ReportBook, ReportInvalid, parse_report

logger = logging.getLogger(__name__)
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_GROUPS = 100_000
SIDECAR_SUFFIX = "-sidecar"
MAX_UNCLAIMED_LOGGED = 1000
# Set on a report one replica passes on to the others (sharding): they keep it and pass it
# on no further.
FORWARDED_HEADER = "X-Rebalancer-Forwarded"


class ReportHub:
    """Report books per Kafka group id, and a wake-up per group for the observers."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.books: dict[str, ReportBook] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        self.clock = clock
        self.accepted = 0
        self.rejected = 0
        self.sidecars: dict[tuple[str, str], MemberReport] = {}
        self._expected: dict[str, tuple[str, float]] = {}
        # Group ids reported but observed by nobody, each logged once: a pod whose
        # KAFKA_GROUP_ID does not match any ConsumerGroup's spec.groupId is a common slip.
        self.unclaimed: set[str] = set()
        # With sharding: passes an accepted report (its body, its Authorization header) on to
        # the other replicas, since the group may be served by any of them.
        self.forward: Callable[[bytes, str | None], None] | None = None

    def book(self, group_id: str) -> ReportBook:
        book = self.books.get(group_id)
        if book is None:
            book = self.books[group_id] = ReportBook()
        return book

    def wakeup(self, group_id: str) -> asyncio.Event:
        event = self._wakeups.get(group_id)
        if event is None:
            event = self._wakeups[group_id] = asyncio.Event()
        return event

    def add(self, report: MemberReport) -> None:
        if report.group_id not in self.books and len(self.books) >= MAX_GROUPS:
            raise ReportInvalid(())
        if report.host.endswith(SIDECAR_SUFFIX):
            # Sidecars are group members too, but not the application's: counting them would
            # double the member count and name them in every rebalance.
            self.sidecars[(report.group_id, report.host)] = report
            self.accepted += 1
            return
        self.book(report.group_id).add(report)
        self.accepted += 1
        if report.group_id in self._wakeups:
            self._wakeups[report.group_id].set()
            return
        # Kept anyway: the ConsumerGroup may just not be observed yet (operator start-up).
        record_report_unclaimed()
        if report.group_id not in self.unclaimed and len(self.unclaimed) < MAX_UNCLAIMED_LOGGED:
            self.unclaimed.add(report.group_id)
            logger.warning(
                "member reports for Kafka group %r, which no ConsumerGroup observes: kept for "
                "when one does; if none should, check the pod's KAFKA_GROUP_ID against the "
                "ConsumerGroup's spec.groupId",
                report.group_id[:200],
            )

    def expect_cause(self, group_id: str, cause: str, since: float) -> None:
        """The next generation of this group first seen after `since` was asked for."""
        self._expected[group_id] = (cause, since)

    def take_expected(self, group_id: str, first_seen: float) -> str | None:
        expected = self._expected.get(group_id)
        if expected is None or first_seen < expected[1]:
            return None
        del self._expected[group_id]
        return expected[0]

    def forget(self, group_id: str) -> None:
        self.books.pop(group_id, None)
        self.unclaimed.discard(group_id)
        self._wakeups.pop(group_id, None)


def _error(status: int, message: str, field: str | None = None) -> web.Response:
    body: dict[str, object] = {"error": message}
    if field is not None:
        body["field"] = field
    return web.json_response(body, status=status)


def build_app(hub: ReportHub, token: str | None) -> web.Application:
    async def receive(request: web.Request) -> web.Response:
        if token is not None:
            given = request.headers.get("Authorization", "")
            expected = f"Bearer {token}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                hub.rejected += 1
                record_report_rejected("unauthorized")
                return _error(401, "missing or wrong bearer token in the Authorization header")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            hub.rejected += 1
            record_report_rejected("too_large")
            return _error(413, f"report larger than {MAX_BODY_BYTES} bytes")
        data = await request.read()
        try:
            raw = json.loads(data)
        # 2000 nested brackets in a 4 kB body exhaust json's recursion: still just bad JSON.
        except (ValueError, UnicodeDecodeError, RecursionError):
            hub.rejected += 1
            record_report_rejected("not_json")
            return _error(400, "body is not JSON", "body")
        try:
            report = parse_report(raw, hub.clock())
            hub.add(report)
        except ReportInvalid as error:
            hub.rejected += 1
            record_report_rejected("invalid")
            first = error.problems[0] if error.problems else None
            return _error(400, error.summary(), first.path if first else None)
        record_report_accepted()
        if hub.forward is not None and FORWARDED_HEADER not in request.headers:
            hub.forward(data, request.headers.get("Authorization"))
        return web.json_response({"accepted": True}, status=202)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "reports": hub.accepted})

    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_post("/v1/reports", receive)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_handler())
    return app


class ReportServer:
    def __init__(self, hub: ReportHub, host: str, port: int, token: str | None) -> None:
        self.app = build_app(hub, token)
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        logger.info("member reports accepted at http://%s:%d/v1/reports", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
