"""One reconcile of a group's consumer settings, decided from what the operator read.

    plan = plan_settings(inputs)

Pure: the handler reads the ConsumerGroup, its workload and the broker's limits, calls this,
then carries the plan out (ConfigMap, pod-template patch, group configs) and writes
`plan.status` with the outcomes filled in. Level-based: a plan from the same inputs is the same
plan, and a template that already carries the settings gets no patch, so reconciling again
(on a timer, after an operator restart) changes nothing; it is also how the second step of an
assignor migration starts once the first has reached every pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rebalancer.planning.assignor_migrations import parse_strategy
from rebalancer.planning.consumer_settings import (
    ResolvedSettings,
    SettingsContext,
    check_settings,
    env_variable,
    resolve_settings,
)
from rebalancer.planning.consumer_settings_templates import (
    OwnerRef,
    RenderedSettings,
    TemplatePatch,
    container_env,
    render_configmap,
    render_settings,
    render_template_patch,
    template_hash,
)
from rebalancer.planning.sidecar_templates import (
    SIDECAR_CONTAINER,
    RenderedSidecar,
    SidecarOptions,
    consumer_container,
    render_sidecar,
    render_sidecar_patch,
    sidecar_hash,
)
from rebalancer.structs.broker_configs import (
    GROUP_SESSION_KEY,
    ApplyState,
    BrokerLimits,
    ConfigOutcome,
)
from rebalancer.structs.brokers import GroupProtocol, GroupState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.enforcement import pattern_takes_control_topics
from rebalancer.structs.kafka_problems import KafkaProblem
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.rollout_policy import ConsumerTimings
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import WorkloadView

Body = dict[str, Any]


@dataclass(frozen=True)
class SettingsInputs:
    namespace: str
    name: str  # the ConsumerGroup's
    uid: str | None
    policy: SettingsPolicy
    workload_kind: WorkloadKind
    container: str | None  # spec.workload.container
    protocol_choice: ProtocolChoice
    workload: Mapping[str, Any]  # the StatefulSet or Deployment as read
    view: WorkloadView | None  # the same workload with its pods (rebalancer.clients.rolling)
    previous: Mapping[str, Any] = field(default_factory=dict)  # status.settings
    observed: Mapping[str, Any] = field(default_factory=dict)  # status.group
    limits: BrokerLimits = field(default_factory=BrokerLimits)
    # The rollout planner staggers this workload's rollouts (spec.policy.rollout enabled).
    # Without it a settings change would restart pods as the workload's controller pleases,
    # so the settings are refused instead.
    staggered: bool = True
    # The operator opens the pods' join gates (spec.policy.rollout.gateJoins): a Deployment's
    # static members take the identity slots it hands out there (planning.identity_slots).
    gate_joins: bool = False
    # With it, park a StatefulSet in the same patch (spec.policy.rollout.parkStatefulSets).
    park: bool = True


@dataclass(frozen=True)
class SettingsPlan:
    problems: tuple[FieldProblem, ...]
    resolved: ResolvedSettings | None = None
    rendered: RenderedSettings | None = None
    configmap: Body | None = None
    patch: TemplatePatch = field(default_factory=TemplatePatch)
    rolled_out: bool = False
    notes: tuple[str, ...] = ()

    @property
    def refused(self) -> bool:
        return bool(self.problems)

    @property
    def group_configs(self) -> dict[str, str]:
        return dict(self.resolved.group_configs) if self.resolved else {}


def rolled_out(view: WorkloadView | None) -> bool:
    """Every live pod runs the workload's latest template (and the controller has seen it)."""
    if view is None or not view.caught_up:
        return False
    live = view.live_pods
    return len(live) >= view.replicas and all(pod.updated for pod in live)


def _observed_protocol(observed: Mapping[str, Any]) -> GroupProtocol | None:
    value = observed.get("protocol")
    try:
        return GroupProtocol(str(value)) if value else None
    except ValueError:
        return None


def _group_active(observed: Mapping[str, Any]) -> bool:
    members = observed.get("members")
    if isinstance(members, int) and members > 0:
        return True
    state = observed.get("state")
    try:
        return GroupState(str(state)).has_members if state else False
    except ValueError:
        return False


def current_strategy(inputs: SettingsInputs) -> tuple[tuple[str, ...] | None, bool]:
    """The assignors the running consumers list, and whether every pod runs that list.

    In order of trust: what the operator rendered last (status.settings), what the pod template
    sets, what the broker says the group chose.
    """
    here = rolled_out(inputs.view)
    previous = inputs.previous.get("assignors")
    if isinstance(previous, list) and previous:
        carried = template_hash(inputs.workload) == inputs.previous.get("hash")
        return tuple(str(name) for name in previous), here and carried
    prefix = inputs.policy.env.effective_prefix
    if prefix is not None:
        variable = env_variable("partition.assignment.strategy", prefix)
        value = container_env(inputs.workload, inputs.container, variable)
        if value:
            return parse_strategy(value), here
    chosen = inputs.observed.get("assignor")
    if isinstance(chosen, str) and chosen:
        return parse_strategy(chosen), here
    return None, here


