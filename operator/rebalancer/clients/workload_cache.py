"""The workloads ConsumerGroups name, read from the operator's watch of them instead of a GET per
group per look.

The watch (handlers.workloads, one per kind, shared by every ConsumerGroup) tells each claimed
workload's spec.replicas as it changes, and its deletion. A workload the cache has not seen yet
(its ConsumerGroup came after the watch's first listing, say), or that no look has read yet, is
read once with a GET and then followed by the watch: the first read names a missing grant as a
GET per look did. Where the watch of a kind is not granted, every look reads it with a GET,
as before. An entry is trusted for MAX_AGE_SECONDS at most: a replica that stood by while a
workload was deleted lists the workloads anew when it leads, and that listing does not tell of
one that is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.patching import workload_replicas
from rebalancer.planning.ownership import workload_key

MAX_AGE_SECONDS = 3600.0
# The kinds the watch follows, by the plural handlers.workloads registers.
KINDS = {"statefulsets": "StatefulSet", "deployments": "Deployment"}

Key = tuple[str, ...]


@dataclass
class WorkloadCache:
    # The kinds whose watch runs: only their entries are kept.
    watched: set[str] = field(default_factory=set)
    # Key (planning.ownership.workload_key) to (spec.replicas, None when the workload does not
    # exist; monotonic time it was learned).
    entries: dict[Key, tuple[int | None, float]] = field(default_factory=dict)
    # Keys read once with a GET: the first look at a workload always reads it, so that a
    # missing grant is named (and Degraded) at once, as it was before the watch was trusted.
    verified: set[Key] = field(default_factory=set)
    # Looks answered from the cache and with a GET, for tests and the bench.
    hits: int = 0
    reads: int = 0
    clock: Callable[[], float] = time.monotonic

    def watch(self, plural: str) -> None:
        self.watched.add(KINDS.get(plural, plural))

    def seen(self, namespace: str, kind: str, name: str, replicas: int | None) -> None:
        """What the watch told of a claimed workload: its spec.replicas, or None once deleted."""
        self.entries[workload_key(namespace, kind, name)] = (replicas, self.clock())

    def forget(self, key: Key) -> None:
        self.entries.pop(key, None)
        self.verified.discard(key)

    async def replicas(
        self, api: KubernetesApi, namespace: str, kind: str, name: str
    ) -> int | None:
        """The workload's spec.replicas, None when it does not exist."""
        key = workload_key(namespace, kind, name)
        entry = self.entries.get(key) if kind in self.watched else None
        fresh = entry is not None and self.clock() - entry[1] < MAX_AGE_SECONDS
        if entry is not None and fresh and key in self.verified:
            self.hits += 1
            return entry[0]
        before = entry
        read_at = self.clock()
        replicas = await workload_replicas(api, namespace, kind, name)
        self.reads += 1
        self.verified.add(key)
        # What the watch told while the GET was under way is newer than the GET's answer.
        if kind in self.watched and self.entries.get(key) is before:
            self.entries[key] = (replicas, read_at)
        return replicas


def replicas_of(body: Mapping[str, Any]) -> int:
    """spec.replicas of a workload's body; the API server defaults an unset one to 1."""
    spec = body.get("spec")
    replicas = spec.get("replicas") if isinstance(spec, Mapping) else None
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
