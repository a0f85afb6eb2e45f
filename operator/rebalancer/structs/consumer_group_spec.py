"""The ConsumerGroup spec as a typed model: every block but spec.policy.rollout (rollout_spec.py).

The CRD's schema is rendered from these classes (`make crd`, deploy/crd_gen.py; descriptions are
folded to one line, so write them as prose) and the operator validates the resource with them
(structs/specs.parse_spec, through spec_models.read_spec). To add a field, add it here with its
description, default, bounds and CEL rule and run `make crd`: the CRD, the chart and the
validation follow.

Rules between fields are written twice on purpose: as CEL (`cel()`, run by the API server at
admission) and as a `problems` method or a reader check (run by the operator, for a cluster
that still has an older CRD and to tell the fix).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Self

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.group_configs_spec import GroupConfigsSpec
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.rollout_spec import RolloutSpec
from rebalancer.structs.spec_models import (
    Bool,
    Int,
    Number,
    SpecModel,
    Str,
    Wording,
    cel,
    problem,
)
from rebalancer.structs.topic_patterns import check_pattern

# What Kubernetes accepts as an object's name; the CRD leaves Secret names unchecked (a
# kubectl-created Secret's name is always one), the operator does not.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_PORT = re.compile(r":(\d{1,5})$")


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
    STREAMS = "streams"  # KIP-1071 streams groups (Kafka Streams with group.protocol=streams)


class LearningMode(StrEnum):
    OFF = "off"
    RECOMMEND = "recommend"
    AUTO = "auto"


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


class DelayMode(StrEnum):
    RECOMMEND = "recommend"  # status and an Event with the value to set
    STRIMZI = "strimzi"  # patch the Strimzi Kafka resource's spec.kafka.config
    ALTER_CONFIGS = "alter-configs"  # IncrementalAlterConfigs, where the broker takes it live


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


def _secret_name(name: str) -> str:
    if not _DNS_SUBDOMAIN.match(name):
        raise problem(f"{name[:80]!r} is not a valid Secret name", "use the Secret's name")
    return name


def _port_in_range(server: str) -> str:
    port = _PORT.search(server)
    if port is None or not 0 < int(port.group(1)) < 65536:
        raise problem(
            f"{server[:80]!r} is not host:port",
            "write it as host:port, for example kafka-0.kafka:9092",
        )
    return server


def _topic_name(topic: str) -> str:
    if topic in {".", ".."}:
        raise problem(f"{topic!r} is not a valid Kafka topic name", TOPIC_FIX)
    return topic


def _usable_pattern(pattern: str) -> str:
    trouble = check_pattern(pattern)
    if trouble is not None:
        raise problem(trouble, "write a simple regular expression like orders\\..*")
    return pattern


def _check_ordered(low: float | None, high: float | None) -> None:
    if low is not None and high is not None and low > high:
        raise problem(f"min {low:g} exceeds max {high:g}", "swap them")


# Kafka client property names: dotted words, as librdkafka and Java write them.
_PROPERTY_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def _property_name(key: str) -> str:
    if not _PROPERTY_KEY.match(key):
        raise problem("is not a Kafka client property name", "use names like fetch.min.bytes")
    return key


def _one_line(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise problem("must be one line", "remove the line break")
    return value


def _without_trailing_slash(path: object) -> object:
    # The operator has always read /etc/kafka/ as /etc/kafka (an older CRD let it through).
    return path.rstrip("/") or path if isinstance(path, str) else path


def _directory(path: str) -> str:
    if "/../" in f"{path}/" or path == "/":
        raise problem(f"{path[:80]!r} is not an absolute directory", "use /etc/kafka")
    return path


KAFKA_NAME_FIX = "use the Kafka resource's metadata.name (lowercase, digits, '-', '.')"
# A number of milliseconds, told as the settings have always told it.
MILLISECONDS = (
    Wording(fix="use a number of milliseconds", when=("int_type",)),
    Wording(fix="use a value in range", when=("greater_than_equal", "less_than_equal")),
)
TOPIC_FIX = "use letters, digits, '.', '_' or '-', at most 249 characters"
SecretName = Annotated[Str, AfterValidator(_secret_name)]
# The `name` of the TLS and SASL references to a Secret.
SecretNameField = Annotated[
    SecretName,
    Field(max_length=253, description="Secret name, in the ConsumerGroup's namespace."),
]


class CaSecretRefSpec(SpecModel):
    """Secret holding the CA certificate (PEM) that signs the brokers' certificates."""

    name: SecretNameField
    key: Annotated[
        Str, Field(max_length=253, description="Key of the CA certificate in the Secret.")
    ] = "ca.crt"


