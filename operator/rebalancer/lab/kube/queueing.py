"""A work queue of object keys, as kube's controllers use: deduplicated, delayable.

A key is never handed to two workers at once, and a key added while it is being processed is
processed again afterwards, so every change is seen by at least one later reconcile.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Generic, TypeVar

K = TypeVar("K")


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._ready: deque[K] = deque()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # each key's earliest delayed time
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False

    def add(self, key: K) -> None:
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing:
                self._dirty.add(key)
                return
            if key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
                self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        at = time.monotonic() + delay
        with self._cond:
            if self._shutdown:
                return
            # A key already due sooner needs no second entry: the reconcile then decides
            # again when it wants the next one.
            if key in self._due and self._due[key] <= at:
                return
            self._due[key] = at
            heapq.heappush(self._delayed, (at, next(self._counter), key))
            self._cond.notify()

    def get(self) -> K | None:
        """The next key to process, or None once the queue is shut down."""
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    at, _, key = heapq.heappop(self._delayed)
                    if self._due.get(key) != at:
                        continue  # superseded by an earlier entry, already handed out
                    del self._due[key]
                    if key in self._processing:
                        self._dirty.add(key)
                    elif key not in self._queued:
                        self._queued.add(key)
                        self._ready.append(key)
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(timeout)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._ready.append(key)
                    self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._delayed)
