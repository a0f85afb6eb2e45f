"""`spec.policy.settings` and `spec.policy.brokerDelay`, parsed; every problem names its field.

`settings` is what the operator writes into the consumers' pod template (a mounted
`consumer.properties` and environment variables); `brokerDelay` is what it wants for the
cluster-wide `group.initial.rebalance.delay.ms`. Both are absent unless the user asks: an
operator that starts rewriting pod templates on upgrade would restart fleets nobody asked it to.
Checks that need the workload or the broker live in rebalancer.planning.consumer_settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from rebalancer.structs.problems import FieldProblem, SpecInvalid

SETTINGS_PATH = "spec.policy.settings"
DELAY_PATH = "spec.policy.brokerDelay"
MAX_PROPERTIES = 64
# Kafka client property names: dotted lower-case words; Java also accepts other letters.
_PROPERTY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_ENV_PREFIX = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_MOUNT_PATH = re.compile(r"^/[A-Za-z0-9._/-]{0,250}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

E = TypeVar("E", bound=StrEnum)


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


class DelayMode(StrEnum):
    RECOMMEND = "recommend"  # status and an Event with the value to set
    STRIMZI = "strimzi"  # patch the Strimzi Kafka resource's spec.kafka.config
    ALTER_CONFIGS = "alter-configs"  # IncrementalAlterConfigs, where the broker takes it live


@dataclass(frozen=True)
class StrimziRef:
    name: str
    namespace: str | None = None  # None: the ConsumerGroup's namespace


@dataclass(frozen=True)
class BrokerDelayPolicy:
    mode: DelayMode = DelayMode.RECOMMEND
    delay_ms: int = 3000
    # The most this group tolerates: the cluster's value is capped at the smallest of these.
    max_delay_ms: int = 30000
    strimzi: StrimziRef | None = None


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[FieldProblem] = []

    def fail(self, key: str, message: str, fix: str) -> None:
        self.problems.append(FieldProblem(f"{self.path}.{key}" if key else self.path, message, fix))

    def mapping(self, raw: object, key: str) -> Mapping[str, object]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.fail(key, "must be an object", f"write {self.path}.{key} as a mapping")
            return {}
        return raw

    def integer(
        self, raw: Mapping[str, object], key: str, default: int | None, low: int, high: int
    ) -> int | None:
        value = raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be an integer", "use a number of milliseconds")
            return default
        if not low <= value <= high:
            self.fail(key, f"must be between {low} and {high}, got {value}", "use a value in range")
            return default
        return value

    def boolean(self, raw: Mapping[str, object], key: str, default: bool) -> bool:
        value = raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, "must be true or false", "use a bool")
            return default
        return value

    def choice(self, raw: Mapping[str, object], key: str, enum: type[E], default: E) -> E:
        value = raw.get(key)
        if value is None:
            return default
        allowed = [member.value for member in enum]
        if value not in allowed:
            self.fail(key, f"unsupported value {value!r}", "use one of: " + ", ".join(allowed))
            return default
        return enum(value)

    def string(self, raw: Mapping[str, object], key: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(key, "must be a string", "quote the value")
            return None
        return value


def _required_int(reader: _Reader, raw: Mapping[str, object], key: str, *args: int) -> int:
    default, low, high = args
    value = reader.integer(raw, key, default, low, high)
    return default if value is None else value


def _parse_env(reader: _Reader, raw: Mapping[str, object]) -> EnvPolicy:
    body = reader.mapping(raw.get("env"), "env")
    outer, reader = reader, _Reader(f"{reader.path}.env")
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


def _parse_properties(reader: _Reader, raw: object) -> tuple[tuple[str, str], ...]:
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
    reader = _Reader(path)
    if not isinstance(raw, Mapping):
        raise SpecInvalid((FieldProblem(path, "must be an object", "see the CRD docs"),))
    base = SettingsPolicy()
    session = _required_int(reader, raw, "sessionTimeoutMs", base.session_timeout_ms, 1, 3600000)
    heartbeat = reader.integer(raw, "heartbeatIntervalMs", None, 1, 3600000)
    max_poll = _required_int(
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


def parse_broker_delay_policy(raw: object, path: str = DELAY_PATH) -> BrokerDelayPolicy | None:
    """`spec.policy.brokerDelay` (None when absent: no delay is wanted), or SpecInvalid."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecInvalid((FieldProblem(path, "must be an object", "see the CRD docs"),))
    reader = _Reader(path)
    base = BrokerDelayPolicy()
    mode = reader.choice(raw, "mode", DelayMode, base.mode)
    delay = _required_int(reader, raw, "delayMs", base.delay_ms, 0, 300000)
    cap = _required_int(reader, raw, "maxDelayMs", base.max_delay_ms, 0, 300000)
    if delay > cap:
        reader.fail(
            "delayMs",
            f"({delay}) is above maxDelayMs ({cap})",
            "raise maxDelayMs or lower delayMs",
        )
    strimzi: StrimziRef | None = None
    strimzi_raw = reader.mapping(raw.get("strimzi"), "strimzi")
    if strimzi_raw:
        name = reader.string(strimzi_raw, "name")
        namespace = reader.string(strimzi_raw, "namespace")
        for key, value in (("name", name), ("namespace", namespace)):
            if value is not None and not _DNS_SUBDOMAIN.match(value):
                reader.fail(f"strimzi.{key}", f"{value[:80]!r} is not a valid name", "fix it")
        if name is None:
            reader.fail("strimzi.name", "is required", "name the Strimzi Kafka resource")
        else:
            strimzi = StrimziRef(name, namespace)
    if mode is DelayMode.STRIMZI and strimzi is None and not strimzi_raw:
        reader.fail(
            "strimzi",
            "is required with mode strimzi",
            "set strimzi.name to the Kafka resource (kafka.strimzi.io) of this cluster",
        )
    if reader.problems:
        raise SpecInvalid(tuple(reader.problems))
    return BrokerDelayPolicy(mode, delay, cap, strimzi)
