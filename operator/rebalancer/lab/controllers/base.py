"""What every lab controller shares: informers, a work queue, a worker, resync, writes.

Reconciles are level-based: a reconcile reads the desired and observed state from the caches
and takes the next step, whatever event woke it; events and the periodic resync only decide
when. A reconcile may ask to be called again after a delay (minReadySeconds, deadlines).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..kube.informing import Change, Informer, Key, controller_uid, key_of
from ..kube.queueing import WorkQueue
from ..kube.recording import EventRecorder
from ..kube.requesting import JSON_PATCH, Api, RequestFailed, resource_path

Body = dict[str, Any]
logger = logging.getLogger(__name__)


@dataclass
class Informers:
    pods: Informer
    statefulsets: Informer
    replicasets: Informer
    deployments: Informer
    # Only the pods of one node are watched (a kubelet under a real control plane, whose
    # controllers are kube-controller-manager's): the workload informers are never started.
    kubelet_only: bool = False

    @classmethod
    def create(cls, api: Api, node_name: str | None = None) -> Informers:
        return cls(
            pods=Informer(
                api,
                "/api/v1/pods",
                name="pods",
                kind="Pod",
                api_version="v1",
                field_selector=f"spec.nodeName={node_name}" if node_name else None,
            ),
            statefulsets=Informer(
                api,
                "/apis/apps/v1/statefulsets",
                name="statefulsets",
                kind="StatefulSet",
                api_version="apps/v1",
            ),
            replicasets=Informer(
                api,
                "/apis/apps/v1/replicasets",
                name="replicasets",
                kind="ReplicaSet",
                api_version="apps/v1",
            ),
            deployments=Informer(
                api,
                "/apis/apps/v1/deployments",
                name="deployments",
                kind="Deployment",
                api_version="apps/v1",
            ),
            kubelet_only=node_name is not None,
        )

    def all(self) -> list[Informer]:
        if self.kubelet_only:
            return [self.pods]
        return [self.pods, self.statefulsets, self.replicasets, self.deployments]

    def by_kind(self, kind: str) -> Informer | None:
        return {
            "Pod": self.pods,
            "StatefulSet": self.statefulsets,
            "ReplicaSet": self.replicasets,
            "Deployment": self.deployments,
        }.get(kind)


PLURALS = {
    "Pod": ("v1", "pods"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "ReplicaSet": ("apps/v1", "replicasets"),
    "Deployment": ("apps/v1", "deployments"),
}


def path_of(obj: Body, subresource: str | None = None) -> str:
    api_version, plural = PLURALS[str(obj.get("kind"))]
    meta = obj["metadata"]
    return resource_path(api_version, plural, meta.get("namespace"), meta["name"], subresource)


class Controller:
    """A queue of primary-object keys and one worker thread draining it."""

    name = "controller"

    def __init__(
        self,
        api: Api,
        informers: Informers,
        resync_seconds: float = 10.0,
        recorder: EventRecorder | None = None,
    ) -> None:
        self.api = api
        self.informers = informers
        self.resync_seconds = resync_seconds
        self.recorder = recorder
        self.queue: WorkQueue[Key] = WorkQueue()
        self._failures: dict[Key, int] = {}
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._work, name=f"{self.name}-worker", daemon=True),
            threading.Thread(target=self._resync, name=f"{self.name}-resync", daemon=True),
        ]

    @property
    def primary(self) -> Informer:
        raise NotImplementedError

    def reconcile(self, namespace: str, name: str) -> float | None:
        """One step towards the desired state; returns seconds until it must run again."""
        raise NotImplementedError

    # Wiring -----------------------------------------------------------------------------------

    def enqueue_object(self, change: Change) -> None:
        self.queue.add(key_of(change.object))

    def enqueue_owner(self, kind: str) -> Callable[[Change], None]:
        """A handler that wakes the controlling owner of the changed object, if of `kind`."""

        def handler(change: Change) -> None:
            for obj in (change.object, change.old):
                if obj is None:
                    continue
                for ref in obj.get("metadata", {}).get("ownerReferences") or ():
                    if ref.get("controller") and ref.get("kind") == kind:
                        namespace = str(obj["metadata"].get("namespace") or "")
                        self.queue.add((namespace, str(ref.get("name"))))

        return handler

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.queue.shutdown()
        for thread in self._threads:
            thread.join(timeout=5)

    def _resync(self) -> None:
        while not self._stopping.wait(self.resync_seconds):
            for obj in self.primary.items():
                self.queue.add(key_of(obj))

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                again = self.reconcile(*key)
                self._failures.pop(key, None)
                if again is not None:
                    self.queue.add_after(key, again)
            except RequestFailed as exc:
                # A conflict means our cache was stale: the next reconcile sees fresher state.
                # 404: what we wrote to went away; the caches will say so.
                delay = 0.05 if exc.status in (404, 409) else self._backoff(key)
                if exc.status not in (404, 409):
                    logger.warning("%s %s/%s: %s", self.name, key[0], key[1], exc)
                self.queue.add_after(key, delay)
            except Exception:
                logger.exception("%s %s/%s failed", self.name, key[0], key[1])
                self.queue.add_after(key, self._backoff(key))
            finally:
                self.queue.done(key)

    def _backoff(self, key: Key) -> float:
        count = self._failures.get(key, 0)
        self._failures[key] = count + 1
        return float(min(0.1 * 2**count, 10.0))

    # Writes through the API, remembered in the caches -----------------------------------------

    def record(self, obj: Body, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, kind, reason, message, self.name)

    def created_message(self, owner: Body, obj: Body) -> str:
        return f"Created {obj.get('kind', '').lower()}: {obj['metadata']['name']}"

    def deleted_message(self, owner: Body, obj: Body) -> str:
        return f"Deleted {obj.get('kind', '').lower()}: {obj['metadata']['name']}"

    def create(
        self, informer: Informer, path: str, body: Body, owner: Body | None = None
    ) -> Body | None:
        """Create; None if the name is taken (the cache will catch up)."""
        try:
            created = self.api.create(path, body)
        except RequestFailed as exc:
            if exc.status == 409:
                return None
            if owner is not None:
                self.record(owner, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            raise
        informer.observe(created)
        if owner is not None:
            self.record(owner, "Normal", "SuccessfulCreate", self.created_message(owner, created))
        return created

    def delete(self, informer: Informer, obj: Body, owner: Body | None = None) -> None:
        uid = obj["metadata"]["uid"]
        try:
            result = self.api.delete(path_of(_with_kind(obj, informer)), uid=uid)
        except RequestFailed as exc:
            if exc.status != 409:  # 409: the uid precondition failed, a namesake lives on
                raise
            result = None
        meta = (result or {}).get("metadata") or {}
        if meta.get("uid") == uid and meta.get("deletionTimestamp") and meta.get("finalizers"):
            informer.observe(result or {})  # held by finalizers: still there, terminating
        else:
            # The answer, when it is the removed object, carries its last resourceVersion.
            informer.forget(result if meta.get("uid") == uid and result else obj)
        if owner is not None:
            self.record(owner, "Normal", "SuccessfulDelete", self.deleted_message(owner, obj))

    def write_status(self, informer: Informer, obj: Body, status: Body) -> Body:
        updated = self.api.patch(
            path_of(obj, "status"), [{"op": "add", "path": "/status", "value": status}], JSON_PATCH
        )
        informer.observe(updated)
        return updated

    def merge(self, informer: Informer, obj: Body, patch: Body) -> Body:
        updated = self.api.patch(path_of(obj), patch)
        informer.observe(updated)
        return updated


def _with_kind(obj: Body, informer: Informer) -> Body:
    if obj.get("kind"):
        return obj
    kinds = {
        "pods": "Pod",
        "statefulsets": "StatefulSet",
        "replicasets": "ReplicaSet",
        "deployments": "Deployment",
    }
    return {**obj, "kind": kinds[informer.name]}


def owned(informer: Informer, owner: Body) -> list[Body]:
    uid = owner["metadata"]["uid"]
    namespace = owner["metadata"].get("namespace")
    return [o for o in informer.items(namespace) if controller_uid(o) == uid]
