"""Prometheus metrics of the operator, served at GET /metrics on the report endpoint's port.

Every metric lives in this module's own registry, so that nothing else imported into the
process (kopf, the Kubernetes client) adds series to the scrape; the standard process and
Python runtime collectors are added to it on purpose. Names follow Prometheus conventions: the
`rebalancer_` prefix, base units, counters ending in `_total`. Labels are only the
ConsumerGroup's namespace, name and Kafka group id (one per resource) and small fixed sets
(cause, state, reason, outcome, phase), or a status field path the operator's own code writes:
never anything a member report or a broker sends, because those are unbounded.
docs/metrics.md describes every metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiohttp.typedefs import Handler
from prometheus_client import Counter, Gauge, Histogram, Info
from prometheus_client.aiohttp import make_aiohttp_handler

from rebalancer import __version__
from rebalancer.group_series import Family, GroupRecord, GroupSeries, Kind
from rebalancer.metric_registries import registry_with_process_collectors
from rebalancer.planning.rebalances import GroupTracking
from rebalancer.planning.rollout_progress import batches_done
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.brokers import GroupState
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType
from rebalancer.structs.history import RebalanceCause, RebalanceEvent
from rebalancer.structs.snapshots import GroupSnapshot

REGISTRY = registry_with_process_collectors()
# Per-group families carry GROUP_LABELS: the ConsumerGroup resource's namespace and name, and
# the Kafka group.id it observes (one per resource, so the label adds no series; it lets
# queries and alerts name the Kafka group). They live in GROUP_SERIES (rebalancer.group_series).

# Kafka's wire names for classic, KIP-848 and streams groups; anything else a broker sends is
# folded into "Unknown" so a misbehaving broker cannot create series.
# In the order the dashboard numbers them (its state panel shows a state's position here), so
# a state added to GroupState goes last rather than renumbering the others.
_DASHBOARD_ORDER = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.ASSIGNING,
    GroupState.RECONCILING,
    GroupState.NOT_READY,
    GroupState.DEAD,
    GroupState.UNKNOWN,
)
GROUP_STATES = tuple(
    state.value
    for state in (*_DASHBOARD_ORDER, *(s for s in GroupState if s not in _DASHBOARD_ORDER))
)
REPORT_REJECTIONS = ("unauthorized", "too_large", "not_json", "invalid", "other")
OBSERVATION_OUTCOMES = ("success", "failure")
ROLLOUT_PHASES = tuple(phase.value for phase in RolloutPhase)
# The final answers a sidecar gives to an enforce request, plus the operator's own: skipped (a
# rebalance was already under way), unreachable (no sidecar answered) and unsupported (the
# sidecar cannot join the group's protocol).
ENFORCE_OUTCOMES = (
    "enforced",
    "in-progress",
    "failed",
    "expired",
    "skipped",
    "unreachable",
    "unsupported",
)

REBALANCES = Family(
    "rebalancer_rebalances",
    "Rebalances the operator detected, by cause; counts from the operator's start.",
    Kind.COUNTER,
    label="cause",
)
GROUP_REBALANCES = Family(
    "rebalancer_group_rebalances",
    "Rebalances recorded in the ConsumerGroup's status since it was created "
    "(survives operator restarts, unlike rebalancer_rebalances_total).",
    Kind.GAUGE,
)
GROUP_MEMBERS = Family(
    "rebalancer_group_members",
    "Members in the group at the last observation.",
    Kind.GAUGE,
)
GROUP_GENERATION = Family(
    "rebalancer_group_generation",
    "Group generation (epoch) at the last observation; absent while unknown.",
    Kind.GAUGE,
)
GROUP_STATE = Family(
    "rebalancer_group_state",
    "1 for the group's state at the last observation, 0 for every other state.",
    Kind.GAUGE,
    label="state",
    one_hot=GROUP_STATES,
)
STREAMS_TASKS = Family(
    "rebalancer_streams_group_tasks",
    "Streams groups (KIP-1071) only: tasks the members hold at the last observation, by kind "
    "(active, standby, warmup); absent for other groups.",
    Kind.GAUGE,
    label="kind",
)
GROUP_ASSIGNED_PARTITIONS = Family(
    "rebalancer_group_assigned_partitions",
    "Partitions assigned to the group's members; absent while unknown.",
    Kind.GAUGE,
)
GROUP_PARTITIONS = Family(
    "rebalancer_group_partitions",
    "Partitions of the topics the group subscribes to; absent while unknown.",
    Kind.GAUGE,
)
GROUP_LAG = Family(
    "rebalancer_group_lag_messages",
    "Messages the group is behind the high watermarks, summed over its partitions; "
    "absent while unknown.",
    Kind.GAUGE,
)
GROUP_LAST_REBALANCE = Family(
    "rebalancer_group_last_rebalance_timestamp_seconds",
    "Unix time of the last rebalance recorded for the group; absent until one is seen.",
    Kind.GAUGE,
)
GROUP_LAST_OBSERVATION = Family(
    "rebalancer_group_last_observation_timestamp_seconds",
    "Unix time of the last successful observation of the group.",
    Kind.GAUGE,
)
LEADER = Gauge(
    "rebalancer_leader",
    "1 while this replica is the one that acts (the leader of its peering), else 0; "
    "1 when the operator runs without leader election.",
    registry=REGISTRY,
)
SHARDS_HELD = Gauge(
    "rebalancer_shards_held",
    "Shards of ConsumerGroups this replica holds the Lease of and serves (sharding only).",
    registry=REGISTRY,
)
DAEMONS_HERE = Gauge(
    "rebalancer_groups_served",
    "ConsumerGroups whose observer runs on this replica (sharding only: those of its shards).",
    registry=REGISTRY,
)
SHARD_MOVES = Counter(
    "rebalancer_shard_moves_total",
    "Shard Leases this replica took (taken) or gave up (released: given back above its fair "
    "share; lost: another replica holds it, or renewing failed for too long).",
    ["move"],
    registry=REGISTRY,
)
GROUP_READY = Family(
    "rebalancer_group_ready",
    "1 when the ConsumerGroup's Ready condition is True, else 0.",
    Kind.GAUGE,
)
GROUP_DEGRADED = Family(
    "rebalancer_group_degraded",
    "1 when the ConsumerGroup's Degraded condition is True, else 0.",
    Kind.GAUGE,
)
OBSERVATION_FAILURES = Family(
    "rebalancer_observation_failures",
    "Observations of a group that failed, by reason (the reason of the Degraded condition).",
    Kind.COUNTER,
    label="reason",
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
STATUS_WRITES = Counter(
    "rebalancer_status_writes",
    "ConsumerGroup status PATCHes by the observers, by reason: forced (a rebalance, a failure), "
    "changed (something a user would see), refresh (the freshness stamp only).",
    ["reason"],
    registry=REGISTRY,
)
STATUS_FIELDS_DROPPED = Counter(
    "rebalancer_status_fields_dropped",
    "Status fields left out of a write because the status model (the CRD's schema) does not "
    "declare them or declares another type, by field path without list indexes; the operator "
    "logs an error naming each. Anything above zero is a defect of the operator.",
    ["field"],
    registry=REGISTRY,
)
KUBERNETES_REQUESTS = Counter(
    "rebalancer_kubernetes_requests",
    "Requests the operator's Kubernetes client sent to kube-apiserver, by HTTP verb and "
    "resource (kopf's own watches and patches are not among them).",
    ["verb", "resource"],
    registry=REGISTRY,
)
KAFKA_REQUESTS = Counter(
    "rebalancer_kafka_requests",
    "Requests the operator's Kafka clients sent to brokers, by Kafka API (the batched group "
    "reads as they are sent, librdkafka's from its statistics, read every 10 s).",
    ["request"],
    registry=REGISTRY,
)
KAFKA_DESCRIBE_BATCH = Histogram(
    "rebalancer_kafka_describe_batch_groups",
    "Groups per describe batch: observers that look within 50 ms of each other share one "
    "request per coordinator.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
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
GATE_BYPASSES = Family(
    "rebalancer_gate_bypasses",
    "Pods whose join gate let them start without their batch because the operator was silent "
    "for the bypass time (spec.policy.rollout.bypassGateAfterSeconds), counted when the "
    "operator notices.",
    Kind.COUNTER,
)
TIME_TO_STABLE = Family(
    "rebalancer_rebalance_time_to_stable_seconds",
    "Per spell without Stable, from the first observation of the group rebalancing (or Stable "
    "with partitions unassigned) until the first observation of it Stable with every partition "
    "assigned.",
    Kind.HISTOGRAM,
    # A cold start takes the broker's initial delay (3 s) and more; a stuck one minutes.
    buckets=(0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0, 90.0, 150.0, 300.0, 600.0),
)
UNOWNED_PARTITION_SECONDS = Family(
    "rebalancer_unowned_partition_seconds",
    "Partition-seconds without an owner, summed over the rebalances whose figure is known "
    "(member reports time every release and assignment; a cold start counts every partition "
    "for its whole time to Stable).",
    Kind.COUNTER,
)
ROLLOUT_PHASE = Family(
    "rebalancer_rollout_phase",
    "1 for the rollout planner's phase (status.rollout.phase), 0 for every other phase.",
    Kind.GAUGE,
    label="phase",
    one_hot=ROLLOUT_PHASES,
)
ROLLOUT_BATCHES = Family(
    "rebalancer_rollout_batches",
    "Batches the current or last rollout was cut into; 0 between rollouts.",
    Kind.GAUGE,
)
ROLLOUT_BATCHES_DONE = Family(
    "rebalancer_rollout_batches_done",
    "Batches of the current or last rollout released and settled; progress is this over "
    "rebalancer_rollout_batches.",
    Kind.GAUGE,
)
GATE_WAIT = Family(
    "rebalancer_gate_wait_seconds",
    "Per pod released by the operator at its join gate, from the pod's creation until the "
    "operator opened its gate.",
    Kind.HISTOGRAM,
    buckets=(1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0),
)
ENFORCED_REBALANCES = Family(
    "rebalancer_enforced_rebalances",
    "Enforce requests the operator sent, by final outcome (the sidecar's, or skipped, "
    "unreachable, unsupported).",
    Kind.COUNTER,
    label="outcome",
)
OPERATOR_INFO = Info(
    "rebalancer_operator",
    "The running operator's version.",
    registry=REGISTRY,
)

GROUP_SERIES = GroupSeries(
    (
        REBALANCES,
        GROUP_REBALANCES,
        GROUP_MEMBERS,
        GROUP_GENERATION,
        GROUP_STATE,
        STREAMS_TASKS,
        GROUP_ASSIGNED_PARTITIONS,
        GROUP_PARTITIONS,
        GROUP_LAG,
        GROUP_LAST_REBALANCE,
        GROUP_LAST_OBSERVATION,
        GROUP_READY,
        GROUP_DEGRADED,
        OBSERVATION_FAILURES,
        GATE_BYPASSES,
        TIME_TO_STABLE,
        UNOWNED_PARTITION_SECONDS,
        ROLLOUT_PHASE,
        ROLLOUT_BATCHES,
        ROLLOUT_BATCHES_DONE,
        GATE_WAIT,
        ENFORCED_REBALANCES,
    )
)
REGISTRY.register(GROUP_SERIES)

OPERATOR_INFO.info({"version": __version__})
# Series that exist from the start let rate() and increase() see their first increment.
for _outcome in OBSERVATION_OUTCOMES:
    OBSERVATION_DURATION.labels(_outcome)
for _reason in REPORT_REJECTIONS:
    REPORTS_REJECTED.labels(_reason)


def _record(namespace: str, consumergroup: str, group_id: str) -> GroupRecord:
    """The group's record; a new spec.groupId starts a new one, whose series replace the old
    id's (kept, they would look like two groups observed)."""
    record = GROUP_SERIES.record(namespace, consumergroup, group_id)
    for cause in RebalanceCause:
        record.values.setdefault((REBALANCES.name, cause.value), 0.0)
    return record


