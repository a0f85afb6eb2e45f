"""Events, as the kubelet and controllers record them (`kubectl describe`, `kubectl get events`).

Recording never blocks a control loop: events go through a queue to one writer thread. Repeats
of the same reason and message for the same object within ten minutes bump the first event's
count and lastTimestamp instead of creating another, as kube's event correlator does.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from typing import Any

from .objects import now_text
from .requesting import Api, RequestFailed, resource_path

Body = dict[str, Any]
logger = logging.getLogger(__name__)

AGGREGATE_SECONDS = 600.0


class EventRecorder:
    def __init__(self, api: Api) -> None:
        self.api = api
        self._queue: queue.Queue[tuple[Body, str, str, str, str, str] | None] = queue.Queue()
        self._seen: dict[tuple[str, str, str], tuple[str, str, int, float]] = {}
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._started = False

    def start(self) -> None:
        self._started = True
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        if not self._started:
            return
        self._queue.put(None)
        self._thread.join(timeout)

    def event(
        self,
        obj: Body,
        kind: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
    ) -> None:
        """Record a Normal or Warning event about `obj`, later, on the writer thread."""
        if self._started:
            self._queue.put((obj, kind, reason, message, component, host))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._write(*item)
            except Exception as exc:
                logger.debug("event not recorded: %s", exc)

    def _write(
        self, obj: Body, kind: str, reason: str, message: str, component: str, host: str
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        uid = str(meta.get("uid") or "")
        now, stamp = time.monotonic(), now_text()
        key = (uid, reason, message)
        seen = self._seen.get(key)
        path = resource_path("v1", "events", namespace)
        if seen is not None and now - seen[3] < AGGREGATE_SECONDS:
            name, first, count, _ = seen
            try:
                self.api.patch(f"{path}/{name}", {"count": count + 1, "lastTimestamp": stamp})
                self._seen[key] = (name, first, count + 1, now)
                return
            except RequestFailed:
                pass  # expired or removed: record it afresh
        name = f"{meta.get('name')}.{secrets.token_hex(8)}"
        source: Body = {"component": component}
        if host:
            source["host"] = host
        self.api.create(
            path,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": meta.get("name"),
                    "namespace": namespace,
                    "uid": uid,
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "reason": reason,
                "message": message,
                "type": kind,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": host or component,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            },
        )
        self._seen[key] = (name, stamp, 1, now)
        if len(self._seen) > 5000:  # forget the oldest half; aggregation is best effort
            for old in sorted(self._seen, key=lambda k: self._seen[k][3])[:2500]:
                del self._seen[old]
