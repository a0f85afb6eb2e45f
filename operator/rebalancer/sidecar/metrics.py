"""Prometheus metrics of the sidecar, in a registry of its own (served at GET /metrics).

One sidecar serves one group, so no metric carries a group label; answers and statuses are
small fixed sets. docs/metrics.md lists every metric.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from rebalancer.metric_registries import registry_with_process_collectors
from rebalancer.structs.brokers import GroupState

# process_* and python_*: the sidecar's own CPU, memory and restarts next to the consumer's.
REGISTRY = registry_with_process_collectors()

ANSWERS = (
    "accepted",
    "duplicate",
    "unauthorized",
    "rate_limited",
    "invalid",
    "unknown_group",
    "not_member",
    "unavailable",
    "unsupported",
)
OUTCOMES = ("enforced", "in-progress", "failed", "expired")
# A streams group's NotReady is left out: the sidecar joins no streams group.
STATES = tuple(state.value for state in GroupState if state is not GroupState.NOT_READY)

REQUESTS = Counter(
    "rebalancer_sidecar_requests",
    "Enforcement requests received over HTTP, by answer.",
    ["answer"],
    registry=REGISTRY,
)
OUTCOMES_WRITTEN = Counter(
    "rebalancer_sidecar_outcomes",
    "Outcomes this sidecar wrote as the group's actor, by status.",
    ["status"],
    registry=REGISTRY,
)
ENFORCE_LATENCY = Histogram(
    "rebalancer_sidecar_enforce_latency_seconds",
    "From the actor's rejoin until it holds the new generation.",
    buckets=(0.5, 1, 2, 3, 5, 8, 13, 21, 34, 55, 90, 150, 300),
    registry=REGISTRY,
)
GENERATION = Gauge(
    "rebalancer_sidecar_generation",
    "The sidecar's own generation in the group (member epoch under KIP-848); -1 before joining.",
    registry=REGISTRY,
)
ACTOR = Gauge(
    "rebalancer_sidecar_actor",
    "1 while this sidecar owns the control partition and acts on requests, else 0.",
    registry=REGISTRY,
)
GROUP_STATE = Gauge(
    "rebalancer_sidecar_group_state",
    "1 for the group's state as last described by the broker, 0 for the others.",
    ["state"],
    registry=REGISTRY,
)
for _answer in ANSWERS:
    REQUESTS.labels(_answer)
for _status in OUTCOMES:
    OUTCOMES_WRITTEN.labels(_status)
GENERATION.set(-1)


def count_answer(answer: str) -> None:
    REQUESTS.labels(answer if answer in ANSWERS else "invalid").inc()


def count_outcome(status: str) -> None:
    if status in OUTCOMES:
        OUTCOMES_WRITTEN.labels(status).inc()


def publish_state(state: str | None) -> None:
    shown = state if state in STATES else "Unknown"
    for name in STATES:
        GROUP_STATE.labels(name).set(1.0 if name == shown else 0.0)
