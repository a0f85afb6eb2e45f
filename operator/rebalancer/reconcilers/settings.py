"""A ConsumerGroup's consumer settings, injected sidecar and broker delay, reconciled.

`reconcile` finds what delivery needs (the parsed spec, the cluster's shared gateway, the other
groups' delay wants from the index), hands it to `settings_delivery.reconcile_settings`, writes
status.settings and posts the Events. The timer calling it is what starts the second rollout of
an assignor migration and follows the other groups' delay wants; a spec change does not wait
for it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import kopf

from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import KafkaRequestFailed, KafkaUnavailable
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.librdkafka_config import build_client_config
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.clients.resolving import SecretUnavailable, resolve_security
from rebalancer.clients.workload_patching import ConfiguringFailed
from rebalancer.planning.broker_delay import DelayWant, cluster_key_for
from rebalancer.planning.gate_templates import DEFAULT_IMAGE
from rebalancer.planning.notices import Notice
from rebalancer.planning.settings_deliveries import SettingsTarget, settings_target
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.group_configs import STATUS_KEY, reconcile_group_configs
from rebalancer.reconcilers.ownership import ClaimIndex, refusal_of
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.reconcilers.settings_delivery import SettingsOutcome, reconcile_settings
from rebalancer.structs.brokers import cluster_key
from rebalancer.structs.consumer_group import (
    read_consumer_group,
    written_status,
)
from rebalancer.structs.consumer_settings_policy import settings_asked
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import ConsumerGroupSpec

logger = logging.getLogger(__name__)
# The kopf index of every group's broker-delay want, by cluster, and one group's entry in it.
DelayWantIndex = kopf.Index[str, DelayWant]
DelayWantsByCluster = dict[str, DelayWant]


def _known_cluster(body: kopf.Body, spec: ConsumerGroupSpec) -> str:
    """The cluster key the last reconcile found (the Kafka cluster id), else the bootstrap list."""
    delay = (written_status(body).get("settings") or {}).get("brokerDelay") or {}
    known = delay.get("cluster")
    return str(known) if known else cluster_key_for(spec.kafka.bootstrap_servers)


def delay_want(body: kopf.Body, namespace: str, name: str) -> DelayWantsByCluster | None:
    """Every group's broker-delay want, by cluster: the delay is decided per cluster."""
    try:
        spec = read_consumer_group(body, namespace=namespace).spec
    except SpecInvalid:
        return None
    delay = spec.policy.broker_delay
    if delay is None:
        return None
    cluster = _known_cluster(body, spec)
    want = DelayWant(
        namespace or "default", name, cluster, delay.delay_ms, delay.max_delay_ms, delay.mode
    )
    return {cluster: want}


async def reconcile(
    deps: Dependencies,
    body: kopf.Body,
    namespace: str,
    name: str,
    wants: DelayWantIndex | None,
    claims: ClaimIndex | None,
) -> None:
    """Deliver the group's consumer settings, sidecar and broker delay, and write
    status.settings; kopf.TemporaryError when it must be tried again."""
    try:
        spec = read_consumer_group(body, namespace=namespace).spec
    except SpecInvalid:
        return  # validate() reports it
    status = written_status(body)
    previous = dict(status.get("settings") or {})
    policy = spec.policy
    if not settings_asked(body.get("spec") or {}, status):
        return  # the timer is not even started for such a group (handlers.settings)
    if refusal_of(body, namespace, claims, deps.hub) is not None:
        return  # not this resource's workload or group to act on: the observer says so
    # The operator's own image, as for the join gate.
    image = policy.rollout.gate_image or deps.settings.gate_image or DEFAULT_IMAGE
    target = settings_target(spec, namespace, name, body.metadata.uid, image)
    others = list(wants.get(_known_cluster(body, spec), [])) if wants is not None else []
    try:
        outcome = await _deliver(deps, spec, target, previous, status.get("group") or {}, others)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "settings", error, spec.group_id)
        raise kopf.TemporaryError(f"settings not reconciled: {error}", delay=30) from None
    except (SecretUnavailable, KafkaUnavailable, KafkaRequestFailed, ConfiguringFailed) as error:
        # The observer reports an unreachable cluster or a missing Secret as Degraded already.
        raise kopf.TemporaryError(f"settings not reconciled: {error}", delay=10) from error
    if deps.denials.clear(namespace, name, "settings"):
        deps.hub.wakeup(spec.group_id).set()  # the observer takes the condition back
    _post(body, namespace, name, outcome.notices)
    settings = outcome.status or {}
    if settings != previous:
        try:
            await patch_status(deps.kube, namespace, name, status, {"settings": settings})
        except ResourceGone:
            return
        except PermissionDenied as error:
            report_denied(deps, body, namespace, name, "status", error)
            raise kopf.TemporaryError(f"settings status not written: {error}", delay=30) from None
        deps.rollout_wakeup(namespace, name).set()
    if outcome.retry_after is not None:
        raise kopf.TemporaryError("the workload changed meanwhile", delay=outcome.retry_after)


async def _deliver(
    deps: Dependencies,
    spec: ConsumerGroupSpec,
    target: SettingsTarget,
    previous: Mapping[str, Any],
    observed: Mapping[str, Any],
    wants: Sequence[DelayWant],
) -> SettingsOutcome:
    """reconcile_settings through the cluster's shared gateway."""
    security = await resolve_security(deps.kube, target.namespace, spec.kafka)
    config = build_client_config(list(spec.kafka.bootstrap_servers), security)
    config["socket.timeout.ms"] = str(spec.kafka.request_timeout_seconds * 1000)
    key = cluster_key(list(spec.kafka.bootstrap_servers), security)
    gateway = deps.pool.acquire(key, config)
    try:
        outcome = await reconcile_settings(deps.kube, gateway, target, previous, observed, wants)
        return await with_group_configs(gateway, spec, previous, outcome)
    finally:
        deps.pool.release(key)


async def with_group_configs(
    gateway: AdminGateway,
    spec: ConsumerGroupSpec,
    previous: Mapping[str, Any],
    outcome: SettingsOutcome,
) -> SettingsOutcome:
    """The settings outcome with spec.policy.groupConfigs set live and reported beside it."""
    wanted = spec.policy.group_configs
    if wanted is None:
        return outcome
    live = await reconcile_group_configs(
        gateway,
        spec.group_id,
        wanted,
        previous.get(STATUS_KEY) or {},
        settings_managed=spec.policy.settings is not None,
    )
    status = {**(outcome.status or {}), STATUS_KEY: live.status}
    return replace(outcome, status=status, notices=outcome.notices + live.notices)


def _post(body: kopf.Body, namespace: str, name: str, notices: Sequence[Notice]) -> None:
    """The delivery's Events; a warning is logged too."""
    for notice in notices:
        post = kopf.warn if notice.warning else kopf.info
        post(body, reason=notice.reason, message=notice.message)
        if notice.warning:
            logger.warning("%s/%s: %s", namespace, name, notice.message)
