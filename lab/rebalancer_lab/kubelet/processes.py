"""A container as a local process group, and the registry that lets no group outlive the lab.

A container ends when its first process does, and takes everything it started with it, as a
cgroup would: each container runs in its own session, gets SIGTERM on its leader, and its
whole group gets SIGKILL once the leader is gone or the grace period is over. Every group's
leader is recorded in a pid file, so a lab that was itself killed can reap its leftovers on
the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

from .forking import ForkServer

logger = logging.getLogger(__name__)


def exit_code(returncode: int) -> int:
    """Popen's -N for "killed by signal N" as a container runtime reports it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class _Leader(Protocol):
    """A container's first process: a Popen, or a child of the fork server."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, signum: int) -> None: ...


class ContainerProcess:
    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        registry: ProcessRegistry | None = None,
        on_exit: Callable[[], None] | None = None,
        forker: ForkServer | None = None,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.log_path = log_path
        self.registry = registry
        self.on_exit = on_exit
        self.forker = forker
        self.popen: _Leader | None = None
        self.forked = False
        self._log: IO[bytes] | None = None
        self._reaped = False

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        module = self.forker.module_of(self.argv, self.env) if self.forker else None
        if self.forker is not None and module is not None:
            self.log_path.touch()  # there from the start, as for a container started on its own
            try:
                self.popen = self.forker.spawn(
                    module, self.argv[3:], self.env, self.cwd, self.log_path
                )
                self.forked = True
            except OSError as error:
                logger.warning("fork server: %s; starting %s on its own", error, module)
        if self.popen is None:
            self._start_process()
        assert self.popen is not None
        if self.registry is not None:
            self.registry.add(self.popen.pid)
        if self.on_exit is not None:
            threading.Thread(
                target=self._await_exit, name=f"wait-{self.popen.pid}", daemon=True
            ).start()

    def _start_process(self) -> None:
        self._log = self.log_path.open("ab")
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            self._close_log()
            raise

    def _await_exit(self) -> None:
        # Tells the pod worker at once, so it need not poll every container.
        assert self.popen is not None and self.on_exit is not None
        with contextlib.suppress(Exception):
            self.popen.wait()
        self.on_exit()

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def poll(self) -> int | None:
        """The container's exit code once its leader has exited (the group is then killed)."""
        if self.popen is None:
            return None
        code = self.popen.poll()
        if code is None:
            return None
        self._reap()
        return exit_code(code)

    def terminate(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.popen is None or self._reaped:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self._reap()

    def _reap(self) -> None:
        if self.popen is None or self._reaped:
            return
        self._reaped = True
        # Whatever the leader left behind goes with it, as with a container's cgroup.
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        else:
            # The leader is gone, so the group had stragglers: SIGKILL is delivered
            # asynchronously, and "stopped" must mean stopped when this returns.
            _await_group_exit(self.popen.pid)
        if self.registry is not None:
            self.registry.remove(self.popen.pid)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class ProcessRegistry:
    """Pid files of running container groups under `<state>/kubelet/pids`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def add(self, pid: int) -> None:
        (self.directory / str(pid)).write_text(_start_time(pid) or "")

    def remove(self, pid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / str(pid)).unlink()

    def kill_recorded(self) -> int:
        """Kill every recorded group still running; returns how many."""
        reaped = 0
        for entry in self.directory.iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            recorded = entry.read_text().strip()
            # A pid is only ours if it still has the start time we recorded: pids get reused.
            if recorded and _start_time(pid) == recorded:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                    reaped += 1
            entry.unlink()
        return reaped


def _await_group_exit(pgid: int, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while _live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _live_members(pgid: int) -> list[int]:
    """Processes of a group that are not yet dead (zombies wait on their reaper, not us)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime), counted after the parenthesised command name, which may hold spaces.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None
