"""The broker's initial rebalance delay: one value per Kafka cluster, chosen by a stated rule.

`group.initial.rebalance.delay.ms` (KIP-134) is a broker setting that applies to every group on
the cluster, static on Apache Kafka (a change means a rolling restart of the brokers) and
dynamic on Redpanda (`group_initial_rebalance_delay`). ConsumerGroups only say what they want
(`spec.policy.brokerDelay.delayMs`) and how much they tolerate (`maxDelayMs`); the cluster gets

    the largest delayMs among its ConsumerGroups, capped at the smallest maxDelayMs among them

because a longer delay only costs an empty group's first join a few seconds once, while a group
that joins in a spread-out fleet without it rebalances once per late pod; and a group that
cannot afford a long first join (its cap) vetoes one. Every group's status says which value the
cluster gets, which group's wish set it and which group's cap limited it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rebalancer.structs.broker_configs import DELAY_KEY, REDPANDA_DELAY_KEY
from rebalancer.structs.broker_delay_policy import DELAY_PATH, BrokerDelayPolicy, DelayMode
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.problems import FieldProblem

RULE = (
    "the largest delayMs among the cluster's ConsumerGroups, capped at the smallest maxDelayMs "
    "among them"
)


@dataclass(frozen=True)
class DelayWant:
    namespace: str
    name: str
    cluster: str  # cluster_key_for()
    delay_ms: int
    max_delay_ms: int
    mode: DelayMode = DelayMode.RECOMMEND

    @property
    def group(self) -> str:
        return f"{self.namespace}/{self.name}"


def cluster_key_for(bootstrap_servers: Iterable[str], cluster_id: str | None = None) -> str:
    """Which cluster a group is on: its Kafka cluster id once known, else its bootstrap list.

    The id is the truth (two groups may list different brokers of one cluster); the bootstrap
    list stands in until the operator has described the cluster once.
    """
    if cluster_id:
        return f"id:{cluster_id}"
    servers = sorted({server.strip().lower() for server in bootstrap_servers if server.strip()})
    return "bootstrap:" + ",".join(servers)


@dataclass(frozen=True)
class ClusterDelay:
    cluster: str
    value_ms: int
    wanted_ms: int  # the largest delayMs
    wanted_by: str  # the group that wants it (first by name among equals)
    cap_ms: int  # the smallest maxDelayMs
    capped_by: str | None  # the group whose cap lowered the value; None when not capped
    groups: int

    @property
    def capped(self) -> bool:
        return self.capped_by is not None


def decide_cluster_delay(wants: Sequence[DelayWant]) -> ClusterDelay | None:
    """The cluster's delay by RULE, from the wants of one cluster's groups (None: no wants)."""
    if not wants:
        return None
    ordered = sorted(wants, key=lambda want: want.group)
    wanted = max(ordered, key=lambda want: want.delay_ms)
    cap = min(ordered, key=lambda want: want.max_delay_ms)
    capped = cap.max_delay_ms < wanted.delay_ms
    return ClusterDelay(
        cluster=ordered[0].cluster,
        value_ms=min(wanted.delay_ms, cap.max_delay_ms),
        wanted_ms=wanted.delay_ms,
        wanted_by=wanted.group,
        cap_ms=cap.max_delay_ms,
        capped_by=cap.group if capped else None,
        groups=len(ordered),
    )


class DelayAction(StrEnum):
    NONE = "none"  # nothing to do (in force already, not applicable, refused, waiting)
    RECOMMEND = "recommend"
    PATCH_STRIMZI = "patch-strimzi"
    ALTER_BROKER = "alter-broker"


@dataclass(frozen=True)
class DelayPlan:
    action: DelayAction
    value_ms: int
    config_key: str | None
    reason: str  # one CamelCase word, for the Event and status
    message: str
    problem: FieldProblem | None = None


def explain(decision: ClusterDelay, want: DelayWant) -> str:
    """Why the cluster gets its value, from this group's point of view."""
    others = decision.groups - 1
    sharing = (
        f"{decision.groups} ConsumerGroups share this cluster"
        if others
        else ("this is the cluster's only ConsumerGroup")
    )
    text = f"{sharing}; the rule is {RULE}: "
    if decision.wanted_by == want.group or decision.wanted_ms == want.delay_ms:
        text += f"this group's delayMs ({want.delay_ms}) is the largest"
    else:
        text += f"{decision.wanted_by} wants {decision.wanted_ms} (this group {want.delay_ms})"
    if decision.capped:
        who = "this group" if decision.capped_by == want.group else decision.capped_by
        text += f", capped at {decision.cap_ms} by the maxDelayMs of {who}"
    return text + f", so the cluster gets {decision.value_ms} ms"