def _set_or_drop(record: GroupRecord, family: Family, value: float | None) -> None:
    # A missing figure is dropped rather than kept at its last value, so graphs show a gap
    # instead of a stale number that looks current.
    if value is None:
        record.values.pop((family.name, ""), None)
    else:
        record.values[(family.name, "")] = float(value)


def _increase(record: GroupRecord, family: Family, amount: float, label: str = "") -> None:
    key = (family.name, label)
    record.values[key] = record.values.get(key, 0.0) + amount


def record_rebalance(namespace: str, consumergroup: str, group_id: str, cause: str) -> None:
    """Count one detected rebalance of the ConsumerGroup `namespace/consumergroup`."""
    record = _record(namespace, consumergroup, group_id)
    known = {member.value for member in RebalanceCause}
    _increase(record, REBALANCES, 1.0, cause if cause in known else RebalanceCause.UNKNOWN.value)


def publish_snapshot(
    namespace: str,
    consumergroup: str,
    group_id: str,
    snapshot: GroupSnapshot,
    tracking: GroupTracking,
) -> None:
    """Export what one successful observation saw, with the tracking kept after it.

    The generation falls back to the tracked one, as the status does, because classic
    DescribeGroups does not tell it.
    """
    record = _record(namespace, consumergroup, group_id)
    state = str(snapshot.state)
    record.current[GROUP_STATE.name] = state if state in GROUP_STATES else "Unknown"
    generation = tracking.generation if snapshot.generation is None else snapshot.generation
    _set_or_drop(record, GROUP_MEMBERS, snapshot.members)
    _set_or_drop(record, GROUP_REBALANCES, tracking.rebalances)
    _set_or_drop(record, GROUP_LAST_OBSERVATION, snapshot.observed_at)
    _set_or_drop(record, GROUP_GENERATION, generation)
    _set_or_drop(record, GROUP_ASSIGNED_PARTITIONS, snapshot.assigned_partitions)
    _set_or_drop(record, GROUP_PARTITIONS, snapshot.total_partitions)
    _set_or_drop(record, GROUP_LAG, snapshot.lag)
    _set_or_drop(record, GROUP_LAST_REBALANCE, tracking.last_rebalance_at)


