"""kopf handlers for ConsumerGroup: validate on change, observe with a daemon."""

from __future__ import annotations

from typing import Any

import kopf

from rebalancer.reconcilers import observing, validating
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
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
    await observing.observe(memo.deps, body, namespace or "default", name, stopped, claims)
