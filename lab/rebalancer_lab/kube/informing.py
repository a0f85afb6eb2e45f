"""Informers: list, then watch from the list's resourceVersion, into a local cache.

The lab's kubelet reads its cache of the pods bound to its node and is told of every change
through handlers, as a kubelet's pod config source is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .requesting import Api, RequestFailed, WatchStream

Body = dict[str, Any]
Key = tuple[str, str]
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    type: str  # ADDED, MODIFIED, DELETED
    object: Body
    old: Body | None


Handler = Callable[[Change], None]


def key_of(obj: Body) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Body | None) -> int:
    if obj is None:
        return -1
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    # resourceVersions are opaque to clients; kube-apiserver's are etcd revisions (integers),
    # and anything else is treated as newer than what is cached.
    return int(text) if text.isdigit() else 1 << 62


class Informer:
    """One resource type, all namespaces: a cache kept current by list+watch."""

    def __init__(
        self,
        api: Api,
        path: str,
        *,
        name: str,
        kind: str | None = None,
        api_version: str | None = None,
        watch_timeout: int = 300,
        retry_seconds: float = 0.5,
        field_selector: str | None = None,
    ) -> None:
        self.api = api
        self.path = path
        # A kubelet may only list and watch the pods bound to its node (the Node authorizer).
        self.query = {"fieldSelector": field_selector} if field_selector else {}
        self.name = name
        self.kind = kind
        self.api_version = api_version
        self.watch_timeout = watch_timeout
        self.retry_seconds = retry_seconds
        self.synced = threading.Event()
        self._cache: dict[Key, Body] = {}
        self._handlers: list[Handler] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    # Reading --------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Body | None:
        with self._lock:
            return self._cache.get((namespace, name))

    def items(self, namespace: str | None = None) -> list[Body]:
        with self._lock:
            objects = list(self._cache.values())
        if namespace is None:
            return objects
        return [o for o in objects if o["metadata"].get("namespace") == namespace]

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    # Running ----------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def wait_synced(self, timeout: float = 10.0) -> bool:
        return self.synced.wait(timeout)

    def _run(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._watch(version)
            except RequestFailed as exc:
                if exc.status == 410:
                    version = None  # too old: list again
                    continue
                if not self._stopping.is_set():
                    logger.warning("%s informer: %s; retrying", self.name, exc)
                    self._stopping.wait(self.retry_seconds)
            except Exception as exc:
                if not self._stopping.is_set():
                    logger.warning("%s informer: %s; retrying", self.name, exc)
                    self._stopping.wait(self.retry_seconds)

    def _relist(self) -> str:
        listing = self.api.list(self.path, **self.query)
        fresh = {key_of(o): self._typed(o) for o in listing.get("items") or []}
        changes: list[Change] = []
        with self._lock:
            for key, gone in self._cache.items():
                if key not in fresh:
                    changes.append(Change("DELETED", gone, gone))
            for key, obj in fresh.items():
                old = self._cache.get(key)
                if old is None:
                    changes.append(Change("ADDED", obj, None))
                elif _version(obj) != _version(old):
                    changes.append(Change("MODIFIED", obj, old))
            self._cache = fresh
        self.synced.set()
        for change in changes:
            self._emit(change)
        return str(listing.get("metadata", {}).get("resourceVersion") or "")

    def _watch(self, version: str) -> str | None:
        stream = self.api.watch(
            self.path, version, timeout_seconds=self.watch_timeout, **self.query
        )
        self._stream = stream
        if self._stopping.is_set():
            stream.close()
        for kind, obj in stream:
            if kind == "BOOKMARK":
                version = obj.get("metadata", {}).get("resourceVersion") or version
                continue
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise RequestFailed(code, str(obj.get("reason")), str(obj.get("message")), obj)
            version = obj.get("metadata", {}).get("resourceVersion") or version
            self._apply(kind, self._typed(obj))
        self._stream = None
        return version  # the server ended the watch: resume from where it stopped

    def _typed(self, obj: Body) -> Body:
        # kube leaves kind and apiVersion out of list items; owner references need them.
        if self.kind and not obj.get("kind"):
            obj["kind"] = self.kind
        if self.api_version and not obj.get("apiVersion"):
            obj["apiVersion"] = self.api_version
        return obj

    def _apply(self, kind: str, obj: Body) -> None:
        key = key_of(obj)
        uid = obj["metadata"].get("uid", "")
        with self._lock:
            old = self._cache.get(key)
            if kind == "DELETED":
                if old is not None and old["metadata"].get("uid") == uid:
                    del self._cache[key]
            elif old is None or old["metadata"].get("uid") != uid or _version(obj) > _version(old):
                self._cache[key] = obj
        self._emit(Change(kind, obj, old))

    def _emit(self, change: Change) -> None:
        for handler in self._handlers:
            try:
                handler(change)
            except Exception:
                logger.exception("%s informer handler failed", self.name)
