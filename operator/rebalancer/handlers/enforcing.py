"""kopf handler for enforced rebalances: a timer that looks at each group's triggers."""

from __future__ import annotations

from typing import Any

import kopf

from rebalancer.reconcilers import enforcing
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


@kopf.timer(GROUP, VERSION, PLURAL, interval=3.0, initial_delay=3.0, idle=0)
async def enforce(
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    namespace: str | None,
    memo: kopf.Memo,
    patch: kopf.Patch,
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    await enforcing.enforce(memo.deps, body, spec, status, namespace or "default", patch, claims)