def publish_streams_tasks(
    namespace: str, consumergroup: str, group_id: str, tasks: Mapping[str, int] | None
) -> None:
    """Export a streams group's tasks by kind; None (not a streams group, or no longer one)
    drops the series."""
    record = _record(namespace, consumergroup, group_id)
    for key in [key for key in record.values if key[0] == STREAMS_TASKS.name]:
        del record.values[key]
    for kind, count in (tasks or {}).items():
        record.values[(STREAMS_TASKS.name, kind)] = float(count)


def record_time_to_stable(
    namespace: str, consumergroup: str, group_id: str, seconds: float | None
) -> None:
    """Observe one time to Stable (planning.stable_spells); None: no spell ended."""
    record = _record(namespace, consumergroup, group_id)
    # Present from the group's first observation, so rate() sees the first rebalance.
    histogram = GROUP_SERIES.histogram(record, TIME_TO_STABLE.name)
    if seconds is not None:
        histogram.observe(TIME_TO_STABLE.buckets, seconds)


def record_rebalance_records(
    namespace: str, consumergroup: str, group_id: str, records: Iterable[RebalanceEvent]
) -> None:
    """Export the partition-seconds without an owner of rebalance records as they are settled
    (once each), where known."""
    record = _record(namespace, consumergroup, group_id)
    # Present from the group's first observation, so increase() sees the first rebalance.
    _increase(record, UNOWNED_PARTITION_SECONDS, 0.0)
    for event in records:
        unowned = event.stop_the_world_partition_s
        if unowned is not None:
            _increase(record, UNOWNED_PARTITION_SECONDS, max(unowned, 0.0))


