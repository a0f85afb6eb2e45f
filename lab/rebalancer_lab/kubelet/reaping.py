"""The kubelet's level-based removal of deleted pods, as a kubelet's status manager does on
every sync: a pod of this node that is Terminating while no worker runs it has no process
left, so its final delete (grace 0) is sent again, whatever ended the worker's own tries.

A worker removes its pod when it has stopped its processes; that edge can be lost (an answer
taken as final from an API server that is restarting, an event that never comes), and a pod
left Terminating holds a StatefulSet's ordinal and a Deployment's rollout for good.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable

from ..kube import objects
from ..kube.objects import Body
from ..kube.requesting import Api, RequestFailed, resource_path

logger = logging.getLogger(__name__)
# A kubelet's status manager syncs every 10 s.
SWEEP_SECONDS = 10.0


def orphaned(pods: Iterable[Body], node: str, running: Collection[str]) -> dict[str, Body]:
    """The deleted pods bound to `node` that no worker runs, by uid."""
    found: dict[str, Body] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid = str(meta.get("uid"))
        if objects.is_terminating(pod) and spec.get("nodeName") == node and uid not in running:
            found[uid] = pod
    return found


class Reaper:
    """Every sweep, removes the pods found orphaned on this sweep and the one before: a pod
    seen once may be one whose worker is just being made."""

    def __init__(
        self,
        api: Api,
        node: str,
        pods: Callable[[], list[Body]],
        running: Callable[[], Collection[str]],
        every: float = SWEEP_SECONDS,
    ) -> None:
        self.api = api
        self.node = node
        self._pods = pods
        self._running = running
        self.every = every
        self.removed = 0
        self._seen: set[str] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet-reaper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.wait(self.every):
            try:
                self.sweep()
            except Exception:  # the next sweep tries again
                logger.exception("kubelet: the sweep for pods left Terminating failed")

    def sweep(self) -> None:
        found = orphaned(self._pods(), self.node, self._running())
        for uid in found.keys() & self._seen:
            self._remove(found[uid], uid)
        self._seen = set(found)

    def _remove(self, pod: Body, uid: str) -> None:
        meta = pod["metadata"]
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        path = resource_path("v1", "pods", namespace, name)
        try:
            self.api.delete(path, grace_period_seconds=0, propagation=None, uid=uid)
        except (RequestFailed, OSError) as error:  # 409: the name is another pod's now
            logger.info("pod %s/%s: left Terminating, not removed: %s", namespace, name, error)
            return
        self.removed += 1
        logger.warning("pod %s/%s: left Terminating by its worker; removed", namespace, name)
