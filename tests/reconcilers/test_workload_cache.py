"""Observers read a claimed workload's spec.replicas from the shared workload watch, not with a
GET per group per look: a GET only for a workload the watch has not told of yet, or of a kind it
does not follow, and the watch's word wins over a GET answered after it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest

from rebalancer.clients import workload_cache
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.workload_cache import MAX_AGE_SECONDS, WorkloadCache
from rebalancer.planning.ownership import workload_key
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.reconcilers.workloads import claimed_and_changed

API = cast(KubernetesApi, None)


class Server:
    """Stands in for kube-apiserver's GET of a workload: counts them; `during` runs while one
    is under way (a watch event arriving then)."""

    def __init__(self, replicas: int | None) -> None:
        self.replicas = replicas
        self.gets = 0
        self.during: Any = None

    async def __call__(self, api: Any, namespace: str, kind: str, name: str) -> int | None:
        self.gets += 1
        answer = self.replicas
        if self.during is not None:
            self.during()
        await asyncio.sleep(0)
        return answer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Server:
    made = Server(replicas=2)
    monkeypatch.setattr(workload_cache, "workload_replicas", made)
    return made


def body(replicas: int | None) -> kopf.Body:
    spec = {} if replicas is None else {"replicas": replicas}
    return kopf.Body(
        {
            "kind": "StatefulSet",
            "metadata": {"name": "orders", "namespace": "team", "generation": 1},
            "spec": spec,
            "status": {"observedGeneration": 1},
        }
    )


def test_many_looks_cost_one_get_and_the_watch_keeps_the_answer_current(server: Server) -> None:
    cache = WorkloadCache()
    cache.watch("statefulsets")
    deps = cast(Dependencies, SimpleNamespace(workload_progress={}, workloads=cache))
    claims = cast(ClaimIndex, {workload_key("team", "StatefulSet", "orders"): ()})

    async def looks(count: int) -> list[int | None]:
        return [await cache.replicas(API, "team", "StatefulSet", "orders") for _ in range(count)]

    # Not told of yet: read once, then answered from the cache.
    assert asyncio.run(looks(10)) == [2] * 10
    assert (server.gets, cache.hits) == (1, 9)
    # Scaled (the watch's event), then scaled to an unset spec.replicas (1), then deleted.
    claimed_and_changed(deps, body(5), "team", claims, "MODIFIED")
    assert asyncio.run(looks(3)) == [5] * 3
    claimed_and_changed(deps, body(None), "team", claims, "MODIFIED")
    assert asyncio.run(looks(1)) == [1]
    claimed_and_changed(deps, body(5), "team", claims, "DELETED")
    assert asyncio.run(looks(2)) == [None, None]
    assert server.gets == 1
    # No longer claimed: forgotten, and read again if ever looked at.
    claimed_and_changed(deps, body(5), "team", cast(ClaimIndex, {}), "MODIFIED")
    assert cache.entries == {}


def test_a_kind_the_watch_does_not_follow_is_read_at_every_look(server: Server) -> None:
    cache = WorkloadCache()
    cache.watch("statefulsets")
    for _ in range(3):
        assert asyncio.run(cache.replicas(API, "team", "Deployment", "web")) == 2
    assert server.gets == 3 and cache.entries == {}


def test_the_watch_wins_over_a_get_it_overtook(server: Server) -> None:
    cache = WorkloadCache()
    cache.watch("statefulsets")
    # The GET read 2; a scale to 7 came through the watch before the GET's answer arrived.
    server.during = lambda: cache.seen("team", "StatefulSet", "orders", 7)
    assert asyncio.run(cache.replicas(API, "team", "StatefulSet", "orders")) == 2
    server.during = None
    assert asyncio.run(cache.replicas(API, "team", "StatefulSet", "orders")) == 7
    assert server.gets == 1


def test_an_entry_is_read_again_once_it_is_old(server: Server) -> None:
    now = [1000.0]
    cache = WorkloadCache(clock=lambda: now[0])
    cache.watch("statefulsets")
    cache.seen("team", "StatefulSet", "orders", 4)
    # The first look reads it once, whatever the watch told: a missing grant is named at once.
    assert asyncio.run(cache.replicas(API, "team", "StatefulSet", "orders")) == 2
    cache.seen("team", "StatefulSet", "orders", 4)
    assert asyncio.run(cache.replicas(API, "team", "StatefulSet", "orders")) == 4
    assert server.gets == 1
    now[0] += MAX_AGE_SECONDS
    assert asyncio.run(cache.replicas(API, "team", "StatefulSet", "orders")) == 2
    assert server.gets == 2
