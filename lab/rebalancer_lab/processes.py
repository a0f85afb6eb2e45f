"""Child processes of the lab: started with a log file, stopped with SIGTERM then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


@dataclass
class ChildProcess:
    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.process = subprocess.Popen(
            list(self.argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,  # Ctrl-C in the lab's terminal must not kill children early
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, grace: float = 10.0) -> int | None:
        if self.process is None:
            return None
        self.terminate()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)


def stop_all(children: Sequence[ChildProcess], grace: float = 10.0) -> None:
    """SIGTERM every child at once, so stopping N of them takes one grace period, not N."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        child.stop(grace=max(0.1, deadline - time.monotonic()))


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
