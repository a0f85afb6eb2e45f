"""kopf handlers for ConsumerGroup: validate on change, observe with a daemon."""

from __future__ import annotations

import functools
from typing import Any

import kopf

from rebalancer.reconcilers import observing, sharding, validating
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


@kopf.on.resume(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.create(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", when=sharding.served_filter)
async def validate(
    body: kopf.Body, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    await validating.validate(memo.deps, body, namespace or "default", name)


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0)
async def observe(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    # Unfiltered, on every replica: it waits for the group's shard (reconcilers.sharding).
    ns = namespace or "default"
    run = functools.partial(observing.observe, memo.deps, body, ns, name, claims=claims)
    await sharding.while_served(memo.deps, body, ns, name, stopped, run, marks=True)
