"""Shard Leases' I/O: the loop that keeps this replica's share of ConsumerGroups current.

Each shard is a coordination.k8s.io/v1 Lease `<prefix>-shard-<i>` in the operator's namespace,
held by one replica (holderIdentity, its pod's name). Every replica also keeps a Lease
`<prefix>-member-<identity>` that says it is live, so the others know the fair share.
Every write of a Lease that exists carries the resourceVersion this replica read: of two
replicas taking or renewing the same Lease, one write wins and the other gets a conflict, so a
shard never has two holders. A replica acts on a shard only until its last renewal plus the
lease duration minus a margin (planning.shards.serving_deadline), so it lets go before any
other replica may take the Lease, even when its renewals stop getting through.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.leading import ACTIVE_LABEL, MERGE_PATCH
from rebalancer.metrics import record_leader, record_shards
from rebalancer.operator_settings import ShardingSettings
from rebalancer.planning.shards import (
    LeaseView,
    Member,
    ShardMoves,
    member_lease_name,
    plan_shards,
    serving_deadline,
    shard_lease_name,
    shard_of_lease,
    waits_for,
)
from rebalancer.structs.times import read_rfc3339

logger = logging.getLogger(__name__)
# Every shard and member Lease carries it, so one list finds them all.
SHARDS_LABEL = "rebalancer.dev/shards"
# A member Lease's address of its replica's report endpoint (clients.forwarding).
REPORTS_URL_ANNOTATION = "rebalancer.dev/reports-url"
# A member Lease's --shards: replicas of another count wait (planning.shards.waits_for).
SHARD_COUNT_ANNOTATION = "rebalancer.dev/shard-count"
# The shard whose holder leads the cluster-wide parts (docs/sharding.md).
LEADING_SHARD = 0
# How often the leading replica's label is checked against the held shards.
FOLLOW_SECONDS = 1.0
# A crashed replica's member Lease is deleted once it has been expired for this long.
STALE_MEMBER_SECONDS = 60.0


def _micro_time(moment: float) -> str:
    value = datetime.datetime.fromtimestamp(moment, tz=datetime.UTC)
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")


def lease_view(lease: Mapping[str, Any]) -> LeaseView:
    spec = lease.get("spec") or {}
    renewed = read_rfc3339(spec.get("renewTime")) or read_rfc3339(spec.get("acquireTime"))
    return LeaseView(
        holder=str(spec.get("holderIdentity") or ""),
        renewed_at=renewed or 0.0,
        duration_seconds=float(spec.get("leaseDurationSeconds") or 0),
    )


def member_of(lease: Mapping[str, Any]) -> Member:
    metadata = lease.get("metadata") or {}
    count = str((metadata.get("annotations") or {}).get(SHARD_COUNT_ANNOTATION) or "")
    joined = read_rfc3339((lease.get("spec") or {}).get("acquireTime"))
    return Member(
        identity=lease_view(lease).holder,
        shards=int(count) if count.isdigit() else None,
        joined_at=joined if joined is not None else float("inf"),
    )


@dataclass
class LeaseBook:
    """One list of the Leases: each shard's and each member's, as read."""

    shards: dict[int, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)


# Threads of the Lease calls alone: queued in asyncio's default executor behind a burst of
# status writes (six threads on two cores), a renewal came after its own deadline and the
# replica let go of shards it still held, then took them back, moving its groups each time.
LEASE_THREADS = 4
# Between two rounds at least this long, however slow the last one was.
MIN_PAUSE_SECONDS = 0.5

_Result = TypeVar("_Result")


class ShardHolder:
    """Which shards this replica serves, kept current by `run`; read by the handlers."""

    def __init__(self, api: KubernetesApi, settings: ShardingSettings) -> None:
        self.api = api
        self.settings = settings
        self.leases = client.CoordinationV1Api(api.api_client)
        self._lease_io = ThreadPoolExecutor(LEASE_THREADS, thread_name_prefix="shard-leases")
        # Shard -> until when this replica acts on it (its own clock, planning.shards).
        self._deadlines: dict[int, float] = {}
        self._changed = asyncio.Event()
        # One per shard a daemon waits on: a change of one shard wakes its groups' daemons only.
        self._shard_changed: dict[int, asyncio.Event] = {}
        self._members: dict[str, dict[str, Any]] = {}
        self._waiting: list[str] = []

    @property
    def identity(self) -> str:
        return self.settings.identity

    def serves(self, shard: int, now: float | None = None) -> bool:
        deadline = self._deadlines.get(shard)
        return deadline is not None and (time.time() if now is None else now) < deadline

    def peer_urls(self) -> list[str]:
        """The report endpoints of the other live replicas, as of the last round."""
        now = time.time()
        urls = []
        for identity, lease in self._members.items():
            annotations = (lease.get("metadata") or {}).get("annotations") or {}
            url = annotations.get(REPORTS_URL_ANNOTATION)
            if identity != self.identity and url and lease_view(lease).live(now):
                urls.append(str(url).rstrip("/"))
        return urls

    def seconds_left(self, shard: int) -> float:
        """How long this replica still acts on `shard` without another renewal (0: not held)."""
        return max(self._deadlines.get(shard, 0.0) - time.time(), 0.0)

    def held(self) -> frozenset[int]:
        now = time.time()
        return frozenset(shard for shard in self._deadlines if self.serves(shard, now))

    async def wait_change(self, seconds: float, shard: int | None = None) -> None:
        """Until the held set changes (a round took or gave up a shard; only `shard`, given
        one) or `seconds` pass."""
        if shard is None:
            changed = self._changed
        else:
            changed = self._shard_changed.setdefault(shard, asyncio.Event())
        # A timeout on this task, not wait_for's task of its own: every daemon of every group
        # whose shard is held elsewhere waits here, thousands of them on each replica.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await changed.wait()

    def _notify(self, shards: Iterable[int] | None = None) -> None:
        """Wake the waiters of these shards (every shard: None) and of any change."""
        self._changed.set()
        self._changed = asyncio.Event()
        for shard in list(self._shard_changed) if shards is None else shards:
            event = self._shard_changed.pop(shard, None)
            if event is not None:
                event.set()

    async def run(self) -> None:
        """Forever: a round begun every renew_seconds (a slow round does not push the next one
        later). Stopped (cancelled), it gives its shards back and removes its member Lease, so
        the others take them at once."""
        try:
            while True:
                began = time.monotonic()
                try:
                    await self.step()
                except (ApiException, OSError, ValueError) as error:
                    # Kept trying; what is held lapses by its deadline meanwhile.
                    logger.warning("shard Leases in %s: %s", self.settings.namespace, error)
                    self._expire(time.time())
                spent = time.monotonic() - began
                await asyncio.sleep(max(self.settings.renew_seconds - spent, MIN_PAUSE_SECONDS))
        finally:
            await asyncio.shield(self.release_all())
            self._lease_io.shutdown(wait=False)

    async def _call(self, call: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._lease_io, functools.partial(call, *args, **kwargs))

    async def step(self) -> ShardMoves:
        """Read the Leases, keep this replica's member Lease, then renew, take and give back
        shards as planning.shards decides."""
        book = await self._read()
        self._members = book.members
        started = time.time()
        moves = self._plan(book, started)
        before = self.held()
        for shard in moves.release:
            self._deadlines.pop(shard, None)  # stop acting before another may take it
        # Each Lease is its own write: sent together, a round costs one write's time, not one
        # per shard, so a renewal under a slow API server still lands before its deadline.
        kept = moves.renew + moves.take
        written = await asyncio.gather(
            self._keep_member(book, started),
            *(self._write(shard, book.shards.get(shard), started, None) for shard in moves.release),
            *(self._write(s, book.shards.get(s), started, self.identity) for s in kept),
        )
        for shard, held in zip(kept, written[1 + len(moves.release) :], strict=True):
            if held:
                self._deadlines[shard] = serving_deadline(started, self.settings.lease_seconds)
            else:
                self._deadlines.pop(shard, None)
        await self._drop_stale_members(book, started)
        self._report(before, moves)
        return moves

    def _plan(self, book: LeaseBook, now: float) -> ShardMoves:
        shards = self.settings.shards
        live = [member_of(lease) for lease in book.members.values() if lease_view(lease).live(now)]
        waiting = waits_for(self.identity, shards, live)
        if waiting != self._waiting:
            if waiting:
                logger.warning(
                    "replica %s holds no shard while %s, started before it, run with another "
                    "--shards: a group's shard depends on the count, and two counts would serve "
                    "some groups twice; it takes shards once they are gone",
                    self.identity,
                    ", ".join(waiting),
                )
            self._waiting = waiting
        if waiting:
            return ShardMoves(renew=(), take=(), release=tuple(sorted(self._deadlines)))
        # Replicas of another count that joined later wait for this one: not counted.
        members = [member.identity for member in live if member.shards in (None, shards)]
        views = {shard: lease_view(lease) for shard, lease in book.shards.items()}
        return plan_shards(self.identity, shards, views, members, now)

    def _report(self, before: frozenset[int], moves: ShardMoves) -> None:
        after = self.held()
        taken = sorted(after - before)
        lost = sorted(before - after - set(moves.release))
        released = sorted(before & set(moves.release))
        record_shards(len(after), len(taken), len(released), len(lost))
        if taken or lost or released:
            logger.info(
                "replica %s serves shards %s of %d (took %s, gave back %s, lost %s)",
                self.identity,
                sorted(after),
                self.settings.shards,
                taken,
                released,
                lost,
            )
            self._notify([*taken, *released, *lost])

    def _expire(self, now: float) -> None:
        before = frozenset(self._deadlines)
        self._deadlines = {shard: end for shard, end in self._deadlines.items() if now < end}
        if frozenset(self._deadlines) != before:
            self._report(before, ShardMoves(renew=(), take=(), release=()))

    async def _read(self) -> LeaseBook:
        response = await self._call(
            self.leases.list_namespaced_lease,
            self.settings.namespace,
            label_selector=f"{SHARDS_LABEL}={self.settings.prefix}",
            _preload_content=False,
        )
        book = LeaseBook()
        for lease in json.loads(response.data).get("items") or []:
            name = str((lease.get("metadata") or {}).get("name") or "")
            shard = shard_of_lease(self.settings.prefix, name)
            if shard is not None and shard < self.settings.shards:
                book.shards[shard] = lease
            elif name.startswith(f"{self.settings.prefix}-member-"):
                holder = lease_view(lease).holder
                if holder:
                    book.members[holder] = lease
        return book

    async def _keep_member(self, book: LeaseBook, now: float) -> bool:
        name = member_lease_name(self.settings.prefix, self.identity)
        current = book.members.get(self.identity)
        return await self._put(name, current, now, holder=self.identity, member=True)

    async def _write(
        self, shard: int, current: dict[str, Any] | None, now: float, holder: str | None
    ) -> bool:
        """Set the shard Lease's holder (None gives it back); False when another replica's
        write came first (a conflict) or the Lease is gone."""
        return await self._put(shard_lease_name(self.settings.prefix, shard), current, now, holder)

    async def _put(
        self,
        name: str,
        current: dict[str, Any] | None,
        now: float,
        holder: str | None,
        member: bool = False,
    ) -> bool:
        body = _lease_body(name, self.settings, current, now, holder, member)
        try:
            if current is None:
                await self._call(self.leases.create_namespaced_lease, self.settings.namespace, body)
            else:
                await self._call(
                    self.leases.replace_namespaced_lease, name, self.settings.namespace, body
                )
        except ApiException as error:
            if error.status in (404, 409):
                return False
            raise
        return True

    async def _drop_stale_members(self, book: LeaseBook, now: float) -> None:
        for identity, lease in book.members.items():
            view = lease_view(lease)
            if identity == self.identity or now < view.renewed_at + view.duration_seconds:
                continue
            if now < view.renewed_at + view.duration_seconds + STALE_MEMBER_SECONDS:
                continue
            name = str(lease["metadata"]["name"])
            try:
                await self._call(self.leases.delete_namespaced_lease, name, self.settings.namespace)
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    async def release_all(self) -> None:
        """Give back every held shard and remove the member Lease (a clean stop)."""
        held = sorted(self._deadlines)
        self._deadlines.clear()
        self._notify()
        try:
            book = await self._read()
            now = time.time()
            for shard in held:
                lease = book.shards.get(shard)
                if lease is not None and lease_view(lease).holder == self.identity:
                    await self._write(shard, lease, now, holder=None)
            member = book.members.get(self.identity)
            if member is not None:
                await self._call(
                    self.leases.delete_namespaced_lease,
                    str(member["metadata"]["name"]),
                    self.settings.namespace,
                )
        except (ApiException, OSError, ValueError) as error:
            logger.warning("could not give back shards %s: %s (they expire)", held, error)
        record_shards(0, 0, len(held), 0)


def _lease_body(
    name: str,
    settings: ShardingSettings,
    current: Mapping[str, Any] | None,
    now: float,
    holder: str | None,
    member: bool = False,
) -> dict[str, Any]:
    """The Lease to write: renewed when the holder stays, acquired when it changes, with the
    resourceVersion read so that the write fails if another replica wrote in between."""
    metadata: dict[str, Any] = {"name": name, "labels": {SHARDS_LABEL: settings.prefix}}
    if member:
        metadata["annotations"] = {SHARD_COUNT_ANNOTATION: str(settings.shards)}
        if settings.reports_url:
            metadata["annotations"][REPORTS_URL_ANNOTATION] = settings.reports_url
    spec: dict[str, Any] = dict((current or {}).get("spec") or {})
    if current is not None:
        metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
    if holder is None:
        for key in ("holderIdentity", "renewTime", "acquireTime"):
            spec.pop(key, None)
    else:
        if spec.get("holderIdentity") != holder:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec["holderIdentity"] = holder
        spec["renewTime"] = _micro_time(now)
    spec["leaseDurationSeconds"] = settings.lease_seconds
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


async def follow_shard_leadership(holder: ShardHolder) -> None:
    """Forever: the holder of shard 0 leads; on a change relabel this pod (the Services
    select rebalancer.dev/active=true), set rebalancer_leader and log it."""
    leading: bool | None = None
    while True:
        now_leading = holder.serves(LEADING_SHARD)
        if now_leading != leading:
            try:
                settings = holder.settings
                await _label_pod(holder.api, settings.pod_name, settings.pod_namespace, now_leading)
            except (ApiException, OSError) as error:
                logger.warning("could not label this replica's pod: %s", error)
                await holder.wait_change(FOLLOW_SECONDS)
                continue
            record_leader(now_leading)
            logger.info(
                "replica %s %s",
                holder.identity,
                "holds shard 0: it leads and takes member reports"
                if now_leading
                else "does not hold shard 0: it serves its shards only",
            )
            leading = now_leading
        await holder.wait_change(FOLLOW_SECONDS)


async def _label_pod(
    api: KubernetesApi, pod_name: str | None, pod_namespace: str | None, active: bool
) -> None:
    if pod_name is None or pod_namespace is None:
        return
    patch = {"metadata": {"labels": {ACTIVE_LABEL: "true" if active else "false"}}}
    await asyncio.to_thread(
        api.core.patch_namespaced_pod, pod_name, pod_namespace, patch, _content_type=MERGE_PATCH
    )
