"""A pre-warmed fork server for the lab's Python containers.

On a cluster every pod has CPU of its own, so one pod's interpreter start and imports cost the
same however many pods start with it. On the lab's one machine a dozen pods starting together
share a couple of cores, and the imports (confluent_kafka, aiohttp, the kubernetes client) of
each `python -m rebalancer...` container took seconds, more the more pods started at once. The
fork server is one process that has imported those modules already; for each container it
forks a child that becomes the container: its own session, its environment, argv, working
directory, stdout and stderr into the container's log, then the module run as `python -m`
runs it. The kubelet gets the child's pid (SIGTERM, SIGKILL of its process group work as for
any container) and its exit code, which the server reaps and reports.

Only `python -m <module>` commands whose module is under one of the given prefixes, with the
interpreter the server runs and the same PYTHON* environment, are forked; anything else is
started the ordinary way.

Protocol, one JSON object per line. Kubelet -> server: {"id", "module", "args", "env", "cwd",
"log"}. Server -> kubelet: {"id", "pid"} or {"id", "error"}, and {"exit": pid, "code": n} when
a child exits (n as Popen's returncode: negative for "killed by signal").
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import logging
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

# What the lab's own containers import: the gate, the sidecar and the example consumer.
# "module:attribute" also resolves the attribute: the kubernetes client imports its API
# classes (and their models) only when first touched, about a second of CPU each time.
DEFAULT_PRELOAD = (
    "rebalancer.cli",
    "rebalancer.commands.gate",
    "rebalancer.gate.waiting",
    "rebalancer.clients.kubernetes_api",
    "kubernetes.client:Configuration",
    "kubernetes.client:ApiClient",
    "kubernetes.client:CoreV1Api",
    "kubernetes.client:AppsV1Api",
    "kubernetes.client:CustomObjectsApi",
    "rebalancer_lab.consumer",
    "aiohttp",
    "confluent_kafka",
)
# The operator's package (the gate, the sidecar) and the lab's (the example consumer): a
# prefix is matched whole, so "rebalancer" alone leaves every rebalancer_lab consumer to pay
# its own interpreter and imports on the shared cores.
DEFAULT_PREFIXES = ("rebalancer", "rebalancer_lab")
# Environment that changes how an interpreter starts; a container asking for other values than
# the server's gets an interpreter of its own.
_NEUTRAL = frozenset({"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})
_SERVE = "import sys; from rebalancer_lab.kubelet.forking import main; main(sys.argv[1:])"


class ForkedChild:
    """A forked container process, with the part of Popen's interface the kubelet uses."""

    def __init__(self, server: ForkServer) -> None:
        self._server = server
        self.server: subprocess.Popen[bytes] | None = None  # the process that forked it
        self.pid = 0
        self.returncode: int | None = None
        self._exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set()


@dataclass
class _Spawn:
    child: ForkedChild
    done: threading.Event
    # The server process asked: a restarted server's children are not the old one's.
    server: subprocess.Popen[bytes]
    error: str | None = None


