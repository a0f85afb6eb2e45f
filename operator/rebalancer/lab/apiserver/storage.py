"""Objects by storage key, namespace and name, with one global resourceVersion counter.

Every change is kept in a bounded per-storage history so that watches can resume from any
recent resourceVersion, and is pushed to live subscribers in the same synchronous step, so a
subscriber that snapshots right after subscribing can never miss a change in between.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from . import errors

Body = dict[str, Any]


@dataclass(frozen=True)
class Change:
    type: str  # ADDED, MODIFIED or DELETED
    object: Body
    old: Body | None
    rv: int


class Subscription:
    """A live feed of changes for one storage; closed on overflow or on demand."""

    def __init__(self, store: Store, storage: str, limit: int) -> None:
        self.store = store
        self.storage = storage
        self.limit = limit
        self.queue: asyncio.Queue[Change | None] = asyncio.Queue()
        self.closed = False
        self.overflowed = False

    def push(self, change: Change) -> None:
        if self.closed:
            return
        if self.queue.qsize() >= self.limit:
            # A consumer this far behind is dropped, as kube drops slow watchers; it resumes
            # from its last resourceVersion out of the history.
            self.overflowed = True
            self.close()
            return
        self.queue.put_nowait(change)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)
            self.store.unsubscribe(self)


class Store:
    def __init__(self, history_limit: int = 10_000, subscriber_limit: int = 10_000) -> None:
        self.rv = 0
        self.history_limit = history_limit
        self.subscriber_limit = subscriber_limit
        self._objects: dict[str, dict[str, dict[str, Body]]] = {}
        self._history: dict[str, deque[Change]] = {}
        self._floor: dict[str, int] = {}
        self._subscribers: dict[str, set[Subscription]] = {}
        self._per_namespace: Counter[str] = Counter()
        self._per_storage: Counter[str] = Counter()
        # Owner uid -> dependents' (storage, namespace, name), for garbage collection.
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}

    # Reads ------------------------------------------------------------------------------

    def get(self, storage: str, namespace: str, name: str) -> Body | None:
        return self._objects.get(storage, {}).get(namespace, {}).get(name)

    def objects(self, storage: str, namespace: str | None = None) -> list[Body]:
        """Objects sorted as etcd keys sort: by namespace, then name."""
        spaces = self._objects.get(storage, {})
        if namespace is not None:
            objs = spaces.get(namespace, {})
            return [objs[name] for name in sorted(objs)]
        return [spaces[ns][name] for ns in sorted(spaces) for name in sorted(spaces[ns])]

    def count_in_namespace(self, namespace: str) -> int:
        return self._per_namespace[namespace]

    def count(self, storage: str) -> int:
        return self._per_storage[storage]

    def storages(self) -> list[str]:
        return list(self._objects)

    # Writes -----------------------------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, storage: str, namespace: str, name: str, obj: Body) -> Body:
        """Store a new version of an object under a fresh resourceVersion; emit the change."""
        rv = self.next_rv()
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        objs = self._objects.setdefault(storage, {}).setdefault(namespace, {})
        old = objs.get(name)
        objs[name] = obj
        if old is None:
            self._per_namespace[namespace] += 1
            self._per_storage[storage] += 1
        self._index_owners((storage, namespace, name), old, obj)
        self._record(storage, Change("ADDED" if old is None else "MODIFIED", obj, old, rv))
        return obj

    def remove(self, storage: str, namespace: str, name: str) -> Body | None:
        """Remove an object; its DELETED event carries the deletion's resourceVersion."""
        objs = self._objects.get(storage, {}).get(namespace)
        if objs is None or name not in objs:
            return None
        old = objs.pop(name)
        if not objs:
            del self._objects[storage][namespace]
        self._per_namespace[namespace] -= 1
        self._per_storage[storage] -= 1
        self._index_owners((storage, namespace, name), old, None)
        rv = self.next_rv()
        gone = {**old, "metadata": {**old.get("metadata", {}), "resourceVersion": str(rv)}}
        self._record(storage, Change("DELETED", gone, old, rv))
        return gone

    @staticmethod
    def _owners(obj: Body | None) -> set[str]:
        refs = (obj or {}).get("metadata", {}).get("ownerReferences") or ()
        return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}

    def _index_owners(self, key: tuple[str, str, str], old: Body | None, new: Body | None) -> None:
        before, after = self._owners(old), self._owners(new)
        for uid in before - after:
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.discard(key)
                if not dependents:
                    del self._dependents[uid]
        for uid in after - before:
            self._dependents.setdefault(uid, set()).add(key)

    def dependents(self, uid: str) -> list[tuple[str, str, str]]:
        return sorted(self._dependents.get(uid, ()))

    def replace_silently(self, storage: str, namespace: str, name: str, obj: Body) -> None:
        """Swap an object's stored form without a new version (defaults of a changed schema)."""
        objs = self._objects.get(storage, {}).get(namespace, {})
        if name in objs:
            objs[name] = obj

    def drop_storage(self, storage: str) -> None:
        """Forget a storage's history (its CRD is gone); older watches must relist."""
        self._history.pop(storage, None)
        self._floor[storage] = self.rv
        for sub in list(self._subscribers.get(storage, ())):
            sub.close()

    def _record(self, storage: str, change: Change) -> None:
        history = self._history.setdefault(storage, deque())
        if len(history) >= self.history_limit:
            self._floor[storage] = history.popleft().rv
        history.append(change)
        for sub in list(self._subscribers.get(storage, ())):
            sub.push(change)

    # Watches ----------------------------------------------------------------------------

    def subscribe(self, storage: str, since: int | None) -> tuple[Subscription, list[Change]]:
        """Subscribe, and return the changes after `since` that happened before subscribing.

        Raises 410 Expired when changes after `since` have already left the history.
        """
        replay: list[Change] = []
        if since is not None:
            floor = self._floor.get(storage, 0)
            if since < floor:
                raise errors.expired(f"too old resource version: {since} ({floor})")
            # Newest first, stopping at `since`: the usual resume costs only what it replays.
            for change in reversed(self._history.get(storage, ())):
                if change.rv <= since:
                    break
                replay.append(change)
            replay.reverse()
        sub = Subscription(self, storage, self.subscriber_limit)
        self._subscribers.setdefault(storage, set()).add(sub)
        return sub, replay

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.get(sub.storage, set()).discard(sub)

    def subscriptions(self) -> list[Subscription]:
        return [s for subs in self._subscribers.values() for s in subs]
