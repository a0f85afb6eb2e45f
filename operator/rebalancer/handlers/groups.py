"""kopf handlers for ConsumerGroup: validate on change, observe with a daemon."""

from __future__ import annotations

import functools
from typing import Any

import kopf

from rebalancer.reconcilers import observing, sharding, validating
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.reconcilers.sharding import ShardEntry
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


@kopf.index(GROUP, VERSION, PLURAL)
def groups_by_shard(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    labels: kopf.Labels,
    memo: kopf.Memo,
    **_: Any,
) -> ShardEntry | None:
    """With sharding, every group under its shard: the groups a replica takes up with a shard."""
    return sharding.index_entry(memo, namespace or "default", name, labels, body)


@kopf.on.resume(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.create(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", when=sharding.served_filter)
async def validate(
    body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    await validating.validate(memo.deps, body, namespace or "default", name)


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0, when=sharding.served_filter)
async def observe(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    # With sharding, on the replica that holds the group's shard only (reconcilers.sharding).
    ns = namespace or "default"
    run = functools.partial(observing.observe, memo.deps, body, ns, name, claims=claims)
    await sharding.while_served(memo.deps, body, ns, name, stopped, run, marks=True)
