"""What one delivery of a group's settings and sidecar writes, decided from the workload as
read (reconcilers.settings_delivery reads, calls these, writes, then reports).

Settings and sidecar go in one template write: the sidecar copies the application's variables,
so rendering it on top of the settings patch makes one new revision (one staggered rollout)
where two writes would make two."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.planning.consumer_settings_plans import (
    Body,
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
from rebalancer.planning.notices import Notice
from rebalancer.planning.rollout_holds import hold_ops
from rebalancer.planning.sidecar_templates import (
    SIDECAR_CONTAINER,
    SidecarOptions,
    apply_ops,
    sidecar_hash,
)
from rebalancer.structs.broker_configs import ApplyState, BrokerLimits, ConfigOutcome
from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.specs import ConsumerGroupSpec, ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import WorkloadView

Ops = list[dict[str, Any]]


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

    @property
    def where(self) -> str:
        return f"{self.workload_kind.value} {self.namespace}/{self.workload_name}"


def settings_target(
    spec: ConsumerGroupSpec, namespace: str, name: str, uid: str | None, image: str
) -> SettingsTarget:
    """What a reconcile of the settings is about, from the parsed spec; `image` is the
    operator's own, which the injected sidecar runs, as the join gate does."""
    policy = spec.policy
    rollout = policy.rollout
    return SettingsTarget(
        namespace=namespace,
        name=name,
        uid=uid,
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
        sidecar=policy.enforce.sidecar,
        sidecar_options=SidecarOptions(image=image),
        pattern=spec.subscription.pattern,
    )


@dataclass(frozen=True)
class DeliveryInputs:
    """What a delivery is decided from: the target, the workload as read, and status."""

    target: SettingsTarget
    body: Body | None  # the workload's manifest; None: it does not exist
    view: WorkloadView | None
    previous: Mapping[str, Any]  # status.settings
    observed: Mapping[str, Any]  # status.group
    limits: BrokerLimits


@dataclass(frozen=True)
class Delivery:
    """The writes one delivery makes, in order, and what status to report of them."""

    settings: SettingsPlan | None = None
    sidecar: SidecarPlan | None = None
    configmap: Body | None = None  # the settings' ConfigMap, written first
    ops: Ops = field(default_factory=list)  # one JSON patch of the workload's template
    on_applied: tuple[Notice, ...] = ()  # told once the template write went in
    # Reported as is, without any write (the workload is missing).
    status: dict[str, Any] | None = None

    @property
    def group_configs(self) -> dict[str, str]:
        """KIP-848 group configs to alter once the template is written."""
        if self.settings is None or self.settings.refused:
            return {}
        return self.settings.group_configs


@dataclass(frozen=True)
class Delivered:
    """What the reconciler reports of a delivery once its writes are done."""

    status: dict[str, Any] | None
    notices: tuple[Notice, ...] = ()
    template_lost: bool = False  # another writer changed the workload first: plan again


REMOVED = Notice(
    "SettingsRemoved",
    "spec.policy.settings was removed: the operator's variables, mount and settings "
    "hash leave the pod template (a staggered rollout)",
)


def wants_sidecar_work(
    target: SettingsTarget, previous: Mapping[str, Any], body: Mapping[str, Any] | None
) -> bool:
    """Whether the sidecar is to be injected, or was and is to be taken out."""
    return bool(
        target.sidecar.inject
        or previous.get("sidecar")
        or (body is not None and sidecar_hash(body) is not None)
    )


def plan_delivery(inputs: DeliveryInputs) -> Delivery:
    """The settings' ConfigMap and the one template write that carries settings and sidecar;
    with spec.policy.settings removed, the ops that take them out."""
    target, body = inputs.target, inputs.body
    sidecar_wanted = wants_sidecar_work(target, inputs.previous, body)
    if body is None:
        if target.settings is None and not sidecar_wanted:
            return Delivery()
        message = f"{target.where} not found; create it or fix spec.workload.name"
        if target.settings is None:
            return Delivery(
                status={"sidecar": {"inject": target.sidecar.inject, "message": message}}
            )
        return Delivery(status={"applied": False, "message": message})
    plan, ops, on_applied = _settings_ops(inputs)
    sidecar: SidecarPlan | None = None
    if sidecar_wanted:
        sidecar = plan_sidecar(_sidecar_inputs(target, apply_ops(body, ops), inputs.view))
        if sidecar.patch.changes:
            # Both are guarded by the same resourceVersion: one test is enough.
            ops += [op for op in sidecar.patch.ops if op.get("op") != "test" or not ops]
            on_applied.append(_sidecar_notice(sidecar, target.where))
    if ops:
        ops += _hold(target, body, ops)
    configmap = plan.configmap if plan is not None and not plan.refused else None
    return Delivery(plan, sidecar, configmap, ops, tuple(on_applied))


