"""`spec.policy.groupConfigs` as a typed model: per-group dynamic configs set on the broker.

Apache Kafka keeps some group settings per group, on the GROUP config resource: set with
IncrementalAlterConfigs and read with DescribeConfigs, live, no broker restart. KIP-848 consumer
groups have `consumer.*` configs (4.0+; `consumer.assignment.interval.ms` from 4.3, KIP-1263),
streams groups (KIP-1071) `streams.*` configs (4.2+), among them the per-group KIP-134 delay
`streams.initial.rebalance.delay.ms`. Classic groups have none: their delay is brokerDelay's.

A field left out is left alone on the broker (its value stays whatever it is). The bounds here
are only the ones Kafka itself fixes; the broker's own `group.*.min/max` bounds are checked
against what the broker reports (rebalancer.planning.group_configs) before anything is set.
The CRD's block is written by hand in the style `make crd` renders (this model can render it).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.spec_models import Int, SpecModel, cel

GROUP_CONFIGS_PATH = "spec.policy.groupConfigs"
# A streams group's own KIP-134 delay, and the spec field that sets it.
STREAMS_DELAY_CONFIG = "streams.initial.rebalance.delay.ms"
STREAMS_CONFIGS_PATH = f"{GROUP_CONFIGS_PATH}.streams"
STREAMS_DELAY_PATH = f"{STREAMS_CONFIGS_PATH}.initialRebalanceDelayMs"
# Kafka's own limits on a timeout: an int of milliseconds.
MAX_MS = 2147483647


def _heartbeat_rule(block: str) -> dict[str, str]:
    return cel(
        "!has(self.heartbeatIntervalMs) || !has(self.sessionTimeoutMs) || "
        "self.heartbeatIntervalMs < self.sessionTimeoutMs",
        f"{block}.heartbeatIntervalMs must be below {block}.sessionTimeoutMs",
        ".heartbeatIntervalMs",
    )


def _heartbeat_problems(
    path: str, heartbeat_ms: int | None, session_ms: int | None
) -> list[FieldProblem]:
    """The broker refuses a heartbeat that is not below the session timeout; say so first."""
    if heartbeat_ms is None or session_ms is None or heartbeat_ms < session_ms:
        return []
    return [
        FieldProblem(
            f"{path}.heartbeatIntervalMs",
            f"({heartbeat_ms}) is not below sessionTimeoutMs ({session_ms})",
            "use a heartbeat interval well below the session timeout (a third is usual)",
        )
    ]


class ConsumerGroupConfigsSpec(
    SpecModel, json_schema_extra={"x-kubernetes-validations": [_heartbeat_rule("consumer")]}
):
    """Configs of a KIP-848 consumer group (group.protocol=consumer), Apache Kafka 4.0+."""

    session_timeout_ms: Annotated[
        Int | None,
        Field(
            ge=1,
            le=MAX_MS,
            description="consumer.session.timeout.ms; within the broker's "
            "group.consumer.min/max.session.timeout.ms.",
        ),
    ] = None
    heartbeat_interval_ms: Annotated[
        Int | None,
        Field(
            ge=1,
            le=MAX_MS,
            description="consumer.heartbeat.interval.ms; within the broker's "
            "group.consumer.min/max.heartbeat.interval.ms, below sessionTimeoutMs.",
        ),
    ] = None
    assignment_interval_ms: Annotated[
        Int | None,
        Field(
            ge=0,
            le=MAX_MS,
            description="consumer.assignment.interval.ms (Apache Kafka 4.3+, KIP-1263): the "
            "least time between two target assignments; within the broker's "
            "group.consumer.min/max.assignment.interval.ms.",
        ),
    ] = None

    def problems(self, path: str) -> list[FieldProblem]:
        return _heartbeat_problems(path, self.heartbeat_interval_ms, self.session_timeout_ms)


class StreamsGroupConfigsSpec(
    SpecModel, json_schema_extra={"x-kubernetes-validations": [_heartbeat_rule("streams")]}
):
    """Configs of a streams group (KIP-1071, group.protocol=streams), Apache Kafka 4.2+."""

    initial_rebalance_delay_ms: Annotated[
        Int | None,
        Field(
            ge=0,
            le=MAX_MS,
            description="streams.initial.rebalance.delay.ms: the group's own KIP-134 delay, "
            "applied whenever the group is empty (the broker default is "
            "group.streams.initial.rebalance.delay.ms).",
        ),
    ] = None
    session_timeout_ms: Annotated[
        Int | None,
        Field(
            ge=1,
            le=MAX_MS,
            description="streams.session.timeout.ms; within the broker's "
            "group.streams.min/max.session.timeout.ms.",
        ),
    ] = None
    heartbeat_interval_ms: Annotated[
        Int | None,
        Field(
            ge=1,
            le=MAX_MS,
            description="streams.heartbeat.interval.ms; within the broker's "
            "group.streams.min/max.heartbeat.interval.ms, below sessionTimeoutMs.",
        ),
    ] = None
    num_standby_replicas: Annotated[
        Int | None,
        Field(
            ge=0,
            le=MAX_MS,
            description="streams.num.standby.replicas; at most the broker's "
            "group.streams.max.standby.replicas.",
        ),
    ] = None

    def problems(self, path: str) -> list[FieldProblem]:
        return _heartbeat_problems(path, self.heartbeat_interval_ms, self.session_timeout_ms)


class GroupConfigsSpec(SpecModel):
    """Per-group dynamic configs the operator sets on the group's GROUP config resource with
    IncrementalAlterConfigs, live (no broker restart), after checking them against the
    broker's group.consumer.* / group.streams.* bounds, and reads back with DescribeConfigs
    (status.settings.perGroupConfigs). A field left out is left alone. Classic groups have no
    group configs."""

    consumer: Annotated[
        ConsumerGroupConfigsSpec | None,
        Field(description="KIP-848 consumer group configs (consumer.*), Apache Kafka 4.0+."),
    ] = None
    streams: Annotated[
        StreamsGroupConfigsSpec | None,
        Field(description="Streams group configs (streams.*), Apache Kafka 4.2+."),
    ] = None