class ClientCertSecretRefSpec(SpecModel):
    """Secret of type kubernetes.io/tls with a client certificate for mutual TLS."""

    name: SecretNameField
    cert_key: Annotated[
        Str, Field(max_length=253, description="Key of the client certificate (PEM).")
    ] = "tls.crt"
    key_key: Annotated[
        Str, Field(max_length=253, description="Key of the client private key (PEM).")
    ] = "tls.key"


class BrokerTlsSpec(SpecModel):
    """TLS to the brokers. Omit for plaintext."""

    enabled: Annotated[Bool, Field(description="Connect with TLS.")] = True
    ca_secret_ref: CaSecretRefSpec | None = None
    client_cert_secret_ref: ClientCertSecretRefSpec | None = None
    insecure_skip_verify: Annotated[
        Bool, Field(description="Do not verify the brokers' certificates. Only for tests.")
    ] = False


class SecretKeyRefSpec(SpecModel):
    """Secret key that holds the SASL username."""

    name: SecretNameField
    key: Annotated[Str, Field(max_length=253, description="Key in the Secret.")]


class BrokerSaslSpec(SpecModel):
    """SASL authentication. Credentials are read from Secrets, never stored here."""

    mechanism: Annotated[SaslMechanism, Field(description="SASL mechanism.")]
    username_secret_ref: SecretKeyRefSpec
    password_secret_ref: Annotated[
        SecretKeyRefSpec, Field(description="Secret key that holds the SASL password.")
    ]


class KafkaConnectionSpec(SpecModel):
    """How the operator reaches the Kafka cluster that hosts the group."""

    bootstrap_servers: Annotated[
        list[
            Annotated[
                Str,
                Field(
                    max_length=253,
                    pattern="^[A-Za-z0-9.\\[\\]:_-]+:[0-9]{1,5}$",
                    description="One bootstrap broker as host:port.",
                ),
                AfterValidator(_port_in_range),
            ]
        ],
        Field(
            min_length=1,
            max_length=32,
            description="Bootstrap brokers as host:port, for example kafka-0.kafka:9092.",
        ),
        Wording(fix="list the brokers as host:port", when=("missing",)),
        Wording(fix="list at least one broker", when=("too_short",)),
        Wording(
            "{value} is not host:port",
            "write it as host:port, for example kafka-0.kafka:9092",
            when=("string_pattern_mismatch",),
            items=True,
        ),
    ]
    profile: Annotated[
        BrokerProfileChoice,
        Field(
            description=(
                "Broker implementation, which decides how the coordinator times joins and which "
                "admin calls can be trusted. auto detects it from the cluster."
            )
        ),
    ] = BrokerProfileChoice.AUTO
    request_timeout_seconds: Annotated[
        Int,
        Field(
            ge=1, le=300, description="Timeout of each admin request to the cluster, in seconds."
        ),
    ] = 10
    tls: BrokerTlsSpec | None = None
    sasl: BrokerSaslSpec | None = None


class TopicSubscriptionSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "has(self.topics) != has(self.pattern)",
                "set exactly one of subscription.topics or subscription.pattern",
                reason="FieldValueInvalid",
            )
        ]
    },
):
    """What the group consumes. Set exactly one of topics or pattern."""

    topics: Annotated[
        list[
            Annotated[
                Str,
                Field(
                    min_length=1,
                    max_length=249,
                    pattern="^[A-Za-z0-9._-]+$",
                    description="A Kafka topic name.",
                ),
                AfterValidator(_topic_name),
            ]
        ]
        | None,
        Field(min_length=1, max_length=1000, description="Topic names the consumers subscribe to."),
        Wording(fix="list at least one topic", when=("too_short",)),
        Wording("{value} is not a valid Kafka topic name", TOPIC_FIX, items=True),
    ] = None
    pattern: Annotated[
        Str | None,
        Field(
            min_length=1,
            max_length=1024,
            description=(
                "A regular expression the consumers subscribe with (librdkafka writes it with a "
                "leading ^). New matching topics make the group rebalance."
            ),
        ),
        AfterValidator(_usable_pattern),
    ] = None

    @model_validator(mode="after")
    def _one_source(self) -> TopicSubscriptionSpec:
        if (self.topics is None) == (self.pattern is None):
            raise problem("must set exactly one of topics or pattern", "keep topics or pattern")
        return self