def delivered(
    inputs: DeliveryInputs,
    delivery: Delivery,
    applied_now: bool,
    group_configs: ConfigOutcome | None,
) -> Delivered:
    """status.settings and the Events of a delivery whose template write went in or not
    (`applied_now`; True when there was none) and whose group configs were altered."""
    if delivery.status is not None:
        return Delivered(delivery.status)
    notices = list(delivery.on_applied) if applied_now else []
    status: dict[str, Any] | None = None
    if delivery.settings is not None:
        status, said = _settings_status(inputs, delivery.settings, applied_now, group_configs)
        notices += said
    sidecar = delivery.sidecar
    if sidecar is not None:
        applied = sidecar.carried or (sidecar.patch.changes and applied_now)
        described = sidecar_status(sidecar, applied=bool(applied))
        before = inputs.previous.get("sidecar") or {}
        if sidecar.refused and described.get("message") != before.get("message"):
            notices.append(Notice(sidecar.reason, str(described["message"]), warning=True))
        status = {**(status or {}), "sidecar": described}
    return Delivered(status, tuple(notices), template_lost=not applied_now)


def _settings_ops(inputs: DeliveryInputs) -> tuple[SettingsPlan | None, Ops, list[Notice]]:
    """The settings' plan, their template ops and the notices those earn once applied."""
    target, body = inputs.target, inputs.body
    assert body is not None  # plan_delivery returned before when the workload is missing
    if target.settings is None:
        ops = withdrawal_ops(target, body)
        return None, ops, [REMOVED] if ops else []
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
            view=inputs.view,
            previous=inputs.previous,
            observed=inputs.observed,
            limits=inputs.limits,
            staggered=target.staggered,
            gate_joins=target.gate_joins,
            park=target.park,
        )
    )
    if plan.refused or not plan.patch.changes:
        return plan, [], []
    assert plan.rendered is not None
    step = plan.resolved.assignor.step if plan.resolved and plan.resolved.assignor else 0
    migration = f" (assignor migration step {step} of 2)" if step else ""
    applied = Notice(
        "SettingsApplied",
        f"settings {plan.rendered.hash}{migration} are in the pod template of "
        f"{target.where}; they reach the pods as a staggered rollout",
    )
    return plan, list(plan.patch.ops), [applied]


def _sidecar_inputs(target: SettingsTarget, body: Body, view: WorkloadView | None) -> SidecarInputs:
    return SidecarInputs(
        policy=target.sidecar,
        group_id=target.group_id,
        bootstrap_servers=target.bootstrap_servers,
        workload_kind=target.workload_kind,
        container=target.container,
        workload=body,
        view=view,
        options=target.sidecar_options,
        pattern=target.pattern,
        staggered=target.staggered,
        park=target.park,
        streams=target.protocol_choice is ProtocolChoice.STREAMS,
    )


def _sidecar_notice(plan: SidecarPlan, where: str) -> Notice:
    if plan.inject:
        return Notice(
            "SidecarInjected",
            f"the enforcement sidecar ({SIDECAR_CONTAINER}) is in the pod template of {where}; "
            "it reaches the pods as a staggered rollout",
        )
    return Notice(
        "SidecarRemoved",
        f"spec.policy.enforce.sidecar.inject is off: the operator's sidecar leaves the pod "
        f"template of {where} (a staggered rollout)",
    )


def _settings_status(
    inputs: DeliveryInputs,
    plan: SettingsPlan,
    applied_now: bool,
    group_configs: ConfigOutcome | None,
) -> tuple[dict[str, Any], list[Notice]]:
    previous, limits = inputs.previous, inputs.limits
    if plan.refused:
        status = settings_status(plan, limits, applied=False)
        if status["message"] != previous.get("message"):
            return status, [Notice("SettingsRefused", status["message"], warning=True)]
        return status, []
    assert plan.rendered is not None and inputs.body is not None
    in_template = template_hash(inputs.body) == plan.rendered.hash
    applied = in_template or (plan.patch.changes and applied_now)
    notices: list[Notice] = []
    if group_configs is not None:
        old = (previous.get("groupConfigs") or {}).get("state")
        if group_configs.state is ApplyState.FAILED and old != ApplyState.FAILED.value:
            notices.append(Notice("GroupConfigsFailed", group_configs.message, warning=True))
    status = settings_status(plan, limits, applied=applied, group_configs=group_configs)
    return status, notices


def withdrawal_ops(target: SettingsTarget, body: Mapping[str, Any]) -> Ops:
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


def _hold(target: SettingsTarget, body: Mapping[str, Any], ops: Ops) -> Ops:
    """With staggered rollouts, a Deployment is paused in its template write, so that its
    controller does not replace every pod before the planner steps it (rollout_holds)."""
    if not target.staggered or target.workload_kind is not WorkloadKind.DEPLOYMENT:
        return []
    return hold_ops(apply_ops(body, ops))
