"""Components that exit are started again, as a kubelet restarts a cluster's static pods.

On a kubeadm cluster etcd, kube-apiserver, kube-controller-manager and kube-scheduler are static
pods: when one exits, the kubelet starts it again, at once the first time and then after a
back-off that doubles from 10 s to 5 minutes and is forgotten once the container has run for 10
minutes. Components count on it. kube-scheduler exits on purpose when its cache finds a pod
"updated on a different node than previously added to": after a watch gap (an API server
restart) the relist of a StatefulSet pod that was deleted and created again under the same name
reaches it as an update of the old, bound pod into the new, unbound one
(pkg/scheduler/backend/cache/cache.go calls klog.FlushAndExit). Without a supervisor the lab's
scheduler stayed down and no pod was scheduled again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rebalancer_lab.controlplane.processes import Child

Progress = Callable[[str], None]

FIRST_BACKOFF_S = 10.0
MAX_BACKOFF_S = 300.0
# A container that ran this long has its back-off forgotten (the kubelet's reset period).
BACKOFF_RESET_S = 600.0
LOOK_EVERY_S = 0.5


def backoff_after(exits: int) -> float:
    """Seconds before the restart that follows the `exits`-th exit in a row (1 = the first)."""
    if exits <= 1:
        return 0.0
    return min(FIRST_BACKOFF_S * 2.0 ** (exits - 2), MAX_BACKOFF_S)


@dataclass(frozen=True)
class Restart:
    """One component the supervisor started again."""

    name: str
    exit_code: int
    exited_at: float  # time.time()
    restarted_at: float


@dataclass
class _Record:
    exits: int = 0
    started_at: float = 0.0
    exited_at: float | None = None


class Supervisor:
    """Restarts components that exit while the control plane runs; `hold()` keeps it off a
    component that is being stopped on purpose."""

    def __init__(self, children: Sequence[Child], progress: Progress) -> None:
        self._children = list(children)
        self._progress = progress
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._records = {child.name: _Record(started_at=time.monotonic()) for child in children}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control-plane-supervisor")
        self._thread.daemon = True
        self.restarts: list[Restart] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            pass  # a restart in progress finishes before the caller stops the components
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def hold(self, name: str) -> _Held:
        return _Held(self, name)

    def _run(self) -> None:
        while not self._stopping.wait(LOOK_EVERY_S):
            for child in self._children:
                with self._lock:
                    if self._stopping.is_set():
                        return
                    if child.name not in self._held:
                        self._look(child, time.monotonic())

    def _look(self, child: Child, now: float) -> None:
        code = child.exit_code
        record = self._records[child.name]
        if code is None:
            record.exited_at = None
            return
        if record.exited_at is None:
            record.exited_at = now
            if now - record.started_at >= BACKOFF_RESET_S:
                record.exits = 0
            record.exits += 1
            wait = backoff_after(record.exits)
            self._progress(
                f"{child.name} exited with {code}; starting it again in {wait:.0f} s, as a "
                f"kubelet restarts a static pod. {child.log_path} ends with:\n"
                f"{child.log_tail(5)}"
            )
        if now - record.exited_at < backoff_after(record.exits):
            return
        exited_wall = time.time() - (now - record.exited_at)
        child.start()
        record.started_at = time.monotonic()
        record.exited_at = None
        self.restarts.append(Restart(child.name, code, exited_wall, time.time()))

    def _release(self, name: str) -> None:
        record = self._records.get(name)
        if record is not None:
            record.started_at = time.monotonic()
            record.exited_at = None
        self._held.discard(name)


class _Held:
    """`with supervisor.hold(name):` the component may exit and be started again by the
    caller; the supervisor looks away until the block ends."""

    def __init__(self, supervisor: Supervisor, name: str) -> None:
        self._supervisor = supervisor
        self._name = name

    def __enter__(self) -> None:
        with self._supervisor._lock:
            self._supervisor._held.add(self._name)

    def __exit__(self, *_: object) -> None:
        with self._supervisor._lock:
            self._supervisor._release(self._name)