# A rollout in progress holds this workload (its partition parked, a Deployment paused, pods at
# their gates): pointing the resource elsewhere would strand that state on the old workload, so
# another workload is a new resource (the CEL rule below).
class WorkloadSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "self.kind == oldSelf.kind && self.name == oldSelf.name",
                (
                    "spec.workload.kind and spec.workload.name are immutable: the operator may be"
                    " holding that workload mid-rollout. To point at another workload, create a "
                    "new ConsumerGroup for it and delete this one (deleting hands the old "
                    "workload back)"
                ),
                reason="FieldValueForbidden",
            )
        ]
    },
):
    """The workload that runs the group's consumers, in the same namespace. kind and name cannot
    change once set; container can.
    """

    kind: Annotated[
        WorkloadKind,
        Field(
            description=(
                "StatefulSet (stable pod names, static membership possible) or Deployment."
            )
        ),
    ]
    name: Annotated[
        Str,
        Field(
            min_length=1,
            max_length=253,
            pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
            description="Name of the StatefulSet or Deployment.",
        ),
        Wording(
            "{value} is not a valid workload name",
            "use the StatefulSet's or Deployment's metadata.name (lowercase, digits, '-', '.')",
            when=("string_pattern_mismatch", "string_too_long", "string_too_short"),
        ),
    ]
    container: Annotated[
        Str | None,
        Field(
            max_length=63,
            description="Container that runs the consumer. Defaults to the first container.",
        ),
    ] = None


class ObservationSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                (
                    "!has(self.reportTtlSeconds) || !has(self.intervalSeconds) || "
                    "self.reportTtlSeconds >= self.intervalSeconds"
                ),
                "policy.observe.reportTtlSeconds must be at least policy.observe.intervalSeconds",
                field_path=".reportTtlSeconds",
            )
        ]
    },
):
    """How the operator watches the group."""

    interval_seconds: Annotated[
        Int,
        Field(
            ge=1,
            le=3600,
            description="Seconds between two observations of the group on the broker.",
        ),
    ] = 10
    report_ttl_seconds: Annotated[
        Int,
        Field(
            ge=5,
            le=86400,
            description=(
                "Seconds after which a member that stopped sending reports is no longer counted "
                "as a member."
            ),
        ),
    ] = 60

    @model_validator(mode="after")
    def _reports_outlive_an_interval(self) -> ObservationSpec:
        if self.report_ttl_seconds < self.interval_seconds:
            raise problem(
                f"({self.report_ttl_seconds}) is shorter than intervalSeconds "
                f"({self.interval_seconds})",
                "make reportTtlSeconds at least intervalSeconds",
                ".reportTtlSeconds",
            )
        return self


class SettingsEnvSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                (
                    "!has(self.convention) || (self.convention == 'custom' ? has(self.prefix) : "
                    "!has(self.prefix))"
                ),
                "env.prefix is required with convention custom, and only used with it",
                field_path=".prefix",
            )
        ]
    },
):
    """How settings are named as environment variables."""

    convention: Annotated[
        EnvConvention,
        Field(
            description=(
                "kafka: KAFKA_SESSION_TIMEOUT_MS; spring: "
                "SPRING_KAFKA_CONSUMER_PROPERTIES_SESSION_TIMEOUT_MS; custom: prefix + "
                "SESSION_TIMEOUT_MS; none: the properties file only (no static membership then)."
            )
        ),
    ] = EnvConvention.KAFKA
    prefix: Annotated[
        Str | None,
        Field(
            max_length=100,
            pattern="^[A-Z_][A-Z0-9_]*$",
            description="Variable prefix for convention custom, for example ORDERS_KAFKA_.",
        ),
        Wording(
            "{value} is not an environment variable prefix",
            "use upper-case letters, digits and _, for example MYAPP_KAFKA_",
            when=("string_pattern_mismatch",),
        ),
    ] = None
    config_file_variable: Annotated[
        Str,
        Field(
            max_length=200,
            pattern="^([A-Za-z_][A-Za-z0-9_]*)?$",
            description=(
                'Variable set to the mounted file\'s path; "" sets none. Left alone when the '
                "container already sets it itself."
            ),
        ),
        Wording(
            "{value} is not an environment variable name",
            'use letters, digits and _ (or "" to set no variable)',
            when=("string_pattern_mismatch",),
        ),
    ] = "KAFKA_CONFIG_FILE"

    @model_validator(mode="after")
    def _prefix_with_custom_alone(self) -> SettingsEnvSpec:
        custom = self.convention is EnvConvention.CUSTOM
        if custom and self.prefix is None:
            raise problem("is required with convention custom", "set env.prefix", ".prefix")
        if not custom and self.prefix is not None:
            raise problem(
                f"is only used with convention custom, not {self.convention.value}",
                "remove env.prefix or set env.convention: custom",
                ".prefix",
            )
        return self


class ConsumerSettingsSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                (
                    "!has(self.heartbeatIntervalMs) || self.heartbeatIntervalMs * 3 <= "
                    "self.sessionTimeoutMs"
                ),
                "heartbeatIntervalMs must be at most a third of sessionTimeoutMs",
                field_path=".heartbeatIntervalMs",
                reason="FieldValueInvalid",
            ),
            cel(
                (
                    "!has(self.properties) || self.properties.all(k, !(k in "
                    "['session.timeout.ms', 'heartbeat.interval.ms', 'max.poll.interval.ms', "
                    "'partition.assignment.strategy', 'group.instance.id', 'group.protocol', "
                    "'group.id', 'bootstrap.servers']))"
                ),
                "properties must not set what a typed field, spec.groupId or spec.kafka sets",
                field_path=".properties",
                reason="FieldValueForbidden",
            ),
            cel(
                (
                    "!has(self.properties) || self.properties.all(k, !k.startsWith('consumer.') "
                    "&& !k.startsWith('group.consumer.') && !(k in "
                    "['group.initial.rebalance.delay.ms', 'group.min.session.timeout.ms', "
                    "'group.max.session.timeout.ms', 'group_initial_rebalance_delay']))"
                ),
                (
                    "properties must not hold broker settings or group configs: use "
                    "spec.policy.brokerDelay and sessionTimeoutMs/heartbeatIntervalMs"
                ),
                field_path=".properties",
                reason="FieldValueForbidden",
            ),
        ]
    },
):
    """Consumer settings the operator delivers to the workload's pod template: a ConfigMap
    <name>-consumer-settings mounted as consumer.properties, and environment variables named by
    env.convention. Absent: the operator leaves the consumers' settings alone. A change becomes
    a pod-template change (a settings hash annotation), rolled out by the rollout stagger, never
    by restarting every pod at once. For KIP-848 groups (group.protocol=consumer) the session
    and heartbeat are set as group configs on the broker and no assignor is injected.
    """

    session_timeout_ms: Annotated[
        Int,
        Field(
            ge=1,
            le=3600000,
            description=(
                "session.timeout.ms for classic groups; the group config "
                "consumer.session.timeout.ms for KIP-848 groups. Must be inside the broker's "
                "group.min/max.session.timeout.ms (Kafka's defaults 6000 to 1800000 when the "
                "broker does not report them) or, for KIP-848 groups, "
                "group.consumer.min/max.session.timeout.ms (45000 to 60000 by default)."
            ),
        ),
        *MILLISECONDS,
    ] = 45000
    heartbeat_interval_ms: Annotated[
        Int | None,
        Field(
            ge=1,
            le=3600000,
            description=(
                "heartbeat.interval.ms (consumer.heartbeat.interval.ms for KIP-848 groups), at "
                "most a third of sessionTimeoutMs. Omitted: a third of the session, at most 3000 "
                "(classic) or 5000 (KIP-848)."
            ),
        ),
        *MILLISECONDS,
    ] = None
    max_poll_interval_ms: Annotated[
        Int,
        Field(
            ge=1,
            le=86400000,
            description=(
                "max.poll.interval.ms, also the rebalance timeout of classic groups. librdkafka "
                "requires it to be at least sessionTimeoutMs."
            ),
        ),
        *MILLISECONDS,
    ] = 300000
    assignment_strategy: Annotated[
        AssignmentStrategy | None,
        Field(
            description=(
                "partition.assignment.strategy. Omitted: cooperative-sticky. Moving a live group "
                "from an eager assignor to cooperative-sticky follows KIP-429: one rollout "
                "listing cooperative-sticky and the current eager assignor, then one with "
                "cooperative-sticky alone (Java clients; librdkafka cannot list both and is "
                "refused with the way out). sticky is Java's eager StickyAssignor. Not applied to"
                " KIP-848 groups."
            )
        ),
    ] = None
    static_membership: Annotated[
        Bool,
        Field(
            description=(
                "Set group.instance.id to each pod's name (KIP-345), through the downward API. "
                "StatefulSets only: a Deployment's pod names change on every restart."
            )
        ),
    ] = False
    client_library: Annotated[
        ClientLibrary,
        Field(
            description=(
                "The consumers' client: java (class names for assignors, KIP-429 upgrade path) or"
                " librdkafka (confluent-kafka, Go, .NET, Node). auto: java with env.convention "
                "spring, librdkafka otherwise."
            )
        ),
    ] = ClientLibrary.AUTO
    env: SettingsEnvSpec = Field(default_factory=SettingsEnvSpec, json_schema_extra={"default": {}})
    mount_path: Annotated[
        Str,
        Field(
            max_length=250,
            pattern="^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$",
            description="Directory where consumer.properties is mounted.",
        ),
        AfterValidator(_directory),
        BeforeValidator(_without_trailing_slash),
        Wording(
            "{value} is not an absolute directory",
            "use /etc/kafka",
            when=("string_pattern_mismatch",),
        ),
    ] = "/etc/rebalancer"
    properties: Annotated[
        dict[
            Annotated[Str, AfterValidator(_property_name)],
            Annotated[Str, Field(max_length=4096), AfterValidator(_one_line)],
        ]
        | None,
        Field(
            max_length=64,
            description=(
                "Extra client properties (librdkafka or Java names), written to the file and the "
                "variables. Refused: broker settings (group.initial.rebalance.delay.ms: use "
                "brokerDelay), group configs (consumer.*), the typed settings above, "
                "bootstrap.servers and group.id, and credentials (a ConfigMap is not a Secret)."
            ),
        ),
        Wording("must be a map of property name to value", "write key: value", when=("dict_type",)),
        Wording(
            fix="keep only the properties that differ from the client's defaults",
            when=("too_long",),
        ),
    ] = None