def plan_settings(inputs: SettingsInputs) -> SettingsPlan:
    strategy, strategy_rolled_out = current_strategy(inputs)
    context = SettingsContext(
        workload_kind=inputs.workload_kind,
        protocol_choice=inputs.protocol_choice,
        observed_protocol=_observed_protocol(inputs.observed),
        limits=inputs.limits,
        current_strategy=strategy,
        rolled_out=strategy_rolled_out,
        group_active=_group_active(inputs.observed),
        gate_joins=inputs.gate_joins,
    )
    problems = check_settings(inputs.policy, context)
    if not inputs.staggered:
        problems.append(
            FieldProblem(
                "spec.policy.rollout.enabled",
                "is not true, so a settings change would restart the consumers as the workload's "
                "controller rolls pods, not in batches the group can absorb",
                "set spec.policy.rollout.enabled: true (the settings then roll out in batches)",
            )
        )
    if problems:
        return SettingsPlan(problems=tuple(problems), rolled_out=rolled_out(inputs.view))
    resolved = resolve_settings(inputs.policy, context)
    rendered = render_settings(inputs.name, inputs.policy, resolved)
    owner = None
    if inputs.uid:
        owner = OwnerRef("rebalancer.dev/v1alpha1", "ConsumerGroup", inputs.name, inputs.uid)
    configmap = render_configmap(rendered, inputs.namespace, inputs.name, owner)
    patch = render_template_patch(
        inputs.workload,
        rendered,
        kind=inputs.workload_kind,
        container=inputs.container,
        park=inputs.park and inputs.staggered,
    )
    if patch.problem is not None:
        return SettingsPlan(problems=(patch.problem,), resolved=resolved, rendered=rendered)
    carried = template_hash(inputs.workload) == rendered.hash
    return SettingsPlan(
        problems=(),
        resolved=resolved,
        rendered=rendered,
        configmap=configmap,
        patch=patch,
        rolled_out=carried and rolled_out(inputs.view),
        notes=resolved.notes + patch.notes,
    )


def consumer_timings(plan: SettingsPlan, fallback: ConsumerTimings) -> ConsumerTimings:
    """The timings the rollout planner should time batches with once these settings are in.

    The planner's spec.policy.rollout.consumers describes consumers it cannot see; when the
    operator sets the consumers' settings itself, those are the real ones.
    """
    resolved = plan.resolved
    if resolved is None:
        return fallback
    values = {**dict(resolved.group_configs), **dict(resolved.properties)}
    session = values.get("session.timeout.ms") or values.get(GROUP_SESSION_KEY)
    max_poll = values.get("max.poll.interval.ms")
    return ConsumerTimings(
        session_timeout_ms=int(session) if session else fallback.session_timeout_ms,
        heartbeat_interval_ms=resolved.heartbeat_interval_ms,
        max_poll_interval_ms=int(max_poll) if max_poll else fallback.max_poll_interval_ms,
    )


def timings_from_status(
    settings: Mapping[str, Any] | None, fallback: ConsumerTimings
) -> ConsumerTimings:
    """consumer_timings, read back from status.settings (for the rollout daemon, which does
    not plan settings itself); the fallback until settings are in the template."""
    if not settings or not settings.get("applied"):
        return fallback

    def number(key: str, default: int) -> int:
        value = settings.get(key)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value else default
        )

    return ConsumerTimings(
        session_timeout_ms=number("sessionTimeoutMs", fallback.session_timeout_ms),
        heartbeat_interval_ms=number("heartbeatIntervalMs", fallback.heartbeat_interval_ms),
        max_poll_interval_ms=number("maxPollIntervalMs", fallback.max_poll_interval_ms),
    )


