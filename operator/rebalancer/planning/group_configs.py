"""Per-group dynamic configs (spec.policy.groupConfigs): which Kafka configs a spec asks for,
whether the broker's bounds allow them, and what status says of them.

Pure: the reconciler (rebalancer.reconcilers.group_configs) reads the broker's configs and the
group's, calls these, and writes. A bound is checked only when the broker reports it (Apache
Kafka lists every `group.*` setting; a broker that lists none is left to refuse on its own, and
its refusal is reported as it came).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.structs.group_configs_spec import (
    GROUP_CONFIGS_PATH,
    STREAMS_DELAY_CONFIG,
    GroupConfigsSpec,
)
from rebalancer.structs.problems import FieldProblem


@dataclass(frozen=True)
class GroupConfigField:
    """One field of spec.policy.groupConfigs: its Kafka config and the broker settings that
    bound it (None: Kafka fixes that end, and the spec's schema already checks it)."""

    block: str  # consumer or streams
    field: str  # the spec's camelCase name
    attribute: str  # the model's snake_case name
    key: str  # the GROUP config
    low_key: str | None
    high_key: str | None

    @property
    def path(self) -> str:
        return f"{GROUP_CONFIGS_PATH}.{self.block}.{self.field}"


FIELDS: tuple[GroupConfigField, ...] = (
    GroupConfigField(
        "consumer",
        "sessionTimeoutMs",
        "session_timeout_ms",
        "consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    GroupConfigField(
        "consumer",
        "heartbeatIntervalMs",
        "heartbeat_interval_ms",
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    GroupConfigField(
        "consumer",
        "assignmentIntervalMs",
        "assignment_interval_ms",
        "consumer.assignment.interval.ms",
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
    ),
    GroupConfigField(
        "streams",
        "initialRebalanceDelayMs",
        "initial_rebalance_delay_ms",
        STREAMS_DELAY_CONFIG,
        None,
        None,
    ),
    GroupConfigField(
        "streams",
        "sessionTimeoutMs",
        "session_timeout_ms",
        "streams.session.timeout.ms",
        "group.streams.min.session.timeout.ms",
        "group.streams.max.session.timeout.ms",
    ),
    GroupConfigField(
        "streams",
        "heartbeatIntervalMs",
        "heartbeat_interval_ms",
        "streams.heartbeat.interval.ms",
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    GroupConfigField(
        "streams",
        "numStandbyReplicas",
        "num_standby_replicas",
        "streams.num.standby.replicas",
        None,
        "group.streams.max.standby.replicas",
    ),
)
# spec.policy.settings sets these itself for a KIP-848 group (planning.consumer_settings).
SETTINGS_OWNED = {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}


def _value(spec: GroupConfigsSpec, field: GroupConfigField) -> int | None:
    block = getattr(spec, field.block)
    if block is None:
        return None
    value = getattr(block, field.attribute)
    return int(value) if value is not None else None


def wanted_configs(spec: GroupConfigsSpec) -> dict[str, str]:
    """The GROUP configs the spec sets (Kafka name -> value as the broker spells it)."""
    return {field.key: str(value) for field in FIELDS if (value := _value(spec, field)) is not None}


def field_path(key: str) -> str:
    """The spec field of a GROUP config, for messages that start from the broker's name."""
    return next((field.path for field in FIELDS if field.key == key), GROUP_CONFIGS_PATH)


def _integer(configs: Mapping[str, Any], key: str | None) -> int | None:
    if key is None:
        return None
    try:
        return int(str(configs[key]).strip())
    except (KeyError, TypeError, ValueError):
        return None


def _bound_problem(field: GroupConfigField, value: int, low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return (
            f"({value}) is outside the broker's bounds for {field.key}: {low} to {high} "
            f"({field.low_key}, {field.high_key})"
        )
    if low is not None:
        return f"({value}) is below the broker's {field.low_key} ({low}) for {field.key}"
    return f"({value}) is above the broker's {field.high_key} ({high}) for {field.key}"


def _fix(field: GroupConfigField, low: int | None, high: int | None) -> str:
    allowed = (
        f"from {low} to {high}"
        if low is not None and high is not None
        else (f"of at least {low}" if low is not None else f"of at most {high}")
    )
    return (
        f"set a value {allowed}, or widen the broker's bounds first (static broker settings: "
        "a rolling restart)"
    )


def bound_problems(spec: GroupConfigsSpec, broker_configs: Mapping[str, Any]) -> list[FieldProblem]:
    """Every field outside the bounds the broker reports, with the bound's name and the fix."""
    problems: list[FieldProblem] = []
    for field in FIELDS:
        value = _value(spec, field)
        if value is None:
            continue
        low = _integer(broker_configs, field.low_key)
        high = _integer(broker_configs, field.high_key)
        if (low is not None and value < low) or (high is not None and value > high):
            problems.append(
                FieldProblem(
                    field.path, _bound_problem(field, value, low, high), _fix(field, low, high)
                )
            )
    return problems


def overlap_problems(spec: GroupConfigsSpec, settings_managed: bool) -> list[FieldProblem]:
    """A config spec.policy.settings also sets: two owners would overwrite each other."""
    if not settings_managed:
        return []
    return [
        FieldProblem(
            field.path,
            f"sets {field.key}, which spec.policy.settings also sets for a KIP-848 group",
            f"set it in one place: drop {field.path} or use spec.policy.settings."
            f"{field.field} alone",
        )
        for field in FIELDS
        if field.key in SETTINGS_OWNED and _value(spec, field) is not None
    ]


def check_group_configs(
    spec: GroupConfigsSpec, broker_configs: Mapping[str, Any], settings_managed: bool
) -> list[FieldProblem]:
    """Every reason not to send the spec's configs to the broker; [] when it may."""
    return overlap_problems(spec, settings_managed) + bound_problems(spec, broker_configs)


# The DescribeConfigs source of a value set on the group itself.
GROUP_OWN_SOURCE = "group-config"


def differing(
    wanted: Mapping[str, str],
    current: Mapping[str, str | None],
    sources: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The configs the group does not hold as its own yet: only those are altered.

    A wanted value equal to the broker's default is set on the group all the same: the spec
    asked for that value, and a later change of the broker default must not move it."""
    known = sources or {}
    return {
        key: value
        for key, value in wanted.items()
        if current.get(key) != value or known.get(key, GROUP_OWN_SOURCE) != GROUP_OWN_SOURCE
    }


def configs_status(
    wanted: Mapping[str, str],
    current: Mapping[str, str | None],
    sources: Mapping[str, str],
) -> dict[str, dict[str, str]]:
    """Each wanted config as the broker reads it back, with where its value comes from
    (group-config when the group's own value is in force, default-config when not)."""
    shown: dict[str, dict[str, str]] = {}
    for key in sorted(wanted):
        entry = {"value": str(current.get(key))}
        if key in sources:
            entry["source"] = sources[key]
        shown[key] = entry
    return shown
