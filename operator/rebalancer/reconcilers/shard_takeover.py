"""Taking up the groups of a shard this replica has just taken (docs/sharding.md).

kopf starts a group's daemons on the replica whose filter passes when a watch event of the
group arrives; a shard that changes hands brings no event of its own. So the new holder writes
status.servedBy of each group of the shard, which is that event on every replica: kopf starts
the daemons here and stops those of the replica that held it before. The groups come from the
shard index (handlers.groups), which every replica keeps. A look every LOOK_SECONDS also takes
up a held shard's groups whose write failed or whose status names another replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

from rebalancer.clients.patching import write_served_by
from rebalancer.clients.sharding import ShardHolder
from rebalancer.planning.shards import ShardedGroup, TakeUp, groups_to_take_up
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.sharding import served_by_text

logger = logging.getLogger(__name__)
LOOK_SECONDS = 30.0
# status.servedBy writes in flight at once: a shard of a few hundred groups is taken up in
# seconds without a burst that would crowd the Lease renewals out of the API server.
WRITES_AT_ONCE = 8

ShardIndex = Mapping[int, Iterable[ShardedGroup]]


async def follow_takeovers(deps: Dependencies, index: ShardIndex) -> None:
    """Forever: take up the groups of each shard as this replica takes it, and look again at
    the held shards every LOOK_SECONDS."""
    holder = deps.shards
    assert holder is not None
    # Held at start: kopf's first listing comes after and starts their daemons itself.
    seen = holder.held()
    while True:
        await holder.wait_change(LOOK_SECONDS)
        held = holder.held()
        for shard in sorted(held):
            await take_up_shard(deps, holder, shard, index, just_taken=shard not in seen)
        seen = held


async def take_up_shard(
    deps: Dependencies, holder: ShardHolder, shard: int, index: ShardIndex, *, just_taken: bool
) -> int:
    """Write servedBy of the shard's groups that need it; how many were written."""
    ours = served_by_text(holder, shard)
    wanted = groups_to_take_up(
        list(index.get(shard, ())), ours, deps.daemons_here, just_taken=just_taken
    )
    if not wanted:
        return 0
    gate = asyncio.Semaphore(WRITES_AT_ONCE)

    async def write(one: TakeUp) -> bool:
        async with gate:
            if not holder.serves(shard):
                return False
            return await write_served_by(
                deps.kube, one.namespace, one.name, ours, clear_first=one.clear_first
            )

    written = sum(await asyncio.gather(*(write(one) for one in wanted)))
    logger.info("shard %d: %d of %d groups taken up by %s", shard, written, len(wanted), ours)
    return written
