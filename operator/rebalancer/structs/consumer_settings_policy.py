"""`spec.policy.settings`, parsed: what the operator writes into the consumers' pod template (a
mounted `consumer.properties` and environment variables); every problem names its field.

Absent unless the user asks: an operator that starts rewriting pod templates on upgrade would
restart fleets nobody asked it to. Checks that need the workload or the broker live in
rebalancer.planning.consumer_settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rebalancer.structs.field_reader import FieldReader, required_int
from rebalancer.structs.problems import FieldProblem, SpecInvalid

SETTINGS_PATH = "spec.policy.settings"
MAX_PROPERTIES = 64
# Kafka client property names: dotted lower-case words; Java also accepts other letters.
_PROPERTY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_ENV_PREFIX = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._/-]{0,250}$")


class AssignmentStrategy(StrEnum):
    """partition.assignment.strategy, by librdkafka's short names (Java takes class names)."""

    COOPERATIVE_STICKY = "cooperative-sticky"
    RANGE = "range"
    ROUNDROBIN = "roundrobin"
    STICKY = "sticky"  # Java's eager StickyAssignor; librdkafka has none

    @property
    def cooperative(self) -> bool:
        return self is AssignmentStrategy.COOPERATIVE_STICKY


class ClientLibrary(StrEnum):
    """Which client the consumers run: assignor names and the assignor upgrade path differ."""

    AUTO = "auto"  # java for the spring env convention, librdkafka otherwise
    JAVA = "java"
    LIBRDKAFKA = "librdkafka"


class EnvConvention(StrEnum):
    KAFKA = "kafka"  # session.timeout.ms -> KAFKA_SESSION_TIMEOUT_MS
    SPRING = "spring"  # -> SPRING_KAFKA_CONSUMER_PROPERTIES_SESSION_TIMEOUT_MS
    CUSTOM = "custom"  # -> <prefix>SESSION_TIMEOUT_MS
    NONE = "none"  # the properties file only


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


def _parse_env(reader: FieldReader, raw: Mapping[str, object]) -> EnvPolicy:
    body = reader.mapping(raw.get("env"), "env")
    outer, reader = reader, FieldReader(f"{reader.path}.env")
    reader.problems = outer.problems  # one list: the caller reports them all
    convention = reader.choice(body, "convention", EnvConvention, EnvConvention.KAFKA)
    prefix = reader.string(body, "prefix")
    given = prefix is not None
    if prefix is not None and not _ENV_PREFIX.match(prefix):
        reader.fail(
            "prefix",
            f"{prefix[:60]!r} is not an environment variable prefix",
            "use upper-case letters, digits and _, for example MYAPP_KAFKA_",
        )
        prefix = None
    if convention is EnvConvention.CUSTOM and not given:
        reader.fail("prefix", "is required with convention custom", "set env.prefix")
    if convention is not EnvConvention.CUSTOM and prefix is not None:
        reader.fail(
            "prefix",
            f"is only used with convention custom, not {convention.value}",
            "remove env.prefix or set env.convention: custom",
        )
    variable = reader.string(body, "configFileVariable")
    if variable is None:
        variable = EnvPolicy.config_file_variable
    elif variable and not _ENV_NAME.match(variable):
        reader.fail(
            "configFileVariable",
            f"{variable[:60]!r} is not an environment variable name",
            'use letters, digits and _ (or "" to set no variable)',
        )
        variable = EnvPolicy.config_file_variable
    return EnvPolicy(convention, prefix, variable)


def _parse_properties(reader: FieldReader, raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        reader.fail("properties", "must be a map of property name to value", "write key: value")
        return ()
    if len(raw) > MAX_PROPERTIES:
        reader.fail(
            "properties",
            f"has {len(raw)} entries, more than {MAX_PROPERTIES}",
            "keep only the properties that differ from the client's defaults",
        )
    items: list[tuple[str, str]] = []
    for key, value in raw.items():
        where = f"properties[{key}]"
        if not isinstance(key, str) or not _PROPERTY_KEY.match(key):
            reader.fail(
                where, "is not a Kafka client property name", "use names like fetch.min.bytes"
            )
            continue
        if not isinstance(value, str):
            reader.fail(where, "must be a string", f'quote it: {key}: "{value}"')
            continue
        if "\n" in value or "\r" in value:
            reader.fail(where, "must be one line", "remove the line break")
            continue
        items.append((key, value))
    return tuple(sorted(items))


def parse_settings_policy(raw: object, path: str = SETTINGS_PATH) -> SettingsPolicy | None:
    """`spec.policy.settings` (None when absent: settings are not managed), or SpecInvalid."""
    if raw is None:
        return None
    reader = FieldReader(path)
    if not isinstance(raw, Mapping):
        raise SpecInvalid((FieldProblem(path, "must be an object", "see the CRD docs"),))
    base = SettingsPolicy()
    session = required_int(reader, raw, "sessionTimeoutMs", base.session_timeout_ms, 1, 3600000)
    heartbeat = reader.integer(raw, "heartbeatIntervalMs", None, 1, 3600000)
    max_poll = required_int(
        reader, raw, "maxPollIntervalMs", base.max_poll_interval_ms, 1, 86400000
    )
    strategy: AssignmentStrategy | None = None
    if raw.get("assignmentStrategy") is not None:
        strategy = reader.choice(
            raw, "assignmentStrategy", AssignmentStrategy, AssignmentStrategy.COOPERATIVE_STICKY
        )
    mount = reader.string(raw, "mountPath") or base.mount_path
    if not _MOUNT_PATH.match(mount) or "/../" in f"{mount}/" or mount == "/":
        reader.fail("mountPath", f"{mount[:80]!r} is not an absolute directory", "use /etc/kafka")
        mount = base.mount_path
    policy = SettingsPolicy(
        session_timeout_ms=session,
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=max_poll,
        assignment_strategy=strategy,
        static_membership=reader.boolean(raw, "staticMembership", False),
        client_library=reader.choice(raw, "clientLibrary", ClientLibrary, ClientLibrary.AUTO),
        env=_parse_env(reader, raw),
        mount_path=mount.rstrip("/"),
        properties=_parse_properties(reader, raw.get("properties")),
    )
    if reader.problems:
        raise SpecInvalid(tuple(reader.problems))
    return policy
