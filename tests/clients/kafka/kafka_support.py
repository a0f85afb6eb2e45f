"""Helpers of the Kafka tests: consumer processes, a report collector, polling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests import polling

import rebalancer
from rebalancer_lab.ports import free_port

T = TypeVar("T")
SESSION_TIMEOUT_MS = 6000
OPERATOR_DIR = str(Path(rebalancer.__file__).resolve().parent.parent)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def eventually(probe: Callable[[], T | None], timeout: float, what: str, every: float = 0.1) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` and the last value."""
    value: T = polling.eventually(probe, what, timeout, every=every)
    return value


class ConsumerProcess:
    def __init__(self, name: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.process = process
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (a clean leave), SIGKILL if it does not exit in time; returns the code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"{self.name} ignored SIGTERM for {timeout:g} s:\n{self.output()}"
            ) from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Fleet:
    """Starts `python -m rebalancer_lab.consumer` processes; kills leftovers at teardown."""

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.members: list[ConsumerProcess] = []

    def start(self, name: str, group_id: str, topics: str, **env: str) -> ConsumerProcess:
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [OPERATOR_DIR, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "PYTHONUNBUFFERED": "1",
            "POD_NAME": name,
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "KAFKA_GROUP_ID": group_id,
            "KAFKA_TOPICS": topics,
            "KAFKA_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
            "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
            **env,
        }
        log = self.log_dir / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "rebalancer_lab.consumer"],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        member = ConsumerProcess(name, process, log)
        self.members.append(member)
        return member

    def kill_all(self) -> None:
        for member in self.members:
            member.kill()


class ReportCollector:
    """A tiny aiohttp endpoint in its own thread and loop, so any test (sync or async,
    any fixture scope) can use it. Keeps every accepted body in arrival order."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.bodies: list[dict[str, Any]] = []
        self.refused = 0
        self.port = free_port()
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop: Any = None
        self._thread = threading.Thread(target=self._serve, name="report-collector", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/reports"

    def _serve(self) -> None:
        import asyncio

        from aiohttp import web

        async def receive(request: web.Request) -> web.Response:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                self.refused += 1
                return web.json_response({"error": "bad token"}, status=401)
            body = json.loads(await request.read())
            with self._lock:
                self.bodies.append(body)
            return web.json_response({"accepted": True}, status=202)

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/reports", receive)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            stop = asyncio.Event()
            self._stop = (asyncio.get_running_loop(), stop)
            self._ready.set()
            await stop.wait()
            await runner.cleanup()

        asyncio.run(main())

    def start(self) -> ReportCollector:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the report collector did not start")
        return self

    def close(self) -> None:
        if self._stop is not None:
            loop, stop = self._stop
            loop.call_soon_threadsafe(stop.set)
        self._thread.join(5)

    def reports(self, host: str | None = None, event: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            bodies = list(self.bodies)
        return [
            body
            for body in bodies
            if (host is None or body["member"]["host"] == host)
            and (event is None or body["event"] == event)
        ]

    def latest(self, host: str) -> dict[str, Any] | None:
        mine = self.reports(host)
        return mine[-1] if mine else None


def partitions_of(report: dict[str, Any] | None) -> set[tuple[str, int]]:
    if report is None:
        return set()
    return {(entry["topic"], entry["partition"]) for entry in report["partitions"]}
