"""kopf handlers for a ConsumerGroup's rollouts: the planner's daemon, the hand-back on delete."""

from __future__ import annotations

import functools
from typing import Any

import kopf

from rebalancer.reconcilers import rollouts, sharding
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


# No initial delay: a ConsumerGroup applied with its workload has pods at their gates within
# seconds, and each waits for the daemon's first look.
@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0, when=sharding.served_filter)
async def roll_out(
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
    run = functools.partial(rollouts.roll_out, memo.deps, body, ns, name, claims=claims)
    await sharding.while_served(memo.deps, body, ns, name, stopped, run)


# Not optional: it makes kopf want its finalizer. With sharding, on the serving replica, and on
# every replica once the group carries it (reconcilers.sharding.finalizer_filter), so that the
# others neither add it nor take it off. Every replica that sees the deletion runs it: it is
# level-based.
@kopf.on.delete(GROUP, VERSION, PLURAL, when=sharding.finalizer_filter)
async def hand_back(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    await rollouts.hand_back(memo.deps, body, namespace or "default", name, claims)
