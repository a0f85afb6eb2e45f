"""The lab's kubelet: one node that runs every pod the API assigns to it, or to no node yet."""

from __future__ import annotations

import logging
import os
import threading
import time

from ..kube.informing import Change, Informer
from ..kube.recording import EventRecorder
from ..kube.requesting import Api
from .addresses import PodAddresses
from .forking import ForkServer
from .jitter import Jitter
from .pods import KubeletSettings, PodWorker
from .processes import ProcessRegistry
from .reaping import Reaper

logger = logging.getLogger(__name__)


class Kubelet:
    """Turns pod events from a shared informer into pod workers, one per pod uid."""

    def __init__(
        self,
        api: Api,
        pods: Informer,
        settings: KubeletSettings,
        jitter: Jitter | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.pods = pods
        self.settings = settings
        self.jitter = jitter or Jitter()
        self.registry = ProcessRegistry(settings.state_dir / "kubelet" / "pids")
        # REBALANCER_LAB_FORK_SERVER=0 starts every container as a process of its own, to
        # compare with or to rule the fork server out.
        forking = settings.fork_server and os.environ.get("REBALANCER_LAB_FORK_SERVER") != "0"
        self.forker = (
            ForkServer(settings.python, settings.state_dir / "logs" / "kubelet-fork-server.log")
            if forking
            else None
        )
        self.addresses = PodAddresses(settings.pod_network)
        self.workers: dict[str, PodWorker] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self.reaper = Reaper(api, settings.node_name, pods.items, self._running_uids)
        pods.add_handler(self._on_change)

    def start(self) -> None:
        leftovers = self.registry.kill_recorded()
        if leftovers:
            logger.warning("killed %d container process group(s) a killed lab left", leftovers)
        self.reaper.start()
        if self.forker is not None:
            self.forker.start()

    def _running_uids(self) -> set[str]:
        with self._lock:
            return set(self.workers)

    def _on_change(self, change: Change) -> None:
        pod = change.object
        uid = str(pod.get("metadata", {}).get("uid"))
        with self._lock:
            worker = self.workers.get(uid)
            if change.type == "DELETED":
                if worker is not None:
                    worker.removed()
                return
            if worker is not None:
                worker.update(pod)
                return
            if self._stopping:
                return
            node = (pod.get("spec") or {}).get("nodeName")
            if node != self.settings.node_name:
                return
            worker = PodWorker(
                self.api,
                self.settings,
                self.jitter,
                self.registry,
                pod,
                self._on_exit,
                self.recorder,
                self.forker,
                self.addresses,
            )
            self.workers[uid] = worker
        worker.start()

    def _on_exit(self, worker: PodWorker) -> None:
        with self._lock:
            if self.workers.get(worker.uid) is worker:
                del self.workers[worker.uid]

    def stop(self, grace: float = 10.0) -> None:
        """Stop every pod's processes at once: SIGTERM, then SIGKILL after at most `grace`."""
        self.reaper.stop()
        with self._lock:
            self._stopping = True
            workers = list(self.workers.values())
        for worker in workers:
            worker.shutdown(grace)
        deadline = time.monotonic() + grace + 10
        for worker in workers:
            worker.join(max(0.1, deadline - time.monotonic()))
        stuck = [w for w in workers if w.alive]
        if stuck:
            logger.warning("kubelet: %d pod worker(s) did not stop in time", len(stuck))
        # Whatever a stuck worker still runs must not outlive the lab.
        self.registry.kill_recorded()
        if self.forker is not None:
            self.forker.stop()
