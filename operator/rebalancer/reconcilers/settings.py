"""A ConsumerGroup's consumer settings, injected sidecar and broker delay, reconciled.

`reconcile` finds what delivery needs (the parsed spec, the cluster's shared gateway, the other
groups' delay wants from the index), hands it to `settings_delivery.reconcile_settings`, writes
status.settings and posts the Events. The timer calling it is what starts the second rollout of
an assignor migration and follows the other groups' delay wants; a spec change does not wait
for it.
"""

from __future__ import annotations

import logging

import kopf

from rebalancer.clients.kafka_errors import KafkaRequestFailed, KafkaUnavailable
from rebalancer.clients.kubernetes_api import PermissionDenied
from rebalancer.clients.librdkafka_config import build_client_config
from rebalancer.clients.patching import ResourceGone, patch_status
from rebalancer.clients.resolving import SecretUnavailable, resolve_security
from rebalancer.clients.workload_patching import ConfiguringFailed
from rebalancer.planning.broker_delay import DelayWant, cluster_key_for
from rebalancer.planning.gate_templates import DEFAULT_IMAGE
from rebalancer.planning.sidecar_templates import SidecarOptions
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex, refusal_of
from rebalancer.reconcilers.permissions import report_denied
from rebalancer.reconcilers.settings_delivery import SettingsTarget, reconcile_settings
from rebalancer.structs.brokers import cluster_key
from rebalancer.structs.consumer_group import (
    read_consumer_group,
    written_status,
)
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
    rollout, enforce = spec.policy.rollout, spec.policy.enforce
    status = written_status(body)
    previous = dict(status.get("settings") or {})
    policy = spec.policy
    sidecar_policy = enforce.sidecar
    managed = policy.settings is not None or policy.broker_delay is not None
    if not managed and not sidecar_policy.inject and not previous:
        return
    if refusal_of(body, namespace, claims, deps.hub) is not None:
        return  # not this resource's workload or group to act on: the observer says so
    target = SettingsTarget(
        namespace=namespace,
        name=name,
        uid=body.metadata.uid,
        group_id=spec.group_id,
        bootstrap_servers=spec.kafka.bootstrap_servers,
        workload_kind=spec.workload.kind,
        workload_name=spec.workload.name,
        container=spec.workload.container,
        protocol_choice=policy.protocol,
        profile=spec.kafka.profile.declared,
        settings=policy.settings,
        delay=policy.broker_delay,
        staggered=rollout.enabled,
        gate_joins=rollout.enabled and rollout.gate_joins,
        park=rollout.park_statefulsets,
        sidecar=sidecar_policy,
        # The operator's own image, as for the join gate.
        sidecar_options=SidecarOptions(
            image=rollout.gate_image or deps.settings.gate_image or DEFAULT_IMAGE
        ),
        pattern=spec.subscription.pattern,
    )
    try:
        security = await resolve_security(deps.kube, namespace, spec.kafka)
        config = build_client_config(list(spec.kafka.bootstrap_servers), security)
        config["socket.timeout.ms"] = str(spec.kafka.request_timeout_seconds * 1000)
        key = cluster_key(list(spec.kafka.bootstrap_servers), security)
        gateway = deps.pool.acquire(key, config)
        try:
            outcome = await reconcile_settings(
                deps.kube,
                gateway,
                target,
                previous,
                status.get("group") or {},
                list(wants.get(_known_cluster(body, spec), [])) if wants is not None else [],
            )
        finally:
            deps.pool.release(key)
    except PermissionDenied as error:
        report_denied(deps, body, namespace, name, "settings", error, spec.group_id)
        raise kopf.TemporaryError(f"settings not reconciled: {error}", delay=30) from None
    except (SecretUnavailable, KafkaUnavailable, KafkaRequestFailed, ConfiguringFailed) as error:
        # The observer reports an unreachable cluster or a missing Secret as Degraded already.
        raise kopf.TemporaryError(f"settings not reconciled: {error}", delay=10) from error
    if deps.denials.clear(namespace, name, "settings"):
        deps.hub.wakeup(spec.group_id).set()  # the observer takes the condition back
    for notice in outcome.notices:
        post = kopf.warn if notice.warning else kopf.info
        post(body, reason=notice.reason, message=notice.message)
        if notice.warning:
            logger.warning("%s/%s: %s", namespace, name, notice.message)
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
