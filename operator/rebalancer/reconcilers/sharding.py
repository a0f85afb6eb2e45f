"""Serving only this replica's share of the ConsumerGroups (docs/sharding.md).

kopf starts the daemons (observer, rollout planner), the timers and the change handlers of a
group only on the replica that holds its shard: their `when=` filter is `served_filter`, read by
kopf at each watch event of the group. A shard that changes hands brings no event, so the new
holder writes status.servedBy of its groups (reconcilers.shard_takeover): that write is the
event that starts them here and stops them on the replica that held the shard before. A daemon
whose shard lapses without another holder (renewals failing) stops its loop and waits here: the
shard may come back to it, and kopf starts a daemon again only at an event. kopf's finalizer
stays wanted on every replica by the delete handler (handlers.rollouts), which is not filtered:
a replica with no handler wanting it would remove the finalizer the serving one adds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from rebalancer import metrics
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.clients.sharding import ShardHolder
from rebalancer.planning.shards import ShardedGroup, ShardLabelInvalid, hashed_shard, shard_of
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.sleeping import Stopping
from rebalancer.structs.consumer_group import FINALIZER, written_status

logger = logging.getLogger(__name__)
# A daemon whose loop returned while its shard is still held (its resource going) looks again
# this long after.
RETURNED_PAUSE_SECONDS = 1.0
# A daemon waiting for its group's shard to come back looks again this often without a
# wake-up.
LOOK_SECONDS = 30.0
# A serving daemon's waits end at least this often to read the group's label again.
SERVING_LOOK_SECONDS = 10.0


def group_shard(
    shards: int, namespace: str, name: str, labels: Mapping[str, str] | None
) -> tuple[int, str | None]:
    """The group's shard, and the label's problem when its label names no shard: such a
    group is served by the shard of its name, which says why in an Event."""
    try:
        return shard_of(namespace, name, labels, shards), None
    except ShardLabelInvalid as error:
        return hashed_shard(namespace, name, shards), str(error)


def served_here(
    deps: Dependencies | None, namespace: str, name: str, labels: Mapping[str, str] | None
) -> bool:
    """Whether this replica acts on the group: always without sharding."""
    holder = None if deps is None else deps.shards
    if holder is None:
        return True
    shard, _ = group_shard(holder.settings.shards, namespace, name, labels)
    return holder.serves(shard)


class ServedDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's record of a group's last handled spec (an annotation), written by the replica
    that serves the group only. kopf writes it after each spec change even where every
    handler was filtered out, so each replica that does not serve the group would PATCH the
    same annotation for every creation and change; the one that serves it writes it after its
    handlers, and a replica that takes the shard over reads it from there."""

    def __init__(self, deps: Dependencies, *, prefix: str, key: str) -> None:
        super().__init__(prefix=prefix, key=key)
        self._deps = deps

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        meta = body.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        if served_here(self._deps, namespace, meta.get("name", ""), meta.get("labels")):
            super().store(body=body, patch=patch, essence=essence)


class StopByCancel:
    """kopf's `stopped` for an async daemon that kopf cancels the moment it stops it (no
    cancellation backoff, tests/reconcilers/test_sharded_serving.py): the flag is read, and a
    wait is a plain sleep. A wait on kopf's flag itself costs each waiting daemon several tasks
    of its own, with thousands of daemons waiting on every replica."""

    def __init__(self, stopped: Stopping) -> None:
        self.stopped = stopped

    def __bool__(self) -> bool:
        return bool(self.stopped)

    async def wait(self, timeout: float | None = None) -> object:  # noqa: ASYNC109  (kopf's)
        if timeout is None:
            await asyncio.Event().wait()  # until kopf cancels the daemon
        else:
            await asyncio.sleep(max(timeout, 0.0))
        return bool(self)


class ShardStop:
    """kopf's `stopped`, also true once this replica no longer serves `shard`, or the group's
    label has moved it to another shard (`current()`)."""

    def __init__(
        self, stopped: Stopping, holder: ShardHolder, shard: int, current: Callable[[], int]
    ) -> None:
        self.stopped = stopped
        self.holder = holder
        self.shard = shard
        self.current = current

    def __bool__(self) -> bool:
        return (
            bool(self.stopped) or not self.holder.serves(self.shard) or self.current() != self.shard
        )

    async def wait(self, timeout: float | None = None) -> object:  # noqa: ASYNC109  (kopf's)
        end = None if timeout is None else time.monotonic() + timeout
        while not self:
            # Held until its deadline unless a round says otherwise: look again by then.
            step = max(min(self.holder.seconds_left(self.shard), SERVING_LOOK_SECONDS), 0.05)
            if end is not None:
                step = min(step, end - time.monotonic())
                if step <= 0:
                    break
            # kopf's own stop cancels the daemon (StopByCancel): only a round can end this early.
            await self.holder.wait_change(step, self.shard)
        return bool(self)


