"""A replica acts on a ConsumerGroup only while it holds the group's shard: the timers' and
change handlers' filters say so, and the daemons run their loop while the shard is held, stop
it when the shard goes and run it again when it comes back. The holder is the real
ShardHolder with its held set set as a round of Lease writes would (no API server here)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import kopf
import pytest
from kubernetes import client
from tests.stopping import Stopped

import rebalancer.handlers.enforcing
import rebalancer.handlers.groups
import rebalancer.handlers.rollouts
import rebalancer.handlers.settings  # noqa: F401  (registers its handlers)
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.sharding import ShardHolder
from rebalancer.operator_settings import OperatorSettings, ShardingSettings
from rebalancer.planning.shards import SHARD_LABEL, ShardedGroup, hashed_shard
from rebalancer.reconcilers import shard_takeover, sharding, validating
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.sleeping import Stopping
from rebalancer.structs.consumer_group import FINALIZER

SHARDS = 4
NS, NAME = "team-a", "orders"
SHARD = hashed_shard(NS, NAME, SHARDS)


def sharded_deps(held: set[int]) -> Dependencies:
    api = client.ApiClient()  # never called: the held set is given
    kube = KubernetesApi(
        core=client.CoreV1Api(api),
        apps=client.AppsV1Api(api),
        custom=client.CustomObjectsApi(api),
        api_client=api,
    )
    settings = ShardingSettings(shards=SHARDS, namespace="ops", prefix="r", identity="pod-a")
    holder = ShardHolder(kube, settings)
    hold(holder, held)
    deps: Any = object.__new__(Dependencies)
    deps.shards = holder
    deps.kube = kube
    deps.daemons_here = set()
    deps.settings = OperatorSettings(sharding=settings)
    return deps  # type: ignore[no-any-return]


def hold(holder: ShardHolder, shards: set[int], seconds: float = 30.0) -> None:
    holder._deadlines = {shard: time.time() + seconds for shard in shards}
    holder._notify()


def handler(registry: Any, handler_id: str) -> Any:
    found = [one for one in registry.get_all_handlers() if one.id == handler_id]
    assert found, handler_id
    return found[0]


def test_the_filters_pass_only_the_groups_of_held_shards() -> None:
    memo = kopf.Memo(deps=sharded_deps({SHARD}))
    other = kopf.Memo(deps=sharded_deps(set(range(SHARDS)) - {SHARD}))
    enforce = handler(kopf.get_default_registry()._spawning, "enforce").when
    asking = {"groupId": "orders", "policy": {"enforce": {"scheduleSeconds": 600}}}
    where = {"namespace": NS, "name": NAME, "labels": {}}
    assert enforce(spec=asking, status={}, memo=memo, **where)
    assert not enforce(spec=asking, status={}, memo=other, **where)
    validate = handler(kopf.get_default_registry()._changing, "validate").when
    assert validate(memo=memo, **where)
    assert not validate(memo=other, **where)
    for daemon_id in ("observe", "roll_out"):
        daemon = handler(kopf.get_default_registry()._spawning, daemon_id).when
        assert daemon(memo=memo, **where)
        assert not daemon(memo=other, **where)
    changing = kopf.get_default_registry()._changing.get_all_handlers()
    assert all(one.when is not None for one in changing if one.id.startswith("validate"))
    # The label moves the group to another shard.
    moved = {"namespace": NS, "name": NAME, "labels": {SHARD_LABEL: str((SHARD + 1) % SHARDS)}}
    assert not validate(memo=memo, **moved)
    assert validate(memo=other, **moved)


def test_without_sharding_every_group_is_served() -> None:
    assert sharding.served_filter(kopf.Memo(), NS, NAME, {})
    deps: Any = object.__new__(Dependencies)
    deps.shards = None
    assert sharding.served_here(deps, NS, NAME, {SHARD_LABEL: "garbage"})


def test_a_label_that_names_no_shard_falls_back_to_the_name_and_says_why() -> None:
    shard, problem = sharding.group_shard(SHARDS, NS, NAME, {SHARD_LABEL: "9"})
    assert shard == SHARD
    assert problem is not None and SHARD_LABEL in problem and "0 to 3" in problem


async def test_the_daemon_loop_runs_while_the_shard_is_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sharding, "SERVING_LOOK_SECONDS", 0.1)
    monkeypatch.setattr(sharding, "LOOK_SECONDS", 0.1)
    deps = sharded_deps(set())
    holder = deps.shards
    assert holder is not None
    # Already marked as served here: no status write (no API server in this test).
    status = {"servedBy": f"pod-a (shard {SHARD} of 4)"}
    body: Any = {"metadata": {"labels": {}}, "status": status}
    runs: list[str] = []

    async def loop(stop: Stopping) -> None:
        runs.append("started")
        while not stop:
            await stop.wait(10)
        runs.append("stopped")

    stopped = Stopped()
    daemon = asyncio.create_task(
        sharding.while_served(deps, body, NS, NAME, stopped, loop, marks=True)
    )
    await asyncio.sleep(0.2)
    assert runs == []  # not held: waits
    hold(holder, {SHARD})
    await asyncio.sleep(0.2)
    assert runs == ["started"]
    hold(holder, set())  # taken by another replica
    await asyncio.sleep(0.2)
    assert runs == ["started", "stopped"]
    hold(holder, {SHARD}, seconds=0.5)  # held, then its renewals stop: it lapses by itself
    await asyncio.sleep(1.0)
    assert runs == ["started", "stopped", "started", "stopped"]
    hold(holder, {SHARD})
    await asyncio.sleep(0.3)
    assert runs[-1] == "started"
    # The label moves the group to a shard this replica does not hold: the loop stops.
    body["metadata"]["labels"] = {SHARD_LABEL: str((SHARD + 1) % SHARDS)}
    await asyncio.sleep(0.5)
    assert runs[-1] == "stopped"
    assert len(runs) == 6
    stopped.event.set()
    await asyncio.wait_for(daemon, 2)


async def test_a_daemon_waiting_for_a_shard_held_elsewhere_holds_no_task_of_its_own() -> None:
    deps = sharded_deps(set())
    body: Any = {"metadata": {"labels": {}}, "status": {}}

    async def loop(stop: Stopping) -> None:
        raise AssertionError("the shard is not held here: the loop never runs")

    before = len(asyncio.all_tasks())
    daemons = [
        asyncio.create_task(sharding.while_served(deps, body, NS, NAME, Stopped(), loop))
        for _ in range(50)
    ]
    await asyncio.sleep(0.1)
    # Each waits on its shard's event in the task kopf made for it, and in nothing more: on
    # every replica, thousands of groups' daemons wait so.
    assert len(asyncio.all_tasks()) == before + len(daemons)
    for daemon in daemons:
        daemon.cancel()
    done, waiting = await asyncio.wait(daemons, timeout=1)
    assert not waiting
    assert all(daemon.cancelled() for daemon in done)


async def test_a_serving_daemon_between_looks_holds_no_task_of_its_own() -> None:
    deps = sharded_deps(set())
    holder = deps.shards
    assert holder is not None
    hold(holder, {SHARD})
    body: Any = {"metadata": {"labels": {}}, "status": {}}
    waiting = asyncio.Event()

    async def loop(stop: Stopping) -> None:
        while not stop:
            waiting.set()
            await stop.wait(30)  # an observer between two looks

    before = len(asyncio.all_tasks())
    daemons = [
        asyncio.create_task(sharding.while_served(deps, body, NS, NAME, Stopped(), loop))
        for _ in range(50)
    ]
    await waiting.wait()
    await asyncio.sleep(0.1)
    # The stop is kopf's cancellation, or a round that loses the shard: both reach the
    # daemon's own task, so no wait on kopf's flag (several tasks each) is needed.
    assert len(asyncio.all_tasks()) == before + len(daemons)
    hold(holder, set())
    done, running = await asyncio.wait(daemons, timeout=0.5)
    assert not done, "the shard's loss ends the loop, not the daemon: it waits for the shard"
    for daemon in daemons:
        daemon.cancel()
    done, running = await asyncio.wait(daemons, timeout=1)
    assert not running


def test_kopf_cancels_the_waiting_daemons_as_soon_as_it_stops_them() -> None:
    # The wait above does not watch kopf's `stopped`: it ends by the cancellation kopf sends
    # at once to an async daemon that has no cancellation backoff.
    spawning = kopf.get_default_registry()._spawning
    for handler_id in ("observe", "roll_out"):
        assert handler(spawning, handler_id).cancellation_backoff is None


def test_the_delete_handler_wants_the_finalizer_where_served_or_already_there() -> None:
    # The daemons and timers are filtered to the serving replica: the mandatory delete
    # handler is what makes kopf want its finalizer. The serving replica adds it; the others
    # neither add it (a PATCH each per new group) nor, once it is there, take it off.
    deleting = handler(kopf.get_default_registry()._changing, "hand_back")
    assert deleting.requires_finalizer
    serving = kopf.Memo(deps=sharded_deps({SHARD}))
    other = kopf.Memo(deps=sharded_deps(set(range(SHARDS)) - {SHARD}))
    where = {"namespace": NS, "name": NAME, "labels": {}}
    bare = {"metadata": {"name": NAME, "namespace": NS}}
    carrying = {"metadata": {"name": NAME, "namespace": NS, "finalizers": [FINALIZER]}}
    assert deleting.when(memo=serving, body=bare, **where)
    assert not deleting.when(memo=other, body=bare, **where)
    assert deleting.when(memo=other, body=carrying, **where)
    assert deleting.when(memo=serving, body=carrying, **where)


async def test_a_taken_shard_gets_its_groups_servedby_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps = sharded_deps({SHARD})
    holder = deps.shards
    assert holder is not None
    ours = f"pod-a (shard {SHARD} of {SHARDS})"
    index = {
        SHARD: [
            ShardedGroup(NS, "moved", "pod-b (shard 1 of 4)"),
            ShardedGroup(NS, "restarted", ours),
            ShardedGroup(NS, "running", "pod-b (shard 1 of 4)"),
        ]
    }
    deps.daemons_here.add((NS, "running"))
    writes: list[tuple[str, str, bool]] = []

    async def write(api: Any, namespace: str, name: str, value: str, *, clear_first: bool) -> bool:
        writes.append((name, value, clear_first))
        return True

    monkeypatch.setattr(shard_takeover, "write_served_by", write)
    written = await shard_takeover.take_up_shard(deps, holder, SHARD, index, just_taken=True)
    assert written == 2
    assert sorted(writes) == [("moved", ours, False), ("restarted", ours, True)]
    writes.clear()
    hold(holder, set())  # lost meanwhile: nothing written for a shard no longer held
    assert await shard_takeover.take_up_shard(deps, holder, SHARD, index, just_taken=True) == 0
    assert writes == []


def test_only_the_serving_replica_records_the_handled_spec() -> None:
    """kopf writes its last-handled-configuration annotation after a change whose handlers
    were all filtered out too: on a replica that does not serve the group, that PATCH is left
    to the one that does."""
    body = kopf.Body(
        {
            "apiVersion": "rebalancer.dev/v1alpha1",
            "kind": "ConsumerGroup",
            "metadata": {"namespace": NS, "name": NAME, "labels": {}},
            "spec": {"groupId": "orders"},
        }
    )
    patches: dict[str, dict[str, Any]] = {}
    for replica, held in (("serving", {SHARD}), ("other", set(range(SHARDS)) - {SHARD})):
        storage = sharding.ServedDiffBase(sharded_deps(held), prefix="rebalancer.dev", key="lhc")
        patch = kopf.Patch()
        storage.store(body=body, patch=patch, essence=storage.build(body=body))
        patches[replica] = dict(patch)
    assert patches["other"] == {}
    written = patches["serving"]["metadata"]["annotations"]["rebalancer.dev/lhc"]
    assert '"groupId":"orders"' in written
    # Without sharding the one replica serves every group.
    unsharded = sharded_deps(set())
    unsharded.shards = None
    storage = sharding.ServedDiffBase(unsharded, prefix="rebalancer.dev", key="lhc")
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert "rebalancer.dev/lhc" in patch["metadata"]["annotations"]


def group_body(status: dict[str, Any] | None = None) -> kopf.Body:
    raw: dict[str, Any] = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"namespace": NS, "name": NAME, "generation": 1, "labels": {}},
        "spec": {
            "groupId": "orders",
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": ["orders"]},
            "workload": {"kind": "StatefulSet", "name": "orders"},
        },
    }
    if status is not None:
        raw["status"] = status
    return kopf.Body(raw)


async def test_a_new_group_is_said_served_in_the_write_of_its_first_handling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deps = sharded_deps({SHARD})
    ours = f"pod-a (shard {SHARD} of {SHARDS})"
    writes: list[dict[str, object]] = []

    async def record(api: Any, namespace: str, name: str, status: Any, fields: Any) -> None:
        writes.append(dict(fields))

    monkeypatch.setattr(sharding, "patch_status", record)
    monkeypatch.setattr(validating, "patch_status", record)
    new = group_body()
    # The observer starts before the create handler has written: it leaves servedBy to it.
    await sharding.mark_served(deps, new, NS, NAME, SHARD, None)
    assert writes == []
    await validating.validate(deps, new, NS, NAME)
    [first] = writes
    assert first["servedBy"] == ours and first["observedGeneration"] == 1
    # Handled already (by the replica that held the shard before): the observer says it.
    handled = group_body({"observedGeneration": 1, "servedBy": "pod-b (shard 1 of 4)"})
    await sharding.mark_served(deps, handled, NS, NAME, SHARD, None)
    assert writes[-1] == {"servedBy": ours}
    # And a spec handled again where it is already said to be served writes no servedBy.
    writes.clear()
    await validating.validate(deps, group_body({"servedBy": ours}), NS, NAME)
    assert "servedBy" not in writes[0]
