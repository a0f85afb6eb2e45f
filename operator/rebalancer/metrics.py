"""Prometheus metrics of the operator, served at GET /metrics on the report endpoint's port.

Every metric lives in this module's own registry, so that nothing else imported into the
process (kopf, the Kubernetes client) adds series to the scrape. Names follow Prometheus
conventions: the `rebalancer_` prefix, base units, counters ending in `_total`. Labels are only
the ConsumerGroup's namespace and name and small fixed sets (cause, state, reason, outcome):
never anything a member report or a broker sends, because those are unbounded.
docs/metrics.md describes every metric.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp.typedefs import Handler
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)
from prometheus_client.aiohttp import make_aiohttp_handler

from rebalancer import __version__
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.history import RebalanceCause
from rebalancer.structs.snapshots import GroupSnapshot

# `_created` series double the series count and no dashboard or alert here reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
GROUP_LABELS = ("namespace", "consumergroup")

# Kafka's wire names for classic and KIP-848 groups; anything else a broker sends is folded
# into "Unknown" so a misbehaving broker cannot create series.
GROUP_STATES = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Assigning",
    "Reconciling",
    "Dead",
    "Unknown",
)
REPORT_REJECTIONS = ("unauthorized", "too_large", "not_json", "invalid", "other")
OBSERVATION_OUTCOMES = ("success", "failure")

REBALANCES = Counter(
    "rebalancer_rebalances",
    "Rebalances the operator detected, by cause; counts from the operator's start.",
    [*GROUP_LABELS, "cause"],
    registry=REGISTRY,
)
GROUP_REBALANCES = Gauge(
    "rebalancer_group_rebalances",
    "Rebalances recorded in the ConsumerGroup's status since it was created "
    "(survives operator restarts, unlike rebalancer_rebalances_total).",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_MEMBERS = Gauge(
    "rebalancer_group_members",
    "Members in the group at the last observation.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_GENERATION = Gauge(
    "rebalancer_group_generation",
    "Group generation (epoch) at the last observation; absent while unknown.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_STATE = Gauge(
    "rebalancer_group_state",
    "1 for the group's state at the last observation, 0 for every other state.",
    [*GROUP_LABELS, "state"],
    registry=REGISTRY,
)
GROUP_ASSIGNED_PARTITIONS = Gauge(
    "rebalancer_group_assigned_partitions",
    "Partitions assigned to the group's members; absent while unknown.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_PARTITIONS = Gauge(
    "rebalancer_group_partitions",
    "Partitions of the topics the group subscribes to; absent while unknown.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_LAG = Gauge(
    "rebalancer_group_lag_messages",
    "Messages the group is behind the high watermarks, summed over its partitions; "
    "absent while unknown.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_LAST_REBALANCE = Gauge(
    "rebalancer_group_last_rebalance_timestamp_seconds",
    "Unix time of the last rebalance recorded for the group; absent until one is seen.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_LAST_OBSERVATION = Gauge(
    "rebalancer_group_last_observation_timestamp_seconds",
    "Unix time of the last successful observation of the group.",
    GROUP_LABELS,
    registry=REGISTRY,
)
LEADER = Gauge(
    "rebalancer_leader",
    "1 while this replica is the one that acts (the leader of its peering), else 0; "
    "1 when the operator runs without leader election.",
    registry=REGISTRY,
)
GROUP_READY = Gauge(
    "rebalancer_group_ready",
    "1 when the ConsumerGroup's Ready condition is True, else 0.",
    GROUP_LABELS,
    registry=REGISTRY,
)
GROUP_DEGRADED = Gauge(
    "rebalancer_group_degraded",
    "1 when the ConsumerGroup's Degraded condition is True, else 0.",
    GROUP_LABELS,
    registry=REGISTRY,
)
OBSERVATION_FAILURES = Counter(
    "rebalancer_observation_failures",
    "Observations of a group that failed, by reason (the reason of the Degraded condition).",
    [*GROUP_LABELS, "reason"],
    registry=REGISTRY,
)
OBSERVATION_DURATION = Histogram(
    "rebalancer_observation_duration_seconds",
    "Time one observation of a group took (describe group and topics, merge reports, write "
    "status), by outcome.",
    ["outcome"],
    # Admin requests answer in milliseconds; a timeout to an unreachable cluster takes seconds.
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
REPORTS_ACCEPTED = Counter(
    "rebalancer_member_reports_accepted",
    "Member reports accepted at POST /v1/reports.",
    registry=REGISTRY,
)
REPORTS_UNCLAIMED = Counter(
    "rebalancer_member_reports_unclaimed",
    "Accepted member reports for a Kafka group no ConsumerGroup observes (yet); the log names "
    "the group once.",
    registry=REGISTRY,
)
REPORTS_REJECTED = Counter(
    "rebalancer_member_reports_rejected",
    "Member reports rejected at POST /v1/reports, by reason.",
    ["reason"],
    registry=REGISTRY,
)
GATE_BYPASSES = Counter(
    "rebalancer_gate_bypasses",
    "Pods whose join gate let them start without their batch because the operator was silent "
    "for the bypass time (spec.policy.rollout.bypassGateAfterSeconds), counted when the "
    "operator notices.",
    GROUP_LABELS,
    registry=REGISTRY,
)
OPERATOR_INFO = Info(
    "rebalancer_operator",
    "The running operator's version.",
    registry=REGISTRY,
)

_GROUP_METRICS: tuple[Counter | Gauge, ...] = (
    REBALANCES,
    GROUP_REBALANCES,
    GROUP_MEMBERS,
    GROUP_GENERATION,
    GROUP_STATE,
    GROUP_ASSIGNED_PARTITIONS,
    GROUP_PARTITIONS,
    GROUP_LAG,
    GROUP_LAST_REBALANCE,
    GROUP_LAST_OBSERVATION,
    GROUP_READY,
    GROUP_DEGRADED,
    OBSERVATION_FAILURES,
    GATE_BYPASSES,
)

OPERATOR_INFO.info({"version": __version__})
# Series that exist from the start let rate() and increase() see their first increment.
for _outcome in OBSERVATION_OUTCOMES:
    OBSERVATION_DURATION.labels(_outcome)
for _reason in REPORT_REJECTIONS:
    REPORTS_REJECTED.labels(_reason)


def _start_group(namespace: str, consumergroup: str) -> None:
    for cause in RebalanceCause:
        REBALANCES.labels(namespace, consumergroup, cause.value)


def _set_or_drop(gauge: Gauge, namespace: str, consumergroup: str, value: float | None) -> None:
    # A missing figure is dropped rather than kept at its last value, so graphs show a gap
    # instead of a stale number that looks current.
    if value is None:
        gauge.remove(namespace, consumergroup)
    else:
        gauge.labels(namespace, consumergroup).set(value)


def record_rebalance(namespace: str, consumergroup: str, cause: str) -> None:
    """Count one detected rebalance of the ConsumerGroup `namespace/consumergroup`."""
    _start_group(namespace, consumergroup)
    known = {member.value for member in RebalanceCause}
    label = cause if cause in known else RebalanceCause.UNKNOWN.value
    REBALANCES.labels(namespace, consumergroup, label).inc()


def publish_snapshot(
    namespace: str, consumergroup: str, snapshot: GroupSnapshot, tracking: GroupTracking
) -> None:
    """Export what one successful observation saw, with the tracking kept after it.

    The generation falls back to the tracked one, as the status does, because classic
    DescribeGroups does not tell it.
    """
    _start_group(namespace, consumergroup)
    current = snapshot.state if snapshot.state in GROUP_STATES else "Unknown"
    for state in GROUP_STATES:
        GROUP_STATE.labels(namespace, consumergroup, state).set(1 if state == current else 0)
    generation = tracking.generation if snapshot.generation is None else snapshot.generation
    GROUP_MEMBERS.labels(namespace, consumergroup).set(snapshot.members)
    GROUP_REBALANCES.labels(namespace, consumergroup).set(tracking.rebalances)
    GROUP_LAST_OBSERVATION.labels(namespace, consumergroup).set(snapshot.observed_at)
    _set_or_drop(GROUP_GENERATION, namespace, consumergroup, generation)
    _set_or_drop(GROUP_ASSIGNED_PARTITIONS, namespace, consumergroup, snapshot.assigned_partitions)
    _set_or_drop(GROUP_PARTITIONS, namespace, consumergroup, snapshot.total_partitions)
    _set_or_drop(GROUP_LAG, namespace, consumergroup, snapshot.lag)
    _set_or_drop(GROUP_LAST_REBALANCE, namespace, consumergroup, tracking.last_rebalance_at)


def publish_conditions(namespace: str, consumergroup: str, conditions: Iterable[Condition]) -> None:
    """Export the Ready and Degraded conditions about to be written; other types are ignored."""
    gauges = {ConditionType.READY: GROUP_READY, ConditionType.DEGRADED: GROUP_DEGRADED}
    for condition in conditions:
        gauge = gauges.get(condition.type)
        if gauge is not None:
            value = 1 if condition.status is ConditionStatus.TRUE else 0
            gauge.labels(namespace, consumergroup).set(value)


def record_gate_bypasses(namespace: str, consumergroup: str, pods: int) -> None:
    """Count `pods` whose gates were bypassed, once each (the operator marks the pods)."""
    GATE_BYPASSES.labels(namespace, consumergroup).inc(pods)


def record_observation_failure(namespace: str, consumergroup: str, reason: str) -> None:
    """Count one failed observation; `reason` is the Degraded condition's reason."""
    OBSERVATION_FAILURES.labels(namespace, consumergroup, reason).inc()


def record_observation_duration(seconds: float, *, succeeded: bool) -> None:
    outcome = OBSERVATION_OUTCOMES[0] if succeeded else OBSERVATION_OUTCOMES[1]
    OBSERVATION_DURATION.labels(outcome).observe(seconds)


def record_report_accepted() -> None:
    REPORTS_ACCEPTED.inc()


def record_leader(leading: bool) -> None:
    LEADER.set(1 if leading else 0)


def record_report_unclaimed() -> None:
    REPORTS_UNCLAIMED.inc()


def record_report_rejected(reason: str) -> None:
    """Count one rejected report; `reason` is one of REPORT_REJECTIONS ("other" otherwise)."""
    REPORTS_REJECTED.labels(reason if reason in REPORT_REJECTIONS else "other").inc()


def forget_group(namespace: str, consumergroup: str) -> None:
    """Drop every series of a deleted ConsumerGroup, so it stops appearing in queries."""
    labels = {"namespace": namespace, "consumergroup": consumergroup}
    for metric in _GROUP_METRICS:
        metric.remove_by_labels(labels)


def metrics_handler() -> Handler:
    """An aiohttp handler that serves this module's registry in the exposition format."""
    return make_aiohttp_handler(REGISTRY)