class StrimziKafkaSpec(SpecModel):
    """The Strimzi Kafka resource (kafka.strimzi.io/v1beta2) of this cluster."""

    name: Annotated[
        Str,
        Field(
            max_length=253,
            pattern="^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
            description="The Kafka resource's name.",
        ),
        Wording(fix="name the Strimzi Kafka resource", when=("missing",)),
        Wording("{value} is not a valid name", KAFKA_NAME_FIX, when=("string_pattern_mismatch",)),
    ]
    namespace: Annotated[
        Str | None,
        Field(
            max_length=63,
            pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            description="Its namespace; defaults to the ConsumerGroup's.",
        ),
        Wording("{value} is not a valid name", KAFKA_NAME_FIX, when=("string_pattern_mismatch",)),
    ] = None


class BrokerDelaySpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "self.delayMs <= self.maxDelayMs",
                "brokerDelay.delayMs must not be above brokerDelay.maxDelayMs",
                field_path=".delayMs",
            ),
            cel(
                "self.mode != 'strimzi' || has(self.strimzi)",
                "brokerDelay.strimzi names the Kafka resource to patch in mode strimzi",
                field_path=".strimzi",
                reason="FieldValueRequired",
            ),
        ]
    },
):
    """The group.initial.rebalance.delay.ms this group wants on its cluster. The delay is
    cluster-wide, so the cluster gets the largest delayMs among its ConsumerGroups, capped at
    the smallest maxDelayMs among them; status.settings.brokerDelay says which group decided.
    Absent: this group wants nothing.
    """

    mode: Annotated[
        DelayMode,
        Field(
            description=(
                "recommend: status and an Event with the value to set. strimzi: write it into the"
                " Strimzi Kafka resource's spec.kafka.config (Strimzi then rolls the brokers). "
                "alter-configs: IncrementalAlterConfigs where the broker takes it live "
                "(Redpanda's group_initial_rebalance_delay; refused on Apache Kafka, where it is "
                "read-only)."
            )
        ),
    ] = DelayMode.RECOMMEND
    delay_ms: Annotated[
        Int, Field(ge=0, le=300000, description="The delay this group wants, in milliseconds.")
    ] = 3000
    max_delay_ms: Annotated[
        Int,
        Field(
            ge=0,
            le=300000,
            description="The longest delay this group accepts; caps the cluster's value.",
        ),
    ] = 30000
    strimzi: StrimziKafkaSpec | None = None

    @model_validator(mode="after")
    def _delay_and_target(self) -> BrokerDelaySpec:
        if self.delay_ms > self.max_delay_ms:
            raise problem(
                f"({self.delay_ms}) is above maxDelayMs ({self.max_delay_ms})",
                "raise maxDelayMs or lower delayMs",
                ".delayMs",
            )
        if self.mode is DelayMode.STRIMZI and self.strimzi is None:
            raise problem(
                "is required with mode strimzi",
                "set strimzi.name to the Kafka resource (kafka.strimzi.io) of this cluster",
                ".strimzi",
            )
        return self


class _OrderedBoundsSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "!has(self.min) || !has(self.max) || self.min <= self.max",
                "min must not exceed max",
            )
        ]
    },
):
    """A min and a max, either optional, with min not above max; subclasses type the two."""

    min: Number | None = None
    max: Number | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        _check_ordered(self.min, self.max)
        return self


