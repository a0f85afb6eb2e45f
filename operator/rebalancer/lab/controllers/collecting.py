"""Garbage collection of ReplicaSets and pods whose owners are gone (background propagation).

The API emulator collects dependents itself when an owner is removed; this collector is for
what slips through (an owner removed while the lab was down, an API server without a
collector) and checks with the API before deleting anything, since caches may lag.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..kube.requesting import Api, resource_path
from .base import PLURALS, Informers, path_of

Body = dict[str, Any]
logger = logging.getLogger(__name__)

OWNER_KINDS = ("StatefulSet", "ReplicaSet", "Deployment")


class GarbageCollector:
    name = "garbage-collector"

    def __init__(self, api: Api, informers: Informers, resync_seconds: float = 10.0) -> None:
        self.api = api
        self.informers = informers
        self.resync_seconds = resync_seconds
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._suspects: set[str] = set()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.resync_seconds)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self.sweep()
            except Exception:
                logger.exception("garbage collection failed")

    def sweep(self) -> int:
        """Delete every dependent found orphaned twice in a row; returns how many.

        Twice, because an API server's own collector (the emulator has one) usually gets
        there first, and the caches need a moment to show it.
        """
        if not all(i.synced.is_set() for i in self.informers.all()):
            return 0
        collected = 0
        suspects: set[str] = set()
        for informer in (self.informers.replicasets, self.informers.pods):
            for obj in informer.items():
                meta = obj["metadata"]
                refs = meta.get("ownerReferences") or []
                if not refs or meta.get("deletionTimestamp"):
                    continue
                if any(self._owner_alive(ref, str(meta.get("namespace") or "")) for ref in refs):
                    continue
                uid = str(meta.get("uid"))
                suspects.add(uid)
                if uid not in self._suspects:
                    continue
                logger.info(
                    "collecting %s %s/%s: its owners are gone",
                    obj.get("kind"),
                    meta.get("namespace"),
                    meta.get("name"),
                )
                self.api.delete(path_of(obj), uid=meta.get("uid"), propagation="Background")
                collected += 1
        self._suspects = suspects
        return collected

    def _owner_alive(self, ref: Body, namespace: str) -> bool:
        kind = str(ref.get("kind"))
        informer = self.informers.by_kind(kind)
        if kind not in OWNER_KINDS or informer is None:
            return True  # not ours to judge
        cached = informer.get(namespace, str(ref.get("name")))
        if cached is not None and cached["metadata"].get("uid") == ref.get("uid"):
            return True
        api_version, plural = PLURALS[kind]
        live = self.api.get(resource_path(api_version, plural, namespace, str(ref.get("name"))))
        return live is not None and live["metadata"].get("uid") == ref.get("uid")
