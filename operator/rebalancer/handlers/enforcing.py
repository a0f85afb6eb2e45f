"""kopf handler for enforced rebalances: a timer that looks at each group's triggers."""

from __future__ import annotations

from typing import Any

import kopf

from rebalancer.reconcilers import enforcing, sharding
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION
from rebalancer.structs.enforce_policy import enforcement_asked


def _asks_for_enforcement(
    spec: kopf.Spec,
    memo: kopf.Memo | None = None,
    namespace: str | None = None,
    name: str | None = None,
    labels: kopf.Labels | None = None,
    **_: Any,
) -> bool:
    # With sharding, only the replica that serves the group (reconcilers.sharding).
    return enforcement_asked(spec) and sharding.served_filter(memo, namespace, name, labels)


# Only for groups with an enforce block: kopf starts and stops the timer as the block comes
# and goes.
@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=3.0,
    initial_delay=3.0,
    idle=0,
    when=_asks_for_enforcement,
)
async def enforce(
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    namespace: str | None,
    name: str | None,
    labels: kopf.Labels,
    memo: kopf.Memo,
    patch: kopf.Patch,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    if not sharding.served_filter(memo, namespace, name, labels):
        return  # the shard moved; the servedBy write stops this timer
    await enforcing.enforce(memo.deps, body, spec, status, namespace or "default", patch, claims)