def publish_rollout(namespace: str, consumergroup: str, group_id: str, state: RolloutState) -> None:
    """Export the rollout planner's phase and how many of its batches are done."""
    record = _record(namespace, consumergroup, group_id)
    record.current[ROLLOUT_PHASE.name] = state.phase.value
    planned = 0 if state.phase is RolloutPhase.IDLE else state.batches
    _set_or_drop(record, ROLLOUT_BATCHES, planned)
    _set_or_drop(record, ROLLOUT_BATCHES_DONE, batches_done(state))


def record_gate_waits(
    namespace: str, consumergroup: str, group_id: str, waits: Iterable[float]
) -> None:
    """Observe how long each pod the operator released had waited at its gate."""
    record = _record(namespace, consumergroup, group_id)
    for seconds in waits:
        GROUP_SERIES.histogram(record, GATE_WAIT.name).observe(GATE_WAIT.buckets, seconds)


def record_enforcement(namespace: str, consumergroup: str, group_id: str, outcome: str) -> None:
    """Count one enforce request's final outcome; anything outside ENFORCE_OUTCOMES is ignored
    (answers still under way are counted when their final one comes)."""
    record = _record(namespace, consumergroup, group_id)
    for known in ENFORCE_OUTCOMES:
        _increase(record, ENFORCED_REBALANCES, 1.0 if known == outcome else 0.0, known)


