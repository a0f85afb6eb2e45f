"""One reconcile of a ConsumerGroup's settings and broker delay: read, plan, write, report.

The handler parses the spec, finds the cluster's gateway and the delay wants of the other
groups on the cluster (a kopf index), calls `reconcile_settings`, then writes the returned
`status.settings`, turns the notices into Events, and looks again after `retry_after`. Every
step is level-based (rebalancer.planning.consumer_settings_plans,
rebalancer.planning.broker_delay) and every write is skipped when it would change nothing, so
reconciling on a timer is cheap and is what starts the second rollout of an assignor migration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from rebalancer.planning.consumer_settings_plans import (
    LIMITS_NOT_READ,
    SettingsInputs,
    SettingsPlan,
    SidecarInputs,
    SidecarPlan,
    plan_settings,
    plan_sidecar,
    settings_status,
    sidecar_status,
)
from rebalancer.planning.consumer_settings_templates import (
    SETTINGS_ENV_ANNOTATION,
    SETTINGS_HASH_ANNOTATION,
    render_template_patch,
    template_hash,
)
from rebalancer.planning.rollout_holds import hold_ops
from rebalancer.planning.sidecar_templates import (
    SIDECAR_CONTAINER,
    SidecarOptions,
    apply_ops,
    sidecar_hash,
)
from rebalancer.structs.broker_configs import ApplyState, BrokerLimits, ConfigOutcome
from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy
from rebalancer.structs.brokers import BrokerProfile, resolve_profile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import WorkloadView

# A lost race with another writer of the workload: read and plan again at once, this many times
# in all (a workload's own controller writes its status right after it is created or scaled, so
# one lost race is common and says nothing); after that, look again this soon.
CONFLICT_ATTEMPTS = 3
RETRY_SECONDS = 2.0


@dataclass(frozen=True)
class SettingsTarget:
    """What one reconcile is about, taken from the parsed spec."""

    namespace: str
    name: str
    uid: str | None
    group_id: str
    bootstrap_servers: tuple[str, ...]
    workload_kind: WorkloadKind
    workload_name: str
    container: str | None
    protocol_choice: ProtocolChoice
    profile: BrokerProfile | None  # spec.kafka.profile unless auto
    settings: SettingsPolicy | None
    delay: BrokerDelayPolicy | None
    # spec.policy.rollout.enabled: settings are delivered only as staggered rollouts.
    staggered: bool = True
    # spec.policy.rollout enabled with gateJoins: the operator opens the pods' join gates (and
    # can hand a Deployment's pods their identity slots there).
    gate_joins: bool = False
    # spec.policy.rollout.parkStatefulSets: the template patch parks a StatefulSet in the same
    # write, so its controller cannot start replacing pods before the planner plans it.
    park: bool = True
    # spec.policy.enforce.sidecar: with inject, the operator adds the sidecar to the template.
    sidecar: SidecarPolicy = field(default_factory=SidecarPolicy)
    sidecar_options: SidecarOptions = field(default_factory=SidecarOptions)
    pattern: str | None = None  # spec.subscription.pattern


@dataclass(frozen=True)
class Notice:
    """An Event for the handler to post."""

    warning: bool
    reason: str
    message: str


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
        notices: list[Notice] = []
        status, retry = await _deliver(kube, gateway, target, previous, observed, limits, notices)
        if retry is None:
            break
    refused = ((status or {}).get("sessionLimits") or {}).get("message")
    if refused and refused != (previous.get("sessionLimits") or {}).get("message"):
        # Once per new refusal; status.settings and the Degraded condition keep saying it.
        notices.append(Notice(True, LIMITS_NOT_READ, str(refused)))
    want = delay_want(target, cluster.cluster_id)
    if want is not None and target.delay is not None:
        delay = await _delay(kube, gateway, target.delay, want, wants, profile, limits, previous)
        status = {**(status or {}), "brokerDelay": delay.status}
        notices += delay.notices
    return SettingsOutcome(status, tuple(notices), retry, want)


def _wants_sidecar_work(
    target: SettingsTarget, previous: Mapping[str, Any], body: Mapping[str, Any] | None
) -> bool:
    return bool(
        target.sidecar.inject
        or previous.get("sidecar")
        or (body is not None and sidecar_hash(body) is not None)
    )


async def _deliver(
    kube: KubernetesApi,
    gateway: AdminGateway,
    target: SettingsTarget,
    previous: Mapping[str, Any],
    observed: Mapping[str, Any],
    limits: BrokerLimits,
    notices: list[Notice],
) -> tuple[dict[str, Any] | None, float | None]:
    """Settings and sidecar in one template write: the sidecar copies the application's
    variables, so rendering it on top of the settings patch makes one new revision (one
    staggered rollout) where two writes would make two."""
    body = await read_workload_body(
        kube, target.namespace, target.workload_kind, target.workload_name
    )
    where = f"{target.workload_kind.value} {target.namespace}/{target.workload_name}"
    sidecar_wanted = _wants_sidecar_work(target, previous, body)
    if target.settings is None and not sidecar_wanted:
        if body is not None and not await _withdraw(kube, target, body, notices):
            return None, RETRY_SECONDS
        return None, None
    if body is None:
        message = f"{where} not found; create it or fix spec.workload.name"
        if target.settings is None:
            return {"sidecar": {"inject": target.sidecar.inject, "message": message}}, None
        return {"applied": False, "message": message}, None
    view = await read_workload(kube, target.namespace, target.workload_kind, target.workload_name)
    plan, ops, on_applied = await _settings_ops(
        kube, target, body, view, previous, observed, limits, where
    )
    sidecar: SidecarPlan | None = None
    if sidecar_wanted:
        # The settings ops were rendered from this body, so they apply (PatchFailed is a bug).
        planned_body = apply_ops(body, ops)
        sidecar = plan_sidecar(
            SidecarInputs(
                policy=target.sidecar,
                group_id=target.group_id,
                bootstrap_servers=target.bootstrap_servers,
                workload_kind=target.workload_kind,
                container=target.container,
                workload=planned_body,
                view=view,
                options=target.sidecar_options,
                pattern=target.pattern,
                staggered=target.staggered,
                park=target.park,
            )
        )
        if sidecar.patch.changes:
            # Both are guarded by the same resourceVersion: one test is enough.
            extra = [op for op in sidecar.patch.ops if op.get("op") != "test" or not ops]
            ops += extra
            on_applied.append(_sidecar_notice(sidecar, where))
    applied_now = True
    retry: float | None = None
    if ops:
        ops += _hold(target, body, ops)
        applied_now = await patch_workload(
            kube, target.namespace, target.workload_kind, target.workload_name, ops
        )
        if applied_now:
            notices.extend(on_applied)
        else:
            retry = RETRY_SECONDS
    status: dict[str, Any] | None = None
    if plan is not None:
        status = await _settings_status(
            gateway, target, plan, body, previous, limits, notices, applied_now
        )
    if sidecar is not None:
        applied = sidecar.carried or (sidecar.patch.changes and applied_now)
        described = sidecar_status(sidecar, applied=bool(applied))
        before = previous.get("sidecar") or {}
        if sidecar.refused and described.get("message") != before.get("message"):
            notices.append(Notice(True, sidecar.reason, str(described["message"])))
        status = {**(status or {}), "sidecar": described}
    return status, retry


async def _settings_ops(
    kube: KubernetesApi,
    target: SettingsTarget,
    body: dict[str, Any],
    view: WorkloadView | None,
    previous: Mapping[str, Any],
    observed: Mapping[str, Any],
    limits: BrokerLimits,
    where: str,
) -> tuple[SettingsPlan | None, list[dict[str, Any]], list[Notice]]:
    """The settings' plan, their template ops and the notices those earn once applied (the
    ConfigMap is written now); with spec.policy.settings removed, the ops that take them out."""
    if target.settings is None:
        ops = _withdrawal_ops(target, body)
        return None, ops, [_REMOVED] if ops else []
    plan = plan_settings(
        SettingsInputs(
            namespace=target.namespace,
            name=target.name,
            uid=target.uid,
            policy=target.settings,
            workload_kind=target.workload_kind,
            container=target.container,
            protocol_choice=target.protocol_choice,
            workload=body,
            view=view,
            previous=previous,
            observed=observed,
            limits=limits,
            staggered=target.staggered,
            gate_joins=target.gate_joins,
            park=target.park,
        )
    )
    if plan.refused:
        return plan, [], []
    assert plan.configmap is not None and plan.rendered is not None
    await apply_configmap(kube, plan.configmap)
    if not plan.patch.changes:
        return plan, [], []
    step = plan.resolved.assignor.step if plan.resolved and plan.resolved.assignor else 0
    migration = f" (assignor migration step {step} of 2)" if step else ""
    applied = Notice(
        False,
        "SettingsApplied",
        f"settings {plan.rendered.hash}{migration} are in the pod template of "
        f"{where}; they reach the pods as a staggered rollout",
    )
    return plan, list(plan.patch.ops), [applied]


_REMOVED = Notice(
    False,
    "SettingsRemoved",
    "spec.policy.settings was removed: the operator's variables, mount and settings "
    "hash leave the pod template (a staggered rollout)",
)


def _sidecar_notice(plan: SidecarPlan, where: str) -> Notice:
    if plan.inject:
        return Notice(
            False,
            "SidecarInjected",
            f"the enforcement sidecar ({SIDECAR_CONTAINER}) is in the pod template of {where}; "
            "it reaches the pods as a staggered rollout",
        )
    return Notice(
        False,
        "SidecarRemoved",
        f"spec.policy.enforce.sidecar.inject is off: the operator's sidecar leaves the pod "
        f"template of {where} (a staggered rollout)",
    )


async def _settings_status(
    gateway: AdminGateway,
    target: SettingsTarget,
    plan: SettingsPlan,
    body: Mapping[str, Any],
    previous: Mapping[str, Any],
    limits: BrokerLimits,
    notices: list[Notice],
    applied_now: bool,
) -> dict[str, Any]:
    if plan.refused:
        status = settings_status(plan, limits, applied=False)
        if status["message"] != previous.get("message"):
            notices.append(Notice(True, "SettingsRefused", status["message"]))
        return status
    assert plan.rendered is not None
    applied = template_hash(body) == plan.rendered.hash or (plan.patch.changes and applied_now)
    group_configs: ConfigOutcome | None = None
    if plan.group_configs:
        group_configs = await alter_group_configs(gateway, target.group_id, plan.group_configs)
        old = (previous.get("groupConfigs") or {}).get("state")
        if group_configs.state is ApplyState.FAILED and old != ApplyState.FAILED.value:
            notices.append(Notice(True, "GroupConfigsFailed", group_configs.message))
    return settings_status(plan, limits, applied=applied, group_configs=group_configs)


def _withdrawal_ops(target: SettingsTarget, body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """spec.policy.settings was removed: what takes out what the operator put in the template."""
    annotations = (body.get("spec", {}).get("template", {}).get("metadata") or {}).get(
        "annotations"
    ) or {}
    if not (SETTINGS_HASH_ANNOTATION in annotations or SETTINGS_ENV_ANNOTATION in annotations):
        return []
    patch = render_template_patch(
        body, None, kind=target.workload_kind, container=target.container, park=target.park
    )
    return list(patch.ops)


def _hold(
    target: SettingsTarget, body: Mapping[str, Any], ops: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """With staggered rollouts, a Deployment is paused in its template write, so that its
    controller does not replace every pod before the planner steps it (rollout_holds)."""
    if not target.staggered or target.workload_kind is not WorkloadKind.DEPLOYMENT:
        return []
    return hold_ops(apply_ops(body, ops))


async def _withdraw(
    kube: KubernetesApi, target: SettingsTarget, body: Mapping[str, Any], notices: list[Notice]
) -> bool:
    """Take the operator's part out of the template; False when the workload changed meanwhile."""
    ops = _withdrawal_ops(target, body)
    if not ops:
        return True
    ops += _hold(target, body, ops)
    if not await patch_workload(
        kube, target.namespace, target.workload_kind, target.workload_name, ops
    ):
        return False
    notices.append(_REMOVED)
    return True


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
            notices.append(Notice(warning, reason, message))
    return _DelayResult(status, tuple(notices))
