"""The ConsumerGroup spec as typed data, parsed from the resource body.

The CRD schema rejects most mistakes at admission, but the operator parses again: a cluster may
run an older CRD, a schema cannot check that a regex compiles, and the operator must never act
on half-understood input. Every problem names the field path the user has to fix.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy, parse_broker_delay_policy
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy, parse_settings_policy
from rebalancer.structs.enforce_policy import EnforceSpec, parse_enforce_policy
from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS
from rebalancer.structs.group_configs_spec import GroupConfigsSpec
from rebalancer.structs.problems import FieldProblem, SpecInvalid, kind_of
from rebalancer.structs.recommendations import LearningPolicy, parse_learning_policy
from rebalancer.structs.rollout_policy import RolloutPolicy, parse_rollout_policy
from rebalancer.structs.spec_models import read_spec

MAX_PATTERN_LENGTH = 1024
MAX_OPEN_REPEATS = 4
_GROUP_ID = re.compile(r"^[A-Za-z0-9._:/-]{1,249}$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_BOOTSTRAP = re.compile(r"^[A-Za-z0-9.\[\]:_-]+:(\d{1,5})$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Nested quantifiers such as (a+)+ backtrack exponentially in Python's re and in librdkafka's
# regex engine alike; refusing them up front keeps one bad resource from stalling a consumer.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:[^()\\]|\\.)*\)\s*[+*{]")
# The textual check above misses nesting through inner groups, ((a)+)+, and alternation under a
# repetition, (a|a)*: both took over a second on 25 characters and run for hours on a 249-character
# topic name, inside the observer's event loop. The parse tree shows both shapes whatever the
# spelling. re._parser has no stubs, hence the untyped import.
_SRE: Any = importlib.import_module("re._parser")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


E = TypeVar("E", bound=StrEnum)


class WorkloadKind(StrEnum):
    STATEFULSET = "StatefulSet"
    DEPLOYMENT = "Deployment"


class BrokerProfileChoice(StrEnum):
    AUTO = "auto"
    APACHE_KAFKA = "apache-kafka"
    REDPANDA = "redpanda"

    @property
    def declared(self) -> BrokerProfile | None:
        """The profile this choice names; None for auto, which leaves it to detection."""
        return None if self is BrokerProfileChoice.AUTO else BrokerProfile(self.value)


class ProtocolChoice(StrEnum):
    AUTO = "auto"
    CLASSIC = "classic"
    CONSUMER = "consumer"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecretKeyRef:
    name: str
    key: str


@dataclass(frozen=True)
class TlsSpec:
    enabled: bool = True
    ca: SecretKeyRef | None = None
    client_cert: SecretKeyRef | None = None
    client_key: SecretKeyRef | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True)
class SaslSpec:
    mechanism: SaslMechanism
    username: SecretKeyRef
    password: SecretKeyRef


@dataclass(frozen=True)
class KafkaSpec:
    bootstrap_servers: tuple[str, ...]
    profile: BrokerProfileChoice = BrokerProfileChoice.AUTO
    request_timeout_seconds: int = 10
    tls: TlsSpec | None = None
    sasl: SaslSpec | None = None

    def secret_refs(self) -> tuple[SecretKeyRef, ...]:
        refs: list[SecretKeyRef] = []
        if self.tls is not None:
            refs += [r for r in (self.tls.ca, self.tls.client_cert, self.tls.client_key) if r]
        if self.sasl is not None:
            refs += [self.sasl.username, self.sasl.password]
        return tuple(refs)


@dataclass(frozen=True)
class SubscriptionSpec:
    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.match(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class WorkloadRef:
    kind: WorkloadKind
    name: str
    container: str | None = None


@dataclass(frozen=True)
class ObservePolicy:
    interval_seconds: int = 10
    report_ttl_seconds: int = 60


@dataclass(frozen=True)
class Policy:
    protocol: ProtocolChoice = ProtocolChoice.AUTO
    observe: ObservePolicy = field(default_factory=ObservePolicy)
    history_enabled: bool = True
    # None: the operator leaves the consumers' settings, or the broker's delay, alone.
    settings: SettingsPolicy | None = None
    broker_delay: BrokerDelayPolicy | None = None
    # None: the group's configs on the broker (GROUP resource) are left alone.
    group_configs: GroupConfigsSpec | None = None
    learning: LearningPolicy = field(default_factory=LearningPolicy)
    rollout: RolloutPolicy = field(default_factory=RolloutPolicy)
    enforce: EnforceSpec = field(default_factory=EnforceSpec)


@dataclass(frozen=True)
class ConsumerGroupSpec:
    group_id: str
    kafka: KafkaSpec
    subscription: SubscriptionSpec
    workload: WorkloadRef
    policy: Policy = field(default_factory=Policy)


class _Reader:
    """Collects every problem of one spec instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[FieldProblem] = []

    def fail(self, path: str, message: str, fix: str) -> None:
        self.problems.append(FieldProblem(path, message, fix))

    def mapping(self, raw: object, path: str, *, required: bool) -> Mapping[str, object] | None:
        if raw is None:
            if required:
                self.fail(path, "is required", f"add {path} to the ConsumerGroup")
            return None
        if not isinstance(raw, Mapping):
            self.fail(path, f"must be an object, got {kind_of(raw)}", f"write {path} as a mapping")
            return None
        return raw

    def string(
        self,
        raw: Mapping[str, object],
        key: str,
        path: str,
        *,
        required: bool = False,
        default: str | None = None,
    ) -> str | None:
        value = raw.get(key)
        if value is None:
            if required:
                self.fail(f"{path}.{key}", "is required", f"set {path}.{key}")
            return default
        if not isinstance(value, str):
            self.fail(f"{path}.{key}", f"must be a string, got {kind_of(value)}", "quote the value")
            return default
        return value

    def integer(
        self, raw: Mapping[str, object], key: str, path: str, default: int, low: int, high: int
    ) -> int:
        value = raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{path}.{key}", f"must be an integer, got {kind_of(value)}", "use a number")
            return default
        if not low <= value <= high:
            self.fail(
                f"{path}.{key}",
                f"must be between {low} and {high}, got {value}",
                f"set a value from {low} to {high}",
            )
            return default
        return value

    def boolean(self, raw: Mapping[str, object], key: str, path: str, default: bool) -> bool:
        value = raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(f"{path}.{key}", f"must be true or false, got {kind_of(value)}", "use a bool")
            return default
        return value

    def choice(
        self, raw: Mapping[str, object], key: str, path: str, enum: type[E], default: E | None
    ) -> E | None:
        value = raw.get(key)
        if value is None:
            if default is None:
                self.fail(f"{path}.{key}", "is required", f"set {path}.{key}")
            return default
        allowed = [member.value for member in enum]
        if value not in allowed:
            self.fail(
                f"{path}.{key}",
                f"unsupported value {value!r}",
                "use one of: " + ", ".join(allowed),
            )
            return default
        return enum(value)

    def string_list(self, raw: object, path: str) -> tuple[str, ...]:
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            self.fail(path, f"must be a list of strings, got {kind_of(raw)}", "write a YAML list")
            return ()
        items: list[str] = []
        for index, item in enumerate(raw):
            if not isinstance(item, str):
                self.fail(f"{path}[{index}]", f"must be a string, got {kind_of(item)}", "quote it")
            else:
                items.append(item)
        return tuple(items)