def publish_conditions(
    namespace: str, consumergroup: str, group_id: str, conditions: Iterable[Condition]
) -> None:
    """Export the Ready and Degraded conditions about to be written; other types are ignored."""
    record = _record(namespace, consumergroup, group_id)
    gauges = {ConditionType.READY: GROUP_READY, ConditionType.DEGRADED: GROUP_DEGRADED}
    for condition in conditions:
        gauge = gauges.get(condition.type)
        if gauge is not None:
            _set_or_drop(record, gauge, 1 if condition.status is ConditionStatus.TRUE else 0)


def record_gate_bypasses(namespace: str, consumergroup: str, group_id: str, pods: int) -> None:
    """Count `pods` whose gates were bypassed, once each (the operator marks the pods)."""
    _increase(_record(namespace, consumergroup, group_id), GATE_BYPASSES, float(pods))


def record_observation_failure(
    namespace: str, consumergroup: str, group_id: str, reason: str
) -> None:
    """Count one failed observation; `reason` is the Degraded condition's reason."""
    _increase(_record(namespace, consumergroup, group_id), OBSERVATION_FAILURES, 1.0, reason)


def record_observation_duration(seconds: float, *, succeeded: bool) -> None:
    outcome = OBSERVATION_OUTCOMES[0] if succeeded else OBSERVATION_OUTCOMES[1]
    OBSERVATION_DURATION.labels(outcome).observe(seconds)


def record_status_write(reason: str) -> None:
    STATUS_WRITES.labels(reason).inc()


def record_status_field_dropped(field: str) -> None:
    """Count one status field left out of a write; `field` is bounded by the operator's own
    writers (a path the code writes, list indexes and map keys taken out)."""
    STATUS_FIELDS_DROPPED.labels(field).inc()


def record_kubernetes_request(verb: str, resource: str) -> None:
    KUBERNETES_REQUESTS.labels(verb, resource).inc()


def record_kafka_requests(sent: Mapping[str, int]) -> None:
    """Count the Kafka requests sent since the last call, by Kafka API name (a fixed set of
    librdkafka's, so the label stays bounded)."""
    for request, count in sent.items():
        KAFKA_REQUESTS.labels(request).inc(count)


def record_describe_batch(groups: int) -> None:
    KAFKA_DESCRIBE_BATCH.observe(groups)


def record_report_accepted() -> None:
    REPORTS_ACCEPTED.inc()


def record_leader(leading: bool) -> None:
    LEADER.set(1 if leading else 0)


def record_shards(held: int, taken: int, released: int, lost: int) -> None:
    SHARDS_HELD.set(held)
    for move, count in (("taken", taken), ("released", released), ("lost", lost)):
        if count:
            SHARD_MOVES.labels(move).inc(count)


def record_daemons_here(count: int) -> None:
    DAEMONS_HERE.set(count)


def record_report_unclaimed() -> None:
    REPORTS_UNCLAIMED.inc()


def record_report_rejected(reason: str) -> None:
    """Count one rejected report; `reason` is one of REPORT_REJECTIONS ("other" otherwise)."""
    REPORTS_REJECTED.labels(reason if reason in REPORT_REJECTIONS else "other").inc()


def forget_group(namespace: str, consumergroup: str) -> None:
    """Drop every series of a deleted ConsumerGroup, so it stops appearing in queries."""
    GROUP_SERIES.forget(namespace, consumergroup)


def metrics_handler() -> Handler:
    """An aiohttp handler that serves this module's registry in the exposition format."""
    return make_aiohttp_handler(REGISTRY)
