"""`spec.policy.settings` as the planner reads it: what the operator writes into the consumers'
pod template (a mounted `consumer.properties` and environment variables).

The block is defined, validated and described once, by the model
(consumer_group_spec.ConsumerSettingsSpec, from which the CRD is rendered); this module turns a
validated block into the frozen SettingsPolicy. Every problem names its field and the fix.

Absent unless the user asks: an operator that starts rewriting pod templates on upgrade would
restart fleets nobody asked it to. Checks that need the workload or the broker live in
rebalancer.planning.consumer_settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rebalancer.structs.consumer_group_spec import (
    AssignmentStrategy,
    ClientLibrary,
    ConsumerSettingsSpec,
    EnvConvention,
)
from rebalancer.structs.spec_models import read_spec

__all__ = [
    "KAFKA_PREFIX",
    "SETTINGS_PATH",
    "SPRING_PREFIX",
    "AssignmentStrategy",
    "ClientLibrary",
    "EnvConvention",
    "EnvPolicy",
    "SettingsPolicy",
    "parse_settings_policy",
    "settings_asked",
    "settings_policy_of",
]

SETTINGS_PATH = "spec.policy.settings"


SPRING_PREFIX = "SPRING_KAFKA_CONSUMER_PROPERTIES_"
KAFKA_PREFIX = "KAFKA_"


@dataclass(frozen=True)
class EnvPolicy:
    convention: EnvConvention = EnvConvention.KAFKA
    prefix: str | None = None  # custom convention only
    # The variable that tells the consumer where the properties file is; "" sets none.
    config_file_variable: str = "KAFKA_CONFIG_FILE"

    @property
    def effective_prefix(self) -> str | None:
        """The variable prefix, or None when no per-setting variables are written."""
        match self.convention:
            case EnvConvention.KAFKA:
                return KAFKA_PREFIX
            case EnvConvention.SPRING:
                return SPRING_PREFIX
            case EnvConvention.CUSTOM:
                return self.prefix
            case _:
                return None


@dataclass(frozen=True)
class SettingsPolicy:
    session_timeout_ms: int = 45000
    # None: derived (a third of the session timeout at most, Kafka's 3000 ms at most).
    heartbeat_interval_ms: int | None = None
    max_poll_interval_ms: int = 300000
    # None: cooperative-sticky; explicit values are kept apart so a KIP-848 group can say that
    # an assignor the user chose is not applied.
    assignment_strategy: AssignmentStrategy | None = None
    static_membership: bool = False
    client_library: ClientLibrary = ClientLibrary.AUTO
    env: EnvPolicy = field(default_factory=EnvPolicy)
    mount_path: str = "/etc/rebalancer"
    # Extra client properties, sorted by key (the rendering and the hash must not depend on the
    # order the user wrote them in).
    properties: tuple[tuple[str, str], ...] = ()

    @property
    def strategy(self) -> AssignmentStrategy:
        return self.assignment_strategy or AssignmentStrategy.COOPERATIVE_STICKY

    @property
    def library(self) -> ClientLibrary:
        if self.client_library is not ClientLibrary.AUTO:
            return self.client_library
        if self.env.convention is EnvConvention.SPRING:
            return ClientLibrary.JAVA
        return ClientLibrary.LIBRDKAFKA


def parse_settings_policy(raw: object, path: str = SETTINGS_PATH) -> SettingsPolicy | None:
    """`spec.policy.settings` (None when absent: settings are not managed), or SpecInvalid."""
    if raw is None:
        return None
    return settings_policy_of(read_spec(ConsumerSettingsSpec, raw, path))


def settings_policy_of(spec: ConsumerSettingsSpec) -> SettingsPolicy:
    """The SettingsPolicy of a validated block."""
    return SettingsPolicy(
        session_timeout_ms=spec.session_timeout_ms,
        heartbeat_interval_ms=spec.heartbeat_interval_ms,
        max_poll_interval_ms=spec.max_poll_interval_ms,
        assignment_strategy=spec.assignment_strategy,
        static_membership=spec.static_membership,
        client_library=spec.client_library,
        env=EnvPolicy(spec.env.convention, spec.env.prefix, spec.env.config_file_variable),
        mount_path=spec.mount_path,
        properties=tuple(sorted((spec.properties or {}).items())),
    )


def settings_asked(raw_spec: Mapping[str, Any], raw_status: Mapping[str, Any]) -> bool:
    """Whether a ConsumerGroup has anything for the settings reconcile to deliver or take
    back: a settings, brokerDelay or groupConfigs block, an injected sidecar, or settings it
    delivered before (status.settings), which a removed block leaves to be undone."""
    policy = raw_spec.get("policy")
    policy = policy if isinstance(policy, Mapping) else {}
    managed = any(policy.get(block) is not None for block in _DELIVERED_BLOCKS)
    enforce = policy.get("enforce")
    sidecar = enforce.get("sidecar") if isinstance(enforce, Mapping) else None
    injected = isinstance(sidecar, Mapping) and bool(sidecar.get("inject"))
    return managed or injected or bool(raw_status.get("settings"))


_DELIVERED_BLOCKS = ("settings", "brokerDelay", "groupConfigs")