def _secret_ref(
    reader: _Reader, raw: object, path: str, key_field: str = "key", default_key: str | None = None
) -> SecretKeyRef | None:
    ref = reader.mapping(raw, path, required=True)
    if ref is None:
        return None
    name = reader.string(ref, "name", path, required=True)
    key = reader.string(ref, key_field, path, required=default_key is None, default=default_key)
    if name is not None and not _DNS_SUBDOMAIN.match(name):
        reader.fail(f"{path}.name", f"{name!r} is not a valid Secret name", "use the Secret's name")
    if name is None or key is None:
        return None
    return SecretKeyRef(name, key)


def _parse_kafka(reader: _Reader, raw: Mapping[str, object]) -> KafkaSpec | None:
    path = "spec.kafka"
    servers_raw = raw.get("bootstrapServers")
    servers: tuple[str, ...] = ()
    if servers_raw is None:
        reader.fail(f"{path}.bootstrapServers", "is required", "list the brokers as host:port")
    else:
        servers = reader.string_list(servers_raw, f"{path}.bootstrapServers")
        if not servers and not reader.problems:
            reader.fail(f"{path}.bootstrapServers", "must not be empty", "list at least one broker")
        for index, server in enumerate(servers):
            match = _BOOTSTRAP.match(server)
            if match is None or not 0 < int(match.group(1)) < 65536:
                reader.fail(
                    f"{path}.bootstrapServers[{index}]",
                    f"{server!r} is not host:port",
                    "write it as host:port, for example kafka-0.kafka:9092",
                )
    profile = reader.choice(raw, "profile", path, BrokerProfileChoice, BrokerProfileChoice.AUTO)
    timeout = reader.integer(raw, "requestTimeoutSeconds", path, 10, 1, 300)
    tls: TlsSpec | None = None
    tls_raw = reader.mapping(raw.get("tls"), f"{path}.tls", required=False)
    if tls_raw is not None:
        tpath = f"{path}.tls"
        ca = None
        if tls_raw.get("caSecretRef") is not None:
            ca = _secret_ref(
                reader, tls_raw["caSecretRef"], f"{tpath}.caSecretRef", "key", "ca.crt"
            )
        cert = key = None
        if tls_raw.get("clientCertSecretRef") is not None:
            cpath = f"{tpath}.clientCertSecretRef"
            cert = _secret_ref(reader, tls_raw["clientCertSecretRef"], cpath, "certKey", "tls.crt")
            key = _secret_ref(reader, tls_raw["clientCertSecretRef"], cpath, "keyKey", "tls.key")
        tls = TlsSpec(
            enabled=reader.boolean(tls_raw, "enabled", tpath, True),
            ca=ca,
            client_cert=cert,
            client_key=key,
            insecure_skip_verify=reader.boolean(tls_raw, "insecureSkipVerify", tpath, False),
        )
    sasl: SaslSpec | None = None
    sasl_raw = reader.mapping(raw.get("sasl"), f"{path}.sasl", required=False)
    if sasl_raw is not None:
        spath = f"{path}.sasl"
        mechanism = reader.choice(sasl_raw, "mechanism", spath, SaslMechanism, None)
        user = _secret_ref(reader, sasl_raw.get("usernameSecretRef"), f"{spath}.usernameSecretRef")
        password = _secret_ref(
            reader, sasl_raw.get("passwordSecretRef"), f"{spath}.passwordSecretRef"
        )
        if mechanism is not None and user is not None and password is not None:
            sasl = SaslSpec(mechanism, user, password)
    if not servers or profile is None:
        return None
    return KafkaSpec(servers, profile, timeout, tls, sasl)


