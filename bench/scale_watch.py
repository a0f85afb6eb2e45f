"""What bench/scale.py times on the groups, from one watch: when each group first shows
status.group.observedAt, and which replica its status.servedBy names, as the events arrive.

Lists timed it before: the bench listed the groups only once it had created them all, so a
group created early and given status a second later was timed from the end of creation (at
10,000 groups, no first status under 650 s), and a list of 10,000 groups takes a loaded
kube-apiserver minutes, which also blurred the take-over times. A watch costs kube-apiserver
what one more replica's costs: each write sent once more.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from scale_figures import served_pid

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"
# A watch the server ends after this long is opened again from the last resourceVersion seen.
WATCH_SECONDS = 300


class GroupWatch:
    """Follows every ConsumerGroup from before the first is created."""

    def __init__(self, api: client.CustomObjectsApi) -> None:
        self.api = api
        self.first_status: dict[str, float] = {}
        self.served_by: dict[str, str | None] = {}
        self.events = 0
        self.relists = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._version = ""
        self._thread = threading.Thread(target=self._follow, name="group-watch", daemon=True)

    def start(self) -> GroupWatch:
        self._relist()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()

    def with_status(self, names: set[str] | dict[str, float]) -> dict[str, float]:
        """When each of `names` first showed status, for those that have."""
        with self._lock:
            return {name: at for name, at in self.first_status.items() if name in names}

    def owners(self) -> dict[str, int | None]:
        """Group name -> pid of the replica its status.servedBy names now."""
        with self._lock:
            return {name: served_pid(value) for name, value in self.served_by.items()}

    def served_counts(self) -> Counter[int | None]:
        return Counter(self.owners().values())

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                self._stream()
            except ApiException as error:
                if error.status == 410:  # the version is gone: start again from a list
                    self._relist()
                else:
                    time.sleep(1)
            except (ProtocolError, OSError, ValueError):
                time.sleep(1)

    def _stream(self) -> None:
        stream = watch.Watch().stream(
            self.api.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            resource_version=self._version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
        )
        for event in stream:
            if self._stopping.is_set():
                return
            if event["type"] == "ERROR":
                code = (event.get("raw_object") or {}).get("code")
                raise ApiException(status=code or 500)
            item = event["object"]
            self._version = item["metadata"]["resourceVersion"]
            if event["type"] in ("ADDED", "MODIFIED"):
                self._note(item, time.monotonic())

    def _relist(self) -> None:
        self.relists += 1
        token: str | None = None
        while True:
            extra = {"_continue": token} if token else {}
            page = self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=500, **extra)
            now = time.monotonic()
            for item in page["items"]:
                self._note(item, now)
            token = page["metadata"].get("continue") or None
            if token is None:
                self._version = page["metadata"]["resourceVersion"]
                return

    def _note(self, item: dict[str, Any], now: float) -> None:
        name = item["metadata"]["name"]
        status = item.get("status") or {}
        with self._lock:
            self.events += 1
            if name not in self.first_status and (status.get("group") or {}).get("observedAt"):
                self.first_status[name] = now
            self.served_by[name] = status.get("servedBy")