class MillisecondBoundsSpec(_OrderedBoundsSpec):
    """Limits of group.initial.rebalance.delay.ms, in ms."""

    min: Annotated[Number | None, Field(ge=0, description="Lowest value applied.")] = None
    max: Annotated[Number | None, Field(ge=0, description="Highest value applied.")] = None


class BatchSizeBoundsSpec(_OrderedBoundsSpec):
    """Limits of the rollout batch size, in pods."""

    min: Annotated[Int | None, Field(ge=1, description="Lowest value applied.")] = None
    max: Annotated[Int | None, Field(ge=1, description="Highest value applied.")] = None


class LearningBoundsSpec(SpecModel):
    """Inclusive limits; values outside are clamped and named in status.learning.clamped."""

    initial_rebalance_delay_ms: MillisecondBoundsSpec | None = None
    batch_size: BatchSizeBoundsSpec | None = None
    session_timeout_ms: Annotated[
        MillisecondBoundsSpec | None, Field(description="Limits of session.timeout.ms, in ms.")
    ] = None


class LearningSpec(SpecModel):
    """What the operator does with the recommendations of `rebalancer learn` (docs/learning.md):
    off, show them in status.learning (recommend), or apply them through the settings, rollout
    and broker-delay policies (auto), never more often than minIntervalMinutes and never outside
    the bounds.
    """

    mode: Annotated[
        LearningMode,
        Field(description="off, recommend (status only) or auto (apply)."),
    ] = LearningMode.OFF
    min_interval_minutes: Annotated[
        Int, Field(ge=1, le=525600, description="Minutes between two applied changes.")
    ] = 1440
    max_age_hours: Annotated[
        Int,
        Field(
            ge=1, le=8760, description="Recommendations older than this are shown, never applied."
        ),
    ] = 72
    bounds: LearningBoundsSpec = Field(
        default_factory=LearningBoundsSpec, json_schema_extra={"default": {}}
    )


class TokenSecretRefSpec(SpecModel):
    """Secret key holding the bearer token the sidecars require."""

    name: Annotated[
        Str, Field(max_length=253, description="Secret name, in the ConsumerGroup's namespace.")
    ]
    key: Annotated[Str, Field(max_length=253, description="Key of the token in the Secret.")] = (
        "token"
    )


class EnforceSidecarSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "!has(self.inject) || !self.inject || has(self.tokenSecretRef)",
                "inject needs tokenSecretRef: create a Secret with a random token and reference it",
                field_path=".tokenSecretRef",
            )
        ]
    },
):
    """Whether the operator adds the sidecar to the workload's pods, and how it reaches the
    sidecars.
    """

    inject: Annotated[
        Bool,
        Field(
            description=(
                "Add the rebalancer sidecar container to the workload's pod template (the "
                "operator's image, listening on the pod's IP at the port below, the token mounted"
                " from tokenSecretRef, the application container's KAFKA_* variables and mounts)."
                " The change rolls out through the managed rollout, so "
                "spec.policy.rollout.enabled must be true. Turning it off takes the container out"
                " again. Leave it false when the manifests run the sidecar themselves."
            )
        ),
    ] = False
    url: Annotated[
        Str | None,
        Field(
            max_length=2048,
            pattern="^https?://",
            description=(
                "Base URL of the sidecars, for example a Service in front of them "
                "(http://orders-sidecar.default.svc:8091). Without it the operator calls the "
                "ready pods of spec.workload on the port below."
            ),
        ),
        Wording(
            "must be an http:// or https:// URL, got {value}",
            "give the sidecars' Service, e.g. http://orders-sidecar.default.svc:8091",
            when=("string_pattern_mismatch",),
        ),
    ] = None
    port: Annotated[
        Int,
        Field(ge=1024, le=65535, description="Port the sidecars listen on in the workload's pods."),
    ] = 8091
    token_secret_ref: TokenSecretRefSpec | None = None

    @model_validator(mode="after")
    def _injected_with_a_token(self) -> EnforceSidecarSpec:
        if self.inject and self.token_secret_ref is None:
            raise problem(
                "is required when inject is true",
                "create a Secret with a random token and reference it",
                ".tokenSecretRef",
            )
        return self