def plan_delay(
    policy: BrokerDelayPolicy,
    decision: ClusterDelay,
    want: DelayWant,
    profile: BrokerProfile | None,
    current_ms: int | None = None,
) -> DelayPlan:
    """What this group's operator does about the cluster's value.

    `current_ms`: the value in force as far as the operator can read it (the broker's
    DescribeConfigs, or the Strimzi resource in strimzi mode); None when unknown.
    """
    value = decision.value_ms
    why = explain(decision, want)
    if current_ms == value:
        return DelayPlan(DelayAction.NONE, value, None, "InForce", f"{value} ms is in force; {why}")
    if policy.mode is DelayMode.RECOMMEND:
        return DelayPlan(
            DelayAction.RECOMMEND,
            value,
            DELAY_KEY,
            "DelayRecommended",
            f"set {DELAY_KEY}={value} on every broker (static on Apache Kafka: it takes a "
            f"rolling restart; on Redpanda: rpk cluster config set {REDPANDA_DELAY_KEY} "
            f"{value}); {why}",
        )
    if policy.mode is DelayMode.STRIMZI:
        return _strimzi_plan(policy, want, profile, value, why)
    if profile is BrokerProfile.REDPANDA:
        return DelayPlan(
            DelayAction.ALTER_BROKER,
            value,
            REDPANDA_DELAY_KEY,
            "DelayAltered",
            f"{REDPANDA_DELAY_KEY}={value} set live with IncrementalAlterConfigs; {why}",
        )
    if profile is BrokerProfile.APACHE_KAFKA:
        return _refused(
            value,
            f"{DELAY_PATH}.mode",
            f"is alter-configs, but {DELAY_KEY} is read-only (static) on Apache Kafka: brokers "
            "refuse to change it live",
            "use mode strimzi (the Kafka resource's spec.kafka.config) or recommend",
        )
    return DelayPlan(
        DelayAction.NONE,
        value,
        None,
        "ProfileUnknown",
        "the broker implementation is not known yet, so whether it takes the delay live is "
        f"not known either; set spec.kafka.profile to say it; {why}",
    )


def _strimzi_plan(
    policy: BrokerDelayPolicy,
    want: DelayWant,
    profile: BrokerProfile | None,
    value: int,
    why: str,
) -> DelayPlan:
    """Mode strimzi: the value goes into the Kafka resource, which Redpanda has none of."""
    if profile is BrokerProfile.REDPANDA:
        return _refused(
            value,
            f"{DELAY_PATH}.mode",
            "is strimzi, but the cluster is Redpanda, which Strimzi does not run",
            "use mode alter-configs (Redpanda takes the delay live) or recommend",
        )
    ref = policy.strimzi
    where = f"{ref.namespace or want.namespace}/{ref.name}" if ref else "(no resource)"
    return DelayPlan(
        DelayAction.PATCH_STRIMZI,
        value,
        DELAY_KEY,
        "DelayPatched",
        f"{DELAY_KEY}={value} in Kafka {where} spec.kafka.config (Strimzi rolls the "
        f"brokers to apply it); {why}",
    )


def _refused(value: int, path: str, message: str, fix: str) -> DelayPlan:
    problem = FieldProblem(path, message, fix)
    return DelayPlan(DelayAction.NONE, value, None, "DelayRefused", str(problem), problem)


def strimzi_config_patch(value_ms: int) -> dict[str, Any]:
    """A merge patch for a Strimzi Kafka resource that sets the delay and nothing else."""
    return {"spec": {"kafka": {"config": {DELAY_KEY: value_ms}}}}


def delay_status(
    decision: ClusterDelay,
    want: DelayWant,
    plan: DelayPlan,
    outcome: str | None = None,
    in_force: tuple[int | None, str | None] = (None, None),
) -> dict[str, Any]:
    """status.settings.brokerDelay for one group; `outcome` is what carrying out the plan gave,
    `in_force` the value the broker reports now and where it says it comes from."""
    status: dict[str, Any] = {
        "cluster": decision.cluster,
        "wantedMs": want.delay_ms,
        "clusterMs": decision.value_ms,
        "mode": want.mode.value,
        "action": plan.action.value,
        "rule": RULE,
        "reason": plan.reason,
        "message": plan.message,
    }
    if decision.capped_by:
        status["cappedBy"] = decision.capped_by
    status["decidedBy"] = decision.wanted_by
    if outcome:
        status["outcome"] = outcome
    value, source = in_force
    if value is not None:
        status["inForceMs"] = value
    if source:
        status["inForceSource"] = source
    return status
