"""Watch streams: newline-delimited JSON events, flushed one by one, as kube-apiserver sends.

A watch subscribes before it reads anything, so no change can fall between the snapshot (or
the history replay) and the live feed. Objects that start or stop matching the selectors
arrive as ADDED or DELETED, as kube's watch cache reports them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import errors, selectors, tables
from .cluster import Cluster
from .resources import ResourceType
from .storage import Change, Subscription

Body = dict[str, Any]
logger = logging.getLogger(__name__)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass
class WatchRequest:
    rtype: ResourceType
    namespace: str | None
    label_selector: str | None = None
    field_selector: str | None = None
    since: int | None = None
    send_initial_events: bool = False
    bookmarks: bool = False
    timeout: float | None = None
    table: str | None = None  # the Table apiVersion asked for, if any
    include_object: str = "Metadata"


def parse_since(value: str | None) -> int | None:
    if value is None or value in ("", "0"):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise errors.bad_request(f"invalid resource version: {value}") from exc


class Watch:
    def __init__(self, cluster: Cluster, request: WatchRequest, bookmark_interval: float) -> None:
        self.cluster = cluster
        self.req = request
        self.bookmark_interval = bookmark_interval
        supported = cluster.field_labels(request.rtype)
        self.labels = selectors.parse_labels(request.label_selector)
        self.fields = selectors.parse_fields(request.field_selector, supported)
        self.supported = supported

    def _matches(self, obj: Body | None) -> bool:
        if obj is None:
            return False
        namespace = self.req.namespace if self.req.rtype.namespaced else None
        if namespace and obj.get("metadata", {}).get("namespace") != namespace:
            return False
        return selectors.labels_match(self.labels, obj) and selectors.fields_match(
            self.fields, obj, self.supported
        )

    def translate(self, change: Change) -> tuple[str, Body] | None:
        now = self._matches(change.object)
        if change.type == "ADDED":
            return ("ADDED", change.object) if now else None
        if change.type == "DELETED":
            return ("DELETED", change.object) if now else None
        was = self._matches(change.old)
        if now and was:
            return ("MODIFIED", change.object)
        if now:
            return ("ADDED", change.object)
        if was:
            return ("DELETED", change.object)
        return None

    def encode(self, kind: str, stored: Body) -> bytes:
        obj = self.cluster.served(self.req.rtype, stored)
        if self.req.table:
            meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
            obj = tables.table(self.req.rtype, [obj], meta, self.req.include_object)
            obj["apiVersion"] = self.req.table
        return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def bookmark(self, rv: int, annotations: dict[str, str] | None = None) -> bytes:
        meta: Body = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = annotations
        rtype = self.req.rtype
        obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        return (
            json.dumps({"type": "BOOKMARK", "object": obj}, separators=(",", ":")).encode() + b"\n"
        )

    async def serve(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        store = self.cluster.store
        try:
            sub, replay = store.subscribe(self.req.rtype.storage, self.req.since)
        except errors.ApiError as exc:
            await response.prepare(request)
            event = {"type": "ERROR", "object": exc.status()}
            await response.write(json.dumps(event).encode() + b"\n")
            await response.write_eof()
            return response
        # Everything up to here ran without yielding: the snapshot is consistent with `sub`.
        initial: list[bytes] = []
        snapshot_rv = store.rv
        if self.req.since is None:
            for obj in store.objects(
                self.req.rtype.storage, self.req.namespace if self.req.rtype.namespaced else None
            ):
                if self._matches(obj):
                    initial.append(self.encode("ADDED", obj))
            if self.req.send_initial_events:
                initial.append(self.bookmark(snapshot_rv, {INITIAL_EVENTS_END: "true"}))
        else:
            for change in replay:
                translated = self.translate(change)
                if translated:
                    initial.append(self.encode(*translated))
        try:
            await response.prepare(request)
            for chunk in initial:
                await response.write(chunk)
            await self._follow(response, sub)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            sub.close()
        return response

    async def _follow(self, response: web.StreamResponse, sub: Subscription) -> None:
        deadline = time.monotonic() + self.req.timeout if self.req.timeout else None
        next_bookmark = time.monotonic() + self.bookmark_interval
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            wait = next_bookmark - now if self.req.bookmarks else None
            if deadline is not None:
                wait = min(wait, deadline - now) if wait is not None else deadline - now
            try:
                change = await asyncio.wait_for(sub.queue.get(), timeout=wait)
            except TimeoutError:
                if self.req.bookmarks and time.monotonic() >= next_bookmark:
                    # The queue is empty, so every change up to the store's version was sent.
                    await response.write(self.bookmark(self.cluster.store.rv))
                    next_bookmark = time.monotonic() + self.bookmark_interval
                continue
            if change is None:
                break
            translated = self.translate(change)
            if translated:
                await response.write(self.encode(*translated))