class EnforcementSpec(SpecModel):
    """Enforced rebalances through the rebalancer sidecar, for any client library
    (docs/enforcing.md). Each trigger costs one rebalance; under cooperative-sticky the
    application members keep their partitions.
    """

    request_token: Annotated[
        Str | None,
        Field(
            min_length=1,
            max_length=253,
            description=(
                "Change to any new value (a timestamp works) to request one rebalance. The first "
                "value the operator sees is only a baseline."
            ),
        ),
        Wording(
            "must be a string of 1 to 253 characters",
            "set any new string (a timestamp works) to ask for one rebalance",
            when=("string_too_short", "string_too_long"),
        ),
    ] = None
    schedule_seconds: Annotated[
        Int | None,
        Field(
            ge=60,
            le=604800,
            description=(
                "Enforce a rebalance this often, in seconds; any enforcement restarts the interval."
            ),
        ),
    ] = None
    after_rollout: Annotated[
        Bool, Field(description="Enforce one rebalance after each managed rollout finishes.")
    ] = False
    on_topic_creation: Annotated[
        Bool,
        Field(
            description=(
                "With a pattern subscription, enforce one rebalance when matching topics appear, "
                "so every member picks them up together (librdkafka consumers also need a short "
                "metadata.max.age.ms)."
            )
        ),
    ] = False
    retry_when_stable: Annotated[
        Bool,
        Field(
            description=(
                "A request met by a rebalance in progress is retried once the group is Stable; "
                "otherwise the running rebalance serves it."
            )
        ),
    ] = False
    sidecar: EnforceSidecarSpec | None = None


class HistorySpec(SpecModel):
    """What is recorded about rebalances."""

    enabled: Annotated[
        Bool, Field(description="Record every detected rebalance as a history event.")
    ] = True


# A streams group takes its session, heartbeat and assignment from the broker (its group
# configs and the coordinator's task assignor), and Kafka Streams configures its own consumers.
STREAMS_SETTINGS_MESSAGE = (
    "spec.policy.settings delivers consumer client settings, which a Kafka Streams application "
    "on the streams protocol does not take (spec.policy.protocol is streams): the broker owns "
    "its session and heartbeat and assigns its tasks. Remove spec.policy.settings; set "
    "spec.policy.groupConfigs.streams.sessionTimeoutMs and heartbeatIntervalMs instead"
)
CONSUMER_CONFIGS_MESSAGE = (
    "spec.policy.groupConfigs.consumer holds KIP-848 consumer group configs, which a streams "
    "group does not have (spec.policy.protocol is streams): set "
    "spec.policy.groupConfigs.streams instead, or set spec.policy.protocol to consumer"
)
STREAMS_CONFIGS_MESSAGE = (
    "spec.policy.groupConfigs.streams holds streams group configs (KIP-1071), which a classic "
    "or KIP-848 group does not have (spec.policy.protocol is classic or consumer): set "
    "spec.policy.protocol to streams for a Kafka Streams application on the streams protocol, "
    "or remove spec.policy.groupConfigs.streams"
)


def streams_settings_problem(path: str) -> FieldProblem:
    """spec.policy.settings of a declared streams group, told with its fix."""
    return FieldProblem(
        path,
        "is not taken by a streams group (spec.policy.protocol: streams): a Kafka Streams "
        "application configures its own consumers, and the broker owns their session and "
        "heartbeat and assigns their tasks",
        "remove spec.policy.settings; set spec.policy.groupConfigs.streams.sessionTimeoutMs "
        "and heartbeatIntervalMs instead",
    )


class GroupPolicySpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                "!has(self.settings) || !has(self.protocol) || self.protocol != 'streams'",
                STREAMS_SETTINGS_MESSAGE,
                field_path=".settings",
                reason="FieldValueForbidden",
            ),
            cel(
                (
                    "!has(self.groupConfigs) || !has(self.groupConfigs.consumer) || "
                    "!has(self.protocol) || self.protocol != 'streams'"
                ),
                CONSUMER_CONFIGS_MESSAGE,
                field_path=".groupConfigs.consumer",
                reason="FieldValueForbidden",
            ),
            cel(
                (
                    "!has(self.groupConfigs) || !has(self.groupConfigs.streams) || "
                    "!has(self.protocol) || !(self.protocol in ['classic', 'consumer'])"
                ),
                STREAMS_CONFIGS_MESSAGE,
                field_path=".groupConfigs.streams",
                reason="FieldValueForbidden",
            ),
        ]
    },
):
    """How Rebalancer treats this group. Sections are added as features grow."""

    protocol: Annotated[
        ProtocolChoice,
        Field(
            description=(
                "Group protocol the members use: classic (JoinGroup/SyncGroup), consumer "
                "(KIP-848) or streams (KIP-1071, Kafka Streams with group.protocol=streams, "
                "Apache Kafka 4.2+). auto takes what the broker reports. streams reads the "
                "group with StreamsGroupDescribe from the first look, refuses enforced "
                "rebalances and spec.policy.settings, and takes groupConfigs.streams only; a "
                "group the broker reports as another protocol is a Degraded ProtocolMismatch."
            )
        ),
    ] = ProtocolChoice.AUTO
    observe: ObservationSpec = Field(
        default_factory=ObservationSpec, json_schema_extra={"default": {}}
    )
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    settings: ConsumerSettingsSpec | None = None
    broker_delay: BrokerDelaySpec | None = None
    group_configs: GroupConfigsSpec | None = None
    learning: LearningSpec = Field(default_factory=LearningSpec, json_schema_extra={"default": {}})
    enforce: EnforcementSpec | None = None
    history: HistorySpec = Field(default_factory=HistorySpec, json_schema_extra={"default": {}})

    def problems(self, path: str) -> list[FieldProblem]:
        """The CEL rules above, told with their fix, for a cluster that has an older CRD."""
        found: list[FieldProblem] = []
        configs = self.group_configs
        if self.protocol is ProtocolChoice.STREAMS and self.settings is not None:
            found.append(streams_settings_problem(f"{path}.settings"))
        if self.protocol is ProtocolChoice.STREAMS and configs and configs.consumer:
            found.append(
                FieldProblem(
                    f"{path}.groupConfigs.consumer",
                    "holds KIP-848 consumer group configs, which a streams group "
                    "(spec.policy.protocol: streams) does not have",
                    "set spec.policy.groupConfigs.streams instead, or set "
                    "spec.policy.protocol to consumer",
                )
            )
        declared = self.protocol in (ProtocolChoice.CLASSIC, ProtocolChoice.CONSUMER)
        if declared and configs and configs.streams:
            found.append(
                FieldProblem(
                    f"{path}.groupConfigs.streams",
                    "holds streams group configs (KIP-1071), which a "
                    f"{self.protocol.value} group (spec.policy.protocol: "
                    f"{self.protocol.value}) does not have",
                    "set spec.policy.protocol to streams for a Kafka Streams application on "
                    "the streams protocol, or remove spec.policy.groupConfigs.streams",
                )
            )
        return found


class ResourceSpec(
    SpecModel,
    json_schema_extra={
        "x-kubernetes-validations": [
            cel(
                (
                    "self.workload.kind != 'Deployment' || !has(self.policy) || "
                    "!has(self.policy.settings) || !has(self.policy.settings.staticMembership) ||"
                    " !self.policy.settings.staticMembership || (has(self.policy.rollout) && "
                    "has(self.policy.rollout.enabled) && self.policy.rollout.enabled && "
                    "(!has(self.policy.rollout.gateJoins) || self.policy.rollout.gateJoins))"
                ),
                (
                    "spec.policy.settings.staticMembership on a Deployment needs the join gate, "
                    "where the operator hands each new pod the identity of a pod that left: set "
                    "spec.policy.rollout.enabled: true (with gateJoins), or run the consumers as "
                    "a StatefulSet, or set staticMembership: false"
                ),
                field_path=".policy.settings.staticMembership",
                reason="FieldValueForbidden",
            )
        ]
    },
):
    """Desired state, written by the user."""

    # The status, history and rollout state all describe this one group: an edit would silently
    # mix two groups' records, so a different group is a new resource (self == oldSelf).
    group_id: Annotated[
        Str,
        Field(
            min_length=1,
            max_length=249,
            pattern="^[A-Za-z0-9._:/-]+$",
            description=(
                "The Kafka consumer group id (the consumers' group.id). Letters, digits and . _ -"
                " : / are allowed, 1 to 249 characters. Cannot be changed once set: create a new "
                "ConsumerGroup for another group."
            ),
            json_schema_extra={
                "x-kubernetes-validations": [
                    cel(
                        "self == oldSelf",
                        (
                            "spec.groupId is immutable: this ConsumerGroup's status and rebalance"
                            " history belong to the group it was created for. To manage another "
                            "group, create a new ConsumerGroup with that groupId and delete this "
                            "one"
                        ),
                        reason="FieldValueForbidden",
                    )
                ]
            },
        ),
        Wording(
            "{value} is not a valid group id",
            "use 1 to 249 letters, digits or . _ - : /",
            when=("string_pattern_mismatch", "string_too_long", "string_too_short"),
        ),
    ]
    kafka: KafkaConnectionSpec
    subscription: TopicSubscriptionSpec
    workload: WorkloadSpec
    policy: GroupPolicySpec = Field(
        default_factory=GroupPolicySpec, json_schema_extra={"default": {}}
    )
