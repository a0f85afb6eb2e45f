"""Shard Leases on the real API server: replicas share the shards, a dead one's move within 15 s.

Real parts: kube-apiserver and etcd (the session's cluster), coordination.k8s.io Leases, and
three ShardHolders in this process, each with a client of its own, as three replicas would
run them. A first replica takes every shard; a second joins and is given half; the first then
stops renewing with no goodbye (as a killed pod leaves its Leases) and the second must hold all
of them within 15 s; a third joins and the second stops cleanly, giving its shards back at once.
All along, sampled every 0.1 s, no shard is served by two replicas at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from tests.kube_clusters import SharedCluster
from tests.polling import eventually_async

from rebalancer.clients.kubernetes_api import KubernetesApi, connect
from rebalancer.clients.sharding import ShardHolder, lease_view
from rebalancer.operator_settings import ShardingSettings

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SHARDS = 4
TAKEOVER_LIMIT_S = 15.0


def holder(kube: KubernetesApi, ns: str, identity: str) -> ShardHolder:
    settings = ShardingSettings(shards=SHARDS, namespace=ns, prefix="rebalancer", identity=identity)
    return ShardHolder(kube, settings)


async def watch_overlaps(holders: list[ShardHolder], seen: list[str]) -> None:
    while True:
        now = time.time()
        for shard in range(SHARDS):
            serving = [one.identity for one in holders if one.serves(shard, now)]
            if len(serving) > 1:
                seen.append(f"shard {shard} served by {serving}")
        await asyncio.sleep(0.1)


async def crashable(one: ShardHolder) -> None:
    """The rounds of `run` without its goodbye: cancelled, it leaves its Leases as they are."""
    while True:
        await one.step()
        await asyncio.sleep(one.settings.renew_seconds)


@contextlib.asynccontextmanager
async def running(task: asyncio.Task[None]) -> AsyncIterator[asyncio.Task[None]]:
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_shards_spread_and_move_to_a_live_replica(cluster: SharedCluster, ns: str) -> None:
    apis = [connect(cluster.kubeconfig) for _ in range(3)]
    first, second, third = (holder(api, ns, name) for api, name in zip(apis, "abc", strict=True))
    overlaps: list[str] = []
    watcher = asyncio.create_task(watch_overlaps([first, second, third], overlaps))
    try:
        async with running(asyncio.create_task(crashable(first))) as first_task:
            await eventually_async(lambda: len(first.held()) == SHARDS, "a alone holds all", 20)
            async with running(asyncio.create_task(second.run())) as second_task:
                await eventually_async(
                    lambda: len(first.held()) == len(second.held()) == 2,
                    "a second replica given half the shards",
                    20,
                )
                first_task.cancel()  # a crash: no release, its Leases simply stop renewing
                stopped = time.monotonic()
                await eventually_async(
                    lambda: len(second.held()) == SHARDS, "the live replica holds all", 30
                )
                took = time.monotonic() - stopped
                print(f"\nshards moved to the live replica in {took:.1f} s")
                assert took < TAKEOVER_LIMIT_S
                async with running(asyncio.create_task(third.run())):
                    await eventually_async(
                        lambda: len(third.held()) == 2, "a third replica given its share", 20
                    )
                    second_task.cancel()  # a clean stop: it gives its shards back
                    stopped = time.monotonic()
                    await eventually_async(
                        lambda: len(third.held()) == SHARDS, "the shards given back taken", 20
                    )
                    given = time.monotonic() - stopped
                    print(f"shards given back on a clean stop taken in {given:.1f} s")
                    assert given < 5.0  # one round, not a lease's expiry
                    await check_leases(apis[0], ns, "c")
    finally:
        watcher.cancel()
        for api in apis:
            api.close()
    assert not overlaps, overlaps[:5]


async def check_leases(api: KubernetesApi, ns: str, holder_identity: str) -> None:
    """The API server's own view: every shard Lease names the one holder; the stopped member's
    Lease is gone, the crashed one's is still there until it goes stale."""
    from kubernetes import client

    leases = client.CoordinationV1Api(api.api_client)
    found = await asyncio.to_thread(leases.list_namespaced_lease, ns)
    by_name = {lease.metadata.name: lease for lease in found.items}
    for shard in range(SHARDS):
        lease = by_name[f"rebalancer-shard-{shard}"]
        assert lease.spec.holder_identity == holder_identity
        assert lease.spec.lease_duration_seconds == 10
    assert "rebalancer-member-b" not in by_name  # removed on its clean stop
    member = api.api_client.sanitize_for_serialization(by_name["rebalancer-member-c"])
    assert lease_view(member).holder == "c"


async def test_two_replicas_racing_for_the_same_shards_never_both_hold_one(
    cluster: SharedCluster, ns: str
) -> None:
    """Both start at once and, seeing no one else yet, try to take every shard: the API
    server lets one write per Lease through (create, then resourceVersion-guarded replace)."""
    apis = [connect(cluster.kubeconfig) for _ in range(2)]
    first, second = (holder(api, ns, name) for api, name in zip(apis, "ab", strict=True))
    try:
        for _ in range(3):
            await asyncio.gather(first.step(), second.step())
            assert not first.held() & second.held()
        assert first.held() | second.held() == set(range(SHARDS))
        assert len(first.held()) == len(second.held()) == 2  # spread once each saw the other
    finally:
        for api in apis:
            api.close()


async def test_a_replica_of_a_new_shard_count_waits_for_the_old_ones(
    cluster: SharedCluster, ns: str
) -> None:
    """A rolling update of sharding.shards: the replica started with the new count holds
    nothing while one of the old count lives (a group's shard depends on the count), and
    takes every shard of the new count once the last old one has stopped."""
    apis = [connect(cluster.kubeconfig) for _ in range(2)]
    old = holder(apis[0], ns, "old")
    settings = ShardingSettings(shards=6, namespace=ns, prefix="rebalancer", identity="new")
    new = ShardHolder(apis[1], settings)
    try:
        async with running(asyncio.create_task(old.run())) as old_task:
            await eventually_async(lambda: len(old.held()) == SHARDS, "the old count holds all", 20)
            async with running(asyncio.create_task(new.run())):
                for _ in range(3):  # three rounds of each
                    await asyncio.sleep(old.settings.renew_seconds)
                    assert new.held() == frozenset()
                    assert len(old.held()) == SHARDS  # the newer count is not counted
                old_task.cancel()
                await eventually_async(
                    lambda: new.held() == frozenset(range(6)), "the new count takes over", 20
                )
    finally:
        for api in apis:
            api.close()