class ForkServer:
    """The kubelet's side: starts the server on first use and turns requests into children."""

    def __init__(
        self,
        python: str,
        log_path: Path,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        prefixes: Sequence[str] = DEFAULT_PREFIXES,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.python = python
        self.log_path = log_path
        self.preload = tuple(preload)
        self.prefixes = tuple(prefixes)
        self.env = dict(os.environ if env is None else env)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._next = 0
        self._spawns: dict[int, _Spawn] = {}
        self._children: dict[int, ForkedChild] = {}
        self._stopped = False

    def module_of(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        """The module this command runs if the server can start it, else None."""
        if len(argv) < 3 or argv[0] != self.python or argv[1] != "-m":
            return None
        module = argv[2]
        if not any(module == p or module.startswith(p + ".") for p in self.prefixes):
            return None
        keys = {k for k in (*env, *self.env) if k.startswith("PYTHON") and k not in _NEUTRAL}
        if any(env.get(key) != self.env.get(key) for key in keys):
            return None
        return module

    def start(self) -> None:
        """Start the server now rather than at the first container: its imports take seconds
        of CPU, which the first pods started through it would otherwise wait for."""
        with self._lock:
            self._ensure()

    def spawn(
        self, module: str, args: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path
    ) -> ForkedChild:
        """A running child for the command; OSError if the server cannot start it."""
        request = {
            "module": module,
            "args": list(args),
            "env": dict(env),
            "cwd": str(cwd),
            "log": str(log),
        }
        with self._lock:
            process = self._ensure()
            self._next += 1
            ident = self._next
            pending = _Spawn(ForkedChild(self), threading.Event(), process)
            self._spawns[ident] = pending
            line = json.dumps({"id": ident, **request}).encode() + b"\n"
            try:
                assert process.stdin is not None
                process.stdin.write(line)
                process.stdin.flush()
            except OSError:
                self._spawns.pop(ident, None)
                raise
        if not pending.done.wait(30):
            with self._lock:
                self._spawns.pop(ident, None)
            raise OSError("the fork server did not answer within 30 s")
        if pending.error is not None:
            raise OSError(pending.error)
        return pending.child

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._stopped:
            raise OSError("the fork server is stopped")
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            # Not `-m`: the package would import this module once more as __main__.
            [self.python, "-c", _SERVE, *self.preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**self.env, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
            close_fds=True,
        )
        threading.Thread(
            target=self._read, args=(self._process,), name="fork-server", daemon=True
        ).start()
        return self._process

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            with self._lock:
                if "exit" in message:
                    child = self._children.pop(int(message["exit"]), None)
                    if child is not None:
                        child.finish(int(message["code"]))
                    continue
                pending = self._spawns.pop(int(message.get("id", 0)), None)
                if pending is None:
                    continue
                if "pid" in message:
                    pending.child.pid = int(message["pid"])
                    pending.child.server = process
                    self._children[pending.child.pid] = pending.child
                else:
                    pending.error = str(message.get("error"))
            pending.done.set()
        process.wait()
        # The server is gone: its children have lost their reaper, so they go too, as the
        # processes of a crashed container runtime would.
        with self._lock:
            orphans = {p: c for p, c in self._children.items() if c.server is process}
            spawns = {i: s for i, s in self._spawns.items() if s.server is process}
            for pid in orphans:
                del self._children[pid]
            for ident in spawns:
                del self._spawns[ident]
        if orphans and not self._stopped:
            logger.warning("the fork server exited; killing its %d container(s)", len(orphans))
        for child in orphans.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.finish(-signal.SIGKILL)
        for pending in spawns.values():
            pending.error = "the fork server exited"
            pending.done.set()

    def stop(self) -> None:
        """Stop the server (its children are the kubelet's to stop first)."""
        with self._lock:
            self._stopped = True
            process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None


# -- the server process ---------------------------------------------------------------------


class _Become(Exception):
    """Raised in a freshly forked child to leave the server's loop and become the container."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        super().__init__()
        self.request = request


def _send(message: Mapping[str, Any]) -> None:
    data = json.dumps(message).encode() + b"\n"
    while data:
        data = data[os.write(1, data) :]


def serve(preload: Sequence[str]) -> int:
    for name in preload:
        module, _, attribute = name.partition(":")
        try:
            loaded = importlib.import_module(module)
            if attribute:
                getattr(loaded, attribute)
        except Exception as error:  # a module missing here is imported by its child instead
            print(f"fork server: cannot preload {name}: {error}", file=sys.stderr, flush=True)
    # Objects that exist now are never collected, so the children's reads of them do not
    # touch (and copy) the pages they share with the server.
    gc.freeze()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    buffer = b""
    try:
        while True:
            ready, _, _ = select.select([0, wake_read], [], [], 1.0)
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
            if 0 in ready:
                chunk = os.read(0, 65536)
                if not chunk:
                    return 0  # the kubelet is gone
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    _fork(json.loads(line), (wake_read, wake_write))
            _reap()
    finally:
        signal.set_wakeup_fd(-1)


def _fork(request: Mapping[str, Any], server_fds: tuple[int, int]) -> None:
    try:
        pid = os.fork()
    except OSError as error:
        _send({"id": request["id"], "error": f"fork failed: {error}"})
        return
    if pid == 0:
        for fd in server_fds:
            os.close(fd)
        raise _Become(request)
    _send({"id": request["id"], "pid": pid})


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _become(request: Mapping[str, Any]) -> str:
    """Turn this forked child into the container; returns the module to run."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    log = Path(str(request["log"]))
    log.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.closerange(3, 65536)
    # As PYTHONUNBUFFERED=1 gives a fresh interpreter: every write reaches the log at once.
    stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdin = stdin
    setattr(sys, "__stdin__", stdin)  # noqa: B010 (typed Final)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(
            io.FileIO(fd, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
            write_through=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    cwd = str(request["cwd"])
    os.chdir(cwd)
    if sys.path:
        sys.path[0] = cwd  # what `python -m` puts first
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        # Read from the environment when the module was imported, in the server.
        location = os.environ.get("KUBECONFIG", "~/.kube/config")
        kube_config.KUBE_CONFIG_DEFAULT_LOCATION = location  # type: ignore[attr-defined]
    module = str(request["module"])
    sys.argv = [module, *[str(arg) for arg in request["args"]]]
    return module


def main(preload: Sequence[str]) -> None:
    becoming: _Become | None = None
    try:
        code = serve(preload)
    except _Become as child:
        becoming = child
    if becoming is None:
        raise SystemExit(code)
    module = _become(becoming.request)
    del becoming
    # Outside any except block, so the container's own tracebacks read as in a fresh process.
    runpy.run_module(module, run_name="__main__", alter_sys=True)