async def while_served(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    stopped: Stopping,
    run: Callable[[Stopping], Awaitable[None]],
    *,
    marks: bool = False,
) -> None:
    """Run a daemon's loop (`run`) whenever this replica serves the group, until kopf stops
    the daemon; without sharding, once, as before. The daemon that `marks` (the observer's,
    one per group) writes status.servedBy first."""
    holder = deps.shards
    stopped = StopByCancel(stopped)
    if holder is None:
        await run(stopped)
        return
    key = (namespace, name)
    if marks:
        deps.daemons_here.add(key)
        metrics.record_daemons_here(len(deps.daemons_here))
    try:
        await _serve_while_held(deps, holder, body, namespace, name, stopped, run, marks=marks)
    finally:
        if marks:
            deps.daemons_here.discard(key)
            metrics.record_daemons_here(len(deps.daemons_here))


async def _serve_while_held(
    deps: Dependencies,
    holder: ShardHolder,
    body: kopf.Body,
    namespace: str,
    name: str,
    stopped: StopByCancel,
    run: Callable[[Stopping], Awaitable[None]],
    *,
    marks: bool,
) -> None:
    count = holder.settings.shards

    def current() -> int:
        # kopf's Body follows the watch: a label changed meanwhile is read here.
        return group_shard(count, namespace, name, body.get("metadata", {}).get("labels"))[0]

    while not stopped:
        labels = body.get("metadata", {}).get("labels")
        shard, problem = group_shard(count, namespace, name, labels)
        if not holder.serves(shard):
            # The shard lapsed here with no new holder yet (whose servedBy write would make kopf
            # stop this daemon): woken by the round that takes it back. Not by `stopped`: kopf
            # cancels an async daemon as soon as it stops it (no cancellation backoff).
            await holder.wait_change(LOOK_SECONDS, shard)
            continue
        if marks:
            try:
                await mark_served(deps, body, namespace, name, shard, problem)
            except ResourceGone:
                return
        await run(ShardStop(stopped, holder, shard, current))
        if holder.serves(shard):
            await stopped.wait(RETURNED_PAUSE_SECONDS)


async def mark_served(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    shard: int,
    problem: str | None,
) -> None:
    """status.servedBy names this replica; a label that names no shard is told in an Event."""
    holder = deps.shards
    assert holder is not None
    served_by = served_by_text(holder, shard)
    status = written_status(body)
    if problem is not None:
        kopf.warn(body, reason="ShardLabelInvalid", message=problem)
    if status.get("servedBy") == served_by:
        return
    if status.get("observedGeneration") != body.get("metadata", {}).get("generation"):
        # The change handler has yet to handle this spec here: it writes servedBy with it, in
        # the same request (validating.validate), which saves a write per new group.
        return
    await patch_status(deps.kube, namespace, name, status, {"servedBy": served_by})
    logger.info("%s/%s: served by %s", namespace, name, served_by)


def served_by_text(holder: ShardHolder, shard: int) -> str:
    """status.servedBy of a group this replica serves."""
    return f"{holder.identity} (shard {shard} of {holder.settings.shards})"


def served_by_here(
    deps: Dependencies, namespace: str, name: str, labels: Mapping[str, str] | None
) -> str | None:
    """status.servedBy of a group this replica serves; None without sharding."""
    holder = deps.shards
    if holder is None:
        return None
    shard, _ = group_shard(holder.settings.shards, namespace, name, labels)
    return served_by_text(holder, shard)


ShardEntry = dict[int, ShardedGroup]


def index_entry(
    memo: Any, namespace: str, name: str, labels: Mapping[str, str] | None, body: kopf.Body
) -> ShardEntry | None:
    """The group filed under its shard, for reconcilers.shard_takeover; nothing without
    sharding, or for a group on its way out."""
    holder = getattr(getattr(memo, "deps", None), "shards", None)
    if holder is None or body.get("metadata", {}).get("deletionTimestamp"):
        return None
    shard, _ = group_shard(holder.settings.shards, namespace, name, labels)
    served_by = (body.get("status") or {}).get("servedBy")
    return {shard: ShardedGroup(namespace, name, None if served_by is None else str(served_by))}


def finalizer_filter(
    memo: Any = None,
    namespace: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    body: Mapping[str, Any] | None = None,
    **_: Any,
) -> bool:
    """The delete handler's `when=`, which makes kopf want its finalizer: on the replica that
    serves the group, and on every replica once the group carries it. The serving replica adds
    it; the others neither add it too (a PATCH each for every new group, all but one refused)
    nor take it off, which kopf does on a replica where no handler wants it."""
    finalizers = ((body or {}).get("metadata") or {}).get("finalizers") or []
    if FINALIZER in finalizers:
        return True
    return served_filter(memo=memo, namespace=namespace, name=name, labels=labels)


def served_filter(
    memo: Any = None,
    namespace: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    **_: Any,
) -> bool:
    """The `when=` test of the daemons, timers and change handlers (kopf passes them by name,
    with more): `memo.deps` is unset before start-up is done."""
    deps = getattr(memo, "deps", None)
    return served_here(deps, namespace or "default", name or "", labels)
