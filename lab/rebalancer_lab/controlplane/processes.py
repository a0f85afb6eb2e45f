"""The control plane's child processes: one log file each, stopped with SIGTERM, then SIGKILL.

They stay in the caller's process group (unlike the lab's other children): Ctrl-C in a terminal,
or a test runner killing its group, then takes the whole control plane with it instead of leaving
an etcd and an API server holding ports and memory on a shared machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO


class Child:
    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env)
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        if self._log is not None:
            self._log.close()  # a restart after the process exited on its own
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            # Ctrl-C in the lab's terminal must reach the lab alone: it stops the control plane
            # after the operator and the pods, which need the API server to stop promptly.
            start_new_session=True,
        )

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def exit_code(self) -> int | None:
        """None while it runs (or before it started)."""
        return None if self.process is None else self.process.poll()

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def reap(self, grace: float) -> None:
        """Wait up to `grace` seconds for it to exit after terminate(), then kill it."""
        if self.process is not None:
            try:
                self.process.wait(timeout=max(grace, 0.1))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def rss_bytes(self) -> int | None:
        """Resident memory now, from /proc (None when not running or not on Linux)."""
        if self.pid is None or self.exit_code is not None:
            return None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return None


def stop_all(children: Sequence[Child], grace: float) -> None:
    """SIGTERM them all at once and reap each: N children take one grace period, not N."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        child.reap(deadline - time.monotonic())