def settings_status(
    plan: SettingsPlan,
    limits: BrokerLimits,
    *,
    applied: bool,
    group_configs: ConfigOutcome | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Body:
    """status.settings: which protocol, which hash, whether it is in the template and in every
    pod, what became of the group configs, and the session limits it was checked against.

    `applied`: the workload's template carries the hash (patched now or earlier).
    """
    limits_status = {
        "minSessionTimeoutMs": limits.min_session_ms,
        "maxSessionTimeoutMs": limits.max_session_ms,
        "source": limits.source.value,
    }
    if limits.refusal is not None:
        limits_status["message"] = limits_not_read(limits.refusal)
    if plan.refused or plan.resolved is None or plan.rendered is None:
        return {
            "applied": False,
            "message": "; ".join(str(problem) for problem in plan.problems),
            "sessionLimits": limits_status,
            **(extra or {}),
        }
    resolved, rendered = plan.resolved, plan.rendered
    status: Body = {
        "protocol": resolved.protocol.value,
        "clientLibrary": resolved.library.value,
        "hash": rendered.hash,
        "configMap": rendered.configmap,
        "applied": applied,
        "rolledOut": applied and plan.rolled_out,
        "sessionTimeoutMs": _int_property(resolved, "session.timeout.ms")
        or int(dict(resolved.group_configs).get("consumer.session.timeout.ms", 0)),
        "heartbeatIntervalMs": resolved.heartbeat_interval_ms,
        "maxPollIntervalMs": _int_property(resolved, "max.poll.interval.ms"),
        "sessionLimits": limits_status,
    }
    if resolved.assignor is not None:
        status["assignors"] = list(resolved.assignor.strategies)
        status["migrationStep"] = resolved.assignor.step
    if resolved.group_configs:
        outcome = group_configs
        status["groupConfigs"] = {
            "values": dict(resolved.group_configs),
            "state": outcome.state.value if outcome else "pending",
            "message": outcome.message if outcome else "not applied yet",
        }
    if plan.notes:
        status["notes"] = list(plan.notes)
    status.update(extra or {})
    return status


def _int_property(resolved: ResolvedSettings, key: str) -> int | None:
    value = resolved.property(key)
    return int(value) if value is not None and value.isdigit() else None


def summary(problems: Sequence[FieldProblem]) -> str:
    return "; ".join(str(problem) for problem in problems)


def settings_conditions(settings: Mapping[str, Any] | None) -> list[Condition]:
    """Conditions status.settings imposes ([] when it has nothing to say).

    For whoever writes conditions last (the observer): a refusal must not be hidden by a
    routine "observed", as a failed rollout must not.
    """
    if not settings:
        return []
    if settings.get("message") and not settings.get("hash"):
        return _degraded("SettingsRefused", settings["message"])
    group_configs = settings.get("groupConfigs") or {}
    if group_configs.get("state") == ApplyState.FAILED.value:
        message = str(group_configs.get("message") or "the group configs were not applied")
        return _degraded("GroupConfigsFailed", message)
    sidecar = settings.get("sidecar") or {}
    if sidecar.get("reason") in SIDECAR_REFUSALS:
        return _degraded(str(sidecar["reason"]), str(sidecar.get("message") or ""))
    delay = settings.get("brokerDelay") or {}
    if delay.get("reason") in ("DelayRefused", "DelayFailed"):
        return _degraded(str(delay["reason"]), str(delay.get("message") or ""))
    refused = (settings.get("sessionLimits") or {}).get("message")
    if refused:
        # Settings checked against limits the broker may not have are the user's to fix too.
        return _degraded(LIMITS_NOT_READ, str(refused))
    return []


def _degraded(reason: str, message: str) -> list[Condition]:
    return [Condition(ConditionType.DEGRADED, ConditionStatus.TRUE, reason, message)]


LIMITS_NOT_READ = KafkaProblem.NOT_AUTHORIZED.value


def limits_not_read(refusal: str) -> str:
    """status.settings.sessionLimits.message when the broker refused DescribeConfigs."""
    return (
        f"the broker's session limits were not read, so the settings were checked against "
        f"Kafka's defaults: {refusal}"
    )


# The enforcement sidecar in the pod template ------------------------------------------------

SIDECAR_REFUSALS = ("SidecarRefused", "PatternTakesControlTopics")


@dataclass(frozen=True)
class SidecarInputs:
    policy: SidecarPolicy  # spec.policy.enforce.sidecar
    group_id: str
    bootstrap_servers: tuple[str, ...]
    workload_kind: WorkloadKind
    container: str | None  # spec.workload.container: the application the sidecar copies
    # The workload as it will be once this reconcile's settings patch is in: the sidecar
    # copies the application's variables, settings included, so both go in one write.
    workload: Mapping[str, Any]
    view: WorkloadView | None
    options: SidecarOptions = field(default_factory=SidecarOptions)
    pattern: str | None = None  # spec.subscription.pattern
    # As for settings: adding a container restarts every pod, so only as a managed rollout.
    staggered: bool = True
    park: bool = True
    # spec.policy.protocol is streams: no sidecar can join the group, so none is injected.
    streams: bool = False


@dataclass(frozen=True)
class SidecarPlan:
    inject: bool
    problems: tuple[FieldProblem, ...] = ()
    reason: str = ""
    rendered: RenderedSidecar | None = None
    patch: TemplatePatch = field(default_factory=TemplatePatch)
    # The template carries what this plan wants, before any patch of this reconcile.
    carried: bool = False
    rolled_out: bool = False

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def _sidecar_problems(inputs: SidecarInputs) -> tuple[list[FieldProblem], str]:
    problems: list[FieldProblem] = []
    if inputs.pattern and pattern_takes_control_topics(inputs.pattern, inputs.group_id):
        problem = FieldProblem(
            "spec.subscription.pattern",
            f"({inputs.pattern!r}) matches the sidecars' __rebalancer.* control topics, so the "
            "application's members would take the partitions that elect the acting sidecar",
            "narrow the pattern so that it cannot match __rebalancer.*",
        )
        return [problem], "PatternTakesControlTopics"
    if inputs.streams:
        problem = FieldProblem(
            "spec.policy.enforce.sidecar.inject",
            "would add a sidecar to a streams group's pods (spec.policy.protocol: streams), "
            "which it cannot join: a streams group (KIP-1071) has no JoinGroup, and the "
            "sidecar never joins a Kafka Streams application's group",
            "remove spec.policy.enforce from the ConsumerGroup; its per-group delay is "
            "spec.policy.groupConfigs.streams",
        )
        return [problem], "SidecarRefused"
    if not inputs.staggered:
        problems.append(
            FieldProblem(
                "spec.policy.rollout.enabled",
                "is not true, so adding the sidecar would restart the consumers as the "
                "workload's controller rolls pods, not in batches the group can absorb",
                "set spec.policy.rollout.enabled: true (the sidecar then rolls out in batches), "
                "or add the sidecar to your own manifests and leave inject false",
            )
        )
    return problems, "SidecarRefused"


def plan_sidecar(inputs: SidecarInputs) -> SidecarPlan:
    """What the pod template needs so that it carries the sidecar exactly when inject is on.

    Level-based like plan_settings: a template that already carries the rendered sidecar (by
    its hash) gets no patch, and with inject off only a sidecar the operator added is taken out.
    """
    carried = sidecar_hash(inputs.workload)
    park = inputs.park and inputs.staggered
    if not inputs.policy.inject:
        patch = render_sidecar_patch(inputs.workload, None, kind=inputs.workload_kind, park=park)
        gone = carried is None
        return SidecarPlan(
            inject=False,
            reason="SidecarRemoved",
            patch=patch,
            carried=gone,
            rolled_out=gone and rolled_out(inputs.view),
        )
    problems, reason = _sidecar_problems(inputs)
    consumer, missing = consumer_container(inputs.workload, inputs.container)
    if missing is not None:
        problems.append(missing)
    if problems or consumer is None:
        return SidecarPlan(inject=True, problems=tuple(problems), reason=reason)
    rendered = render_sidecar(
        consumer,
        group_id=inputs.group_id,
        bootstrap_servers=inputs.bootstrap_servers,
        policy=inputs.policy,
        options=inputs.options,
    )
    patch = render_sidecar_patch(inputs.workload, rendered, kind=inputs.workload_kind, park=park)
    if patch.problem is not None:
        return SidecarPlan(inject=True, problems=(patch.problem,), reason="SidecarRefused")
    here = carried == rendered.hash
    return SidecarPlan(
        inject=True,
        reason="SidecarInjected",
        rendered=rendered,
        patch=patch,
        carried=here,
        rolled_out=here and rolled_out(inputs.view),
    )


def sidecar_status(plan: SidecarPlan, *, applied: bool) -> Body:
    """status.settings.sidecar. `applied`: the template carries what the plan wants (it did,
    or this reconcile's patch went in)."""
    status: Body = {"inject": plan.inject, "reason": plan.reason}
    if plan.refused:
        status.update(injected=False, message=summary(plan.problems))
        return status
    if plan.inject:
        assert plan.rendered is not None
        status.update(
            injected=applied,
            hash=plan.rendered.hash,
            container=SIDECAR_CONTAINER,
            rolledOut=applied and plan.rolled_out,
            message=(
                f"container {SIDECAR_CONTAINER} is in the pod template; it reaches the pods as "
                "a staggered rollout"
                if applied
                else "the sidecar is not in the pod template yet"
            ),
        )
        return status
    status.update(
        injected=not applied,
        rolledOut=applied and plan.rolled_out,
        message=(
            "inject is off: the pod template carries no sidecar of the operator's"
            if applied
            else "inject is off: the operator's sidecar is still in the pod template"
        ),
    )
    return status
