"""kopf handlers for consumer settings, the injected sidecar and the broker delay: the index of
every group's delay want, and a reconcile on change and on a timer
(rebalancer.reconcilers.settings).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from rebalancer.reconcilers import settings, sharding
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.reconcilers.settings import DelayWantIndex, DelayWantsByCluster
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION
from rebalancer.structs.consumer_settings_policy import settings_asked

RECONCILE_SECONDS = 30.0
logger = logging.getLogger(__name__)


@kopf.index(GROUP, VERSION, PLURAL)
def delay_wants(
    body: kopf.Body, namespace: str | None, name: str, **_: Any
) -> DelayWantsByCluster | None:
    """Every group's broker-delay want, by cluster: the delay is decided per cluster."""
    return settings.delay_want(body, namespace or "default", name)


@kopf.on.resume(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.create(GROUP, VERSION, PLURAL, when=sharding.served_filter)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec", when=sharding.served_filter)
async def settings_changed(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    delay_wants: DelayWantIndex | None = None,  # kopf passes every index
    claims: ClaimIndex | None = None,
    **_: Any,
) -> None:
    await settings.reconcile(memo.deps, body, namespace or "default", name, delay_wants, claims)


def _asks_for_settings(
    spec: kopf.Spec,
    status: kopf.Status,
    memo: kopf.Memo | None = None,
    namespace: str | None = None,
    name: str | None = None,
    labels: kopf.Labels | None = None,
    **_: Any,
) -> bool:
    # With sharding, only the replica that serves the group (reconcilers.sharding).
    return settings_asked(spec, status) and sharding.served_filter(memo, namespace, name, labels)


# Only for groups with settings to deliver or take back (the reconcile returns at once for the
# others): kopf starts and stops the timer as the spec and status change.
@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=RECONCILE_SECONDS,
    initial_delay=RECONCILE_SECONDS,
    when=_asks_for_settings,
)
async def settings_followed(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    delay_wants: DelayWantIndex | None = None,  # kopf passes every index
    claims: ClaimIndex | None = None,
    labels: kopf.Labels | None = None,
    **_: Any,
) -> None:
    if not sharding.served_filter(memo, namespace, name, labels):
        return  # the shard moved; the servedBy write stops this timer
    try:
        await settings.reconcile(memo.deps, body, namespace or "default", name, delay_wants, claims)
    except kopf.TemporaryError as error:
        logger.info("%s/%s: %s", namespace, name, error)  # the next tick tries again
