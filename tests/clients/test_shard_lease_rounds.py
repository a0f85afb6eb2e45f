"""A replica keeps its shards through a slow API server and a busy default executor.

Each Lease call of the fake below takes a second, as writes took on a kube-apiserver busy with
thousands of ConsumerGroups, and asyncio's default executor is kept full by other blocking work
(status writes go through it). Held shards must never lapse: a round's writes go together, the
rounds are paced from their start, and the Lease calls have threads of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

from kubernetes.client.exceptions import ApiException
from tests.polling import eventually_async

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.sharding import ShardHolder
from rebalancer.operator_settings import ShardingSettings

CALL_SECONDS = 1.0
SHARDS = 4


class SlowLeases:
    """coordination.k8s.io Leases in memory, each call CALL_SECONDS long, with resourceVersion
    conflicts as the API server has them."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.lock = threading.Lock()

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.leases[body["metadata"]["name"]] = body

    def list_namespaced_lease(self, namespace: str, **_: Any) -> Any:
        time.sleep(CALL_SECONDS)
        with self.lock:
            items = json.dumps({"items": list(self.leases.values())})
        return type("Reply", (), {"data": items.encode()})()

    def create_namespaced_lease(self, namespace: str, body: dict[str, Any]) -> None:
        time.sleep(CALL_SECONDS)
        with self.lock:
            if body["metadata"]["name"] in self.leases:
                raise ApiException(status=409)
            self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        time.sleep(CALL_SECONDS)
        with self.lock:
            stored = self.leases.get(name)
            if stored is None:
                raise ApiException(status=404)
            if stored["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
                raise ApiException(status=409)
            self._store(body)

    def delete_namespaced_lease(self, name: str, namespace: str) -> None:
        time.sleep(CALL_SECONDS)
        with self.lock:
            self.leases.pop(name, None)


def slow_holder() -> ShardHolder:
    kube: Any = object.__new__(KubernetesApi)
    kube.api_client = None
    settings = ShardingSettings(shards=SHARDS, namespace="ops", prefix="r", identity="pod-a")
    holder = ShardHolder(kube, settings)
    holder.leases = SlowLeases()
    return holder


async def held_over(holder: ShardHolder, seconds: float) -> list[int]:
    """How many shards the holder served at each tenth of a second for `seconds`."""
    counts = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        counts.append(len(holder.held()))
        await asyncio.sleep(0.1)
    return counts


async def test_held_shards_never_lapse_under_a_slow_api_and_a_full_executor() -> None:
    holder = slow_holder()
    rounds = asyncio.create_task(holder.run())
    release = threading.Event()
    # Blocking work of the rest of the operator: more than the default executor has threads.
    busy = [asyncio.create_task(asyncio.to_thread(release.wait, 60)) for _ in range(40)]
    try:
        await eventually_async(lambda: len(holder.held()) == SHARDS, "every shard taken", 20)
        # Four renewal rounds at least: the lease is 10 s, the rounds 3 s apart.
        counts = await held_over(holder, 14.0)
        assert min(counts) == SHARDS, f"shards lapsed while held: {sorted(set(counts))}"
    finally:
        release.set()
        rounds.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await rounds
        await asyncio.gather(*busy)
