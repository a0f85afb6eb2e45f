"""One reconcile of a ConsumerGroup's settings and broker delay: read, plan, write, report.

The handler parses the spec, finds the cluster's gateway and the delay wants of the other
groups on the cluster (a kopf index), calls `reconcile_settings`, then writes the returned
`status.settings`, turns the notices into Events, and looks again after `retry_after`. The
delivery reads the workload, takes its writes and what status says of them from
rebalancer.planning.settings_deliveries, and makes them in between. Every step is level-based
(rebalancer.planning.consumer_settings_plans, rebalancer.planning.broker_delay) and every write
is skipped when it would change nothing, so reconciling on a timer is cheap and is what starts
the second rollout of an assignor migration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.clients.broker_configs import (
    alter_broker_config,
    alter_group_configs,
    read_broker_limits,
)
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi, PermissionDenied
from rebalancer.clients.rolling import read_workload
from rebalancer.clients.strimzi_configs import set_strimzi_delay
from rebalancer.clients.workload_patching import (
    ConfiguringFailed,
    apply_configmap,
    patch_workload,
    read_workload_body,
)
from rebalancer.planning.broker_delay import (
    DelayAction,
    DelayWant,
    cluster_key_for,
    decide_cluster_delay,
    delay_status,
    plan_delay,
    strimzi_config_patch,
)
from rebalancer.planning.consumer_settings_plans import LIMITS_NOT_READ
from rebalancer.planning.notices import Notice
from rebalancer.planning.settings_deliveries import (
    Delivered,
    DeliveryInputs,
    SettingsTarget,
    delivered,
    plan_delivery,
    wants_sidecar_work,
)
from rebalancer.structs.broker_configs import ApplyState, BrokerLimits, ConfigOutcome
from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy
from rebalancer.structs.brokers import BrokerProfile, resolve_profile

__all__ = ["SettingsOutcome", "SettingsTarget", "delay_want", "reconcile_settings"]

# A lost race with another writer of the workload: read and plan again at once, this many times
# in all (a workload's own controller writes its status right after it is created or scaled, so
# one lost race is common and says nothing); after that, look again this soon.
CONFLICT_ATTEMPTS = 3
RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class SettingsOutcome:
    status: dict[str, Any] | None  # status.settings; None: nothing is managed
    notices: tuple[Notice, ...] = ()
    retry_after: float | None = None
    want: DelayWant | None = None  # this group's delay want, keyed by its cluster


def delay_want(target: SettingsTarget, cluster_id: str | None) -> DelayWant | None:
    if target.delay is None:
        return None
    key = cluster_key_for(target.bootstrap_servers, cluster_id)
    return DelayWant(
        target.namespace,
        target.name,
        key,
        target.delay.delay_ms,
        target.delay.max_delay_ms,
        target.delay.mode,
    )


async def reconcile_settings(
    kube: KubernetesApi,
    gateway: AdminGateway,
    target: SettingsTarget,
    previous: Mapping[str, Any],
    observed: Mapping[str, Any],
    wants: Sequence[DelayWant] = (),
) -> SettingsOutcome:
    """Deliver the settings, the sidecar and the delay decision; see the module docstring.

    `previous`: status.settings; `observed`: status.group; `wants`: the delay wants of the
    cluster's groups as the index holds them (this group's own is added if the index lags).
    Raises KafkaUnavailable when the cluster cannot be reached (the handler retries).
    """
    cluster = await gateway.describe_cluster()
    profile = resolve_profile(target.profile, gateway.profile)
    limits = await read_broker_limits(gateway)
    for _ in range(CONFLICT_ATTEMPTS):
        # A lost attempt wrote nothing to the template: what it would have announced is dropped.
        outcome, retry = await _deliver(kube, gateway, target, previous, observed, limits)
        if retry is None:
            break
    status = outcome.status
    notices = list(outcome.notices)
    refused = ((status or {}).get("sessionLimits") or {}).get("message")
    if refused and refused != (previous.get("sessionLimits") or {}).get("message"):
        # Once per new refusal; status.settings and the Degraded condition keep saying it.
        notices.append(Notice(LIMITS_NOT_READ, str(refused), warning=True))
    want = delay_want(target, cluster.cluster_id)
    if want is not None and target.delay is not None:
        delay = await _delay(kube, gateway, target.delay, want, wants, profile, limits, previous)
        status = {**(status or {}), "brokerDelay": delay.status}
        notices += delay.notices
    return SettingsOutcome(status, tuple(notices), retry, want)


async def _deliver(
    kube: KubernetesApi,
    gateway: AdminGateway,
    target: SettingsTarget,
    previous: Mapping[str, Any],
    observed: Mapping[str, Any],
    limits: BrokerLimits,
) -> tuple[Delivered, float | None]:
    """Read the workload, decide the delivery (planning.settings_deliveries), write it: the
    ConfigMap, the template, the group configs; then what status says of it."""
    body = await read_workload_body(
        kube, target.namespace, target.workload_kind, target.workload_name
    )
    view = None
    if body is not None and (
        target.settings is not None or wants_sidecar_work(target, previous, body)
    ):
        view = await read_workload(
            kube, target.namespace, target.workload_kind, target.workload_name
        )
    inputs = DeliveryInputs(target, body, view, previous, observed, limits)
    delivery = plan_delivery(inputs)
    if delivery.configmap is not None:
        await apply_configmap(kube, delivery.configmap)
    applied_now = True
    if delivery.ops:
        applied_now = await patch_workload(
            kube, target.namespace, target.workload_kind, target.workload_name, delivery.ops
        )
    group_configs: ConfigOutcome | None = None
    if delivery.group_configs:
        group_configs = await alter_group_configs(gateway, target.group_id, delivery.group_configs)
    outcome = delivered(inputs, delivery, applied_now, group_configs)
    return outcome, RETRY_SECONDS if outcome.template_lost else None


@dataclass(frozen=True)
class _DelayResult:
    status: dict[str, Any]
    notices: tuple[Notice, ...]


async def _delay(
    kube: KubernetesApi,
    gateway: AdminGateway,
    policy: BrokerDelayPolicy,
    want: DelayWant,
    wants: Sequence[DelayWant],
    profile: BrokerProfile | None,
    limits: BrokerLimits,
    previous: Mapping[str, Any],
) -> _DelayResult:
    mates = [
        other for other in wants if other.cluster == want.cluster and other.group != want.group
    ]
    decision = decide_cluster_delay([*mates, want])
    assert decision is not None
    current = limits.initial_rebalance_delay_ms
    plan = plan_delay(policy, decision, want, profile, current)
    before = previous.get("brokerDelay") or {}
    changed = (before.get("clusterMs"), before.get("action"), before.get("reason")) != (
        decision.value_ms,
        plan.action.value,
        plan.reason,
    )
    notices: list[Notice] = []
    outcome: str | None = None
    reason, message = plan.reason, plan.message
    try:
        if plan.action is DelayAction.PATCH_STRIMZI and policy.strimzi is not None:
            namespace = policy.strimzi.namespace or want.namespace
            change = await set_strimzi_delay(
                kube, namespace, policy.strimzi.name, strimzi_config_patch(plan.value_ms)
            )
            outcome = "patched" if change.changed else "unchanged"
            changed = changed or change.changed
        elif plan.action is DelayAction.ALTER_BROKER and plan.config_key is not None:
            result = await alter_broker_config(gateway, plan.config_key, str(plan.value_ms))
            outcome = result.state.value
            if result.state is ApplyState.FAILED:
                reason, message = "DelayFailed", result.message
    except (ConfiguringFailed, PermissionDenied) as error:
        # Kept in status.settings.brokerDelay, whose condition names it (a refused Strimzi
        # resource must not stop the settings from being delivered).
        reason, message, outcome = "DelayFailed", str(error), ApplyState.FAILED.value
    in_force = (limits.initial_rebalance_delay_ms, limits.initial_rebalance_delay_source)
    status = delay_status(decision, want, plan, outcome, in_force)
    status.update(reason=reason, message=message)
    if changed or reason != before.get("reason"):
        warning = reason in ("DelayRefused", "DelayFailed")
        if plan.action is not DelayAction.NONE or warning:
            notices.append(Notice(reason, message, warning=warning))
    return _DelayResult(status, tuple(notices))