def check_pattern(pattern: str) -> str | None:
    """Why a subscription pattern cannot be used, or None when it can."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"is longer than {MAX_PATTERN_LENGTH} characters"
    try:
        re.compile(pattern)
    except re.error as error:
        return f"is not a valid regular expression: {error}"
    if _NESTED_QUANTIFIER.search(pattern):
        return "nests a repeated group inside a repetition, which can backtrack for minutes"
    tree = _SRE.parse(pattern)
    trouble = _backtracking_shape(tree, inside_repeat=False)
    if trouble is None and _open_repeats(tree) > MAX_OPEN_REPEATS:
        # k of them in a row cost n**k steps on a failing name: a*a*a*a*a*! took about a minute
        # on one 249-character topic name, four take 0.2 s.
        trouble = (
            f"has more than {MAX_OPEN_REPEATS} repetitions such as .* or +, which can "
            "backtrack for minutes on a long topic name"
        )
    return trouble


def _open_repeats(items: Any) -> int:
    count = 0
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            low, high, sub = av
            count += int(high > max(low, 1)) + _open_repeats(sub)
        elif name == "BRANCH":
            count += sum(_open_repeats(branch) for branch in av[1])
        elif name == "SUBPATTERN":
            count += _open_repeats(av[-1])
        elif name in {"ASSERT", "ASSERT_NOT"}:
            count += _open_repeats(av[1])
    return count


def _backtracking_shape(items: Any, *, inside_repeat: bool) -> str | None:
    for op, av in items:
        name = str(op)
        children: list[Any] = []
        repeat = False
        if name in _REPEATS:
            low, high, sub = av
            # A fixed count such as (\d{3})+ offers no choice of how to split the input, and
            # an outer ? none of how often to repeat.
            repeat = high != low and high > 1
            if high != low and inside_repeat:
                return "nests a repeated group inside a repetition, which can backtrack for minutes"
            children = [sub]
        elif name == "BRANCH":
            if inside_repeat:
                return (
                    "repeats an alternation such as (a|ab)*, which can backtrack for minutes; "
                    "use a character class or list the topics"
                )
            children = list(av[1])
        elif name == "SUBPATTERN":
            children = [av[-1]]
        elif name in {"ASSERT", "ASSERT_NOT"}:
            children = [av[1]]
        elif name == "GROUPREF_EXISTS":
            children = [branch for branch in av[1:] if branch is not None]
        for child in children:
            trouble = _backtracking_shape(child, inside_repeat=inside_repeat or repeat)
            if trouble is not None:
                return trouble
    return None


def _parse_subscription(reader: _Reader, raw: Mapping[str, object]) -> SubscriptionSpec | None:
    path = "spec.subscription"
    has_topics = raw.get("topics") is not None
    has_pattern = raw.get("pattern") is not None
    if has_topics == has_pattern:
        reader.fail(path, "must set exactly one of topics or pattern", "keep topics or pattern")
        return None
    if has_topics:
        topics = reader.string_list(raw["topics"], f"{path}.topics")
        if not topics:
            reader.fail(f"{path}.topics", "must not be empty", "list at least one topic")
        for index, topic in enumerate(topics):
            if not _TOPIC.match(topic) or topic in {".", ".."}:
                reader.fail(
                    f"{path}.topics[{index}]",
                    f"{topic[:80]!r} is not a valid Kafka topic name",
                    "use letters, digits, '.', '_' or '-', at most 249 characters",
                )
        return SubscriptionSpec(topics=topics)
    pattern = reader.string(raw, "pattern", path)
    if pattern is None:
        return None
    trouble = check_pattern(pattern)
    if trouble is not None:
        reader.fail(
            f"{path}.pattern", trouble, "write a simple regular expression like orders\\..*"
        )
        return None
    return SubscriptionSpec(pattern=pattern)


def _parse_workload(reader: _Reader, raw: Mapping[str, object]) -> WorkloadRef | None:
    path = "spec.workload"
    kind = reader.choice(raw, "kind", path, WorkloadKind, None)
    name = reader.string(raw, "name", path, required=True)
    if name is not None and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
        reader.fail(
            f"{path}.name",
            f"{name[:80]!r} is not a valid workload name",
            "use the StatefulSet's or Deployment's metadata.name (lowercase, digits, '-', '.')",
        )
        name = None
    container = reader.string(raw, "container", path)
    if kind is None or name is None:
        return None
    return WorkloadRef(kind, name, container)


def _parse_policy(reader: _Reader, raw: Mapping[str, object], bypass_default: int) -> Policy:
    path = "spec.policy"
    protocol = reader.choice(raw, "protocol", path, ProtocolChoice, ProtocolChoice.AUTO)
    observe_raw = reader.mapping(raw.get("observe", {}), f"{path}.observe", required=False) or {}
    opath = f"{path}.observe"
    interval = reader.integer(observe_raw, "intervalSeconds", opath, 10, 1, 3600)
    ttl = reader.integer(observe_raw, "reportTtlSeconds", opath, 60, 5, 86400)
    if ttl < interval:
        reader.fail(
            f"{opath}.reportTtlSeconds",
            f"({ttl}) is shorter than intervalSeconds ({interval})",
            "make reportTtlSeconds at least intervalSeconds",
        )
    enforce = EnforceSpec()
    try:
        enforce = parse_enforce_policy(raw.get("enforce"), f"{path}.enforce")
    except SpecInvalid as error:
        reader.problems.extend(error.problems)
    rollout = RolloutPolicy(enabled=False)
    rollout_raw = raw.get("rollout")
    try:
        rollout = parse_rollout_policy(rollout_raw, bypass_default)
    except SpecInvalid as error:
        reader.problems.extend(error.problems)
    if not isinstance(rollout_raw, Mapping) or "enabled" not in rollout_raw:
        # Managed only when the user turned it on: the CRD's default is off, and an object its
        # defaulting never saw (an older CRD) is left alone too.
        rollout = replace(rollout, enabled=False)
    history_raw = reader.mapping(raw.get("history", {}), f"{path}.history", required=False) or {}
    history = reader.boolean(history_raw, "enabled", f"{path}.history", True)
    settings: SettingsPolicy | None = None
    broker_delay: BrokerDelayPolicy | None = None
    try:
        settings = parse_settings_policy(raw.get("settings"), f"{path}.settings")
    except SpecInvalid as error:
        reader.problems.extend(error.problems)
    try:
        broker_delay = parse_broker_delay_policy(raw.get("brokerDelay"), f"{path}.brokerDelay")
    except SpecInvalid as error:
        reader.problems.extend(error.problems)
    group_configs: GroupConfigsSpec | None = None
    if raw.get("groupConfigs") is not None:
        try:
            group_configs = read_spec(GroupConfigsSpec, raw["groupConfigs"], f"{path}.groupConfigs")
        except SpecInvalid as error:
            reader.problems.extend(error.problems)
    learning = LearningPolicy()
    try:
        learning = parse_learning_policy(raw.get("learning"), f"{path}.learning")
    except SpecInvalid as error:
        reader.problems.extend(error.problems)
    return Policy(
        protocol=protocol or ProtocolChoice.AUTO,
        observe=ObservePolicy(interval, ttl),
        history_enabled=history,
        settings=settings,
        broker_delay=broker_delay,
        group_configs=group_configs,
        learning=learning,
        rollout=rollout,
        enforce=enforce,
    )


def parse_spec(raw: object, *, bypass_default: int = DEFAULT_BYPASS_SECONDS) -> ConsumerGroupSpec:
    """Parse a ConsumerGroup's `spec`, or raise SpecInvalid listing every problem.

    `bypass_default` stands for an unset `policy.rollout.bypassGateAfterSeconds`: the operator's
    own default (--gate-bypass-after-seconds)."""
    reader = _Reader()
    spec = reader.mapping(raw, "spec", required=True)
    if spec is None:
        raise SpecInvalid(tuple(reader.problems))
    group_id = reader.string(spec, "groupId", "spec", required=True)
    if group_id is not None and not _GROUP_ID.match(group_id):
        reader.fail(
            "spec.groupId",
            f"{group_id[:80]!r} is not a valid group id",
            "use 1 to 249 letters, digits or . _ - : /",
        )
    kafka_raw = reader.mapping(spec.get("kafka"), "spec.kafka", required=True)
    kafka = _parse_kafka(reader, kafka_raw) if kafka_raw is not None else None
    sub_raw = reader.mapping(spec.get("subscription"), "spec.subscription", required=True)
    subscription = _parse_subscription(reader, sub_raw) if sub_raw is not None else None
    work_raw = reader.mapping(spec.get("workload"), "spec.workload", required=True)
    workload = _parse_workload(reader, work_raw) if work_raw is not None else None
    policy_raw = reader.mapping(spec.get("policy", {}), "spec.policy", required=False) or {}
    policy = _parse_policy(reader, policy_raw, bypass_default)
    if reader.problems or not (group_id and kafka and subscription and workload):
        raise SpecInvalid(tuple(reader.problems))
    return ConsumerGroupSpec(group_id, kafka, subscription, workload, policy)
