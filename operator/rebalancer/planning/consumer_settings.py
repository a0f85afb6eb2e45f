"""The consumer settings to deliver, for the group's protocol, and the table of what is refused.

    resolved = resolve_settings(policy, context)   # or SettingsRefused naming each field

Classic groups (JoinGroup/SyncGroup) get session, heartbeat, max-poll and assignor as client
properties. KIP-848 groups (`group.protocol=consumer`) no longer take the first three from the
client (librdkafka and the Java client refuse them): the broker owns the session and heartbeat
as per-group configs (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`, set with
IncrementalAlterConfigs on the GROUP resource) and assigns partitions itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from rebalancer.planning.assignor_migrations import AssignorStep, plan_assignor, render_strategy
from rebalancer.structs.broker_configs import (
    GROUP_HEARTBEAT_KEY,
    GROUP_SESSION_KEY,
    BrokerLimits,
)
from rebalancer.structs.broker_delay_policy import DELAY_PATH
from rebalancer.structs.brokers import GroupProtocol
from rebalancer.structs.consumer_group_spec import streams_settings_problem
from rebalancer.structs.consumer_settings_policy import (
    SETTINGS_PATH,
    ClientLibrary,
    EnvConvention,
    SettingsPolicy,
)
from rebalancer.structs.gates import INSTANCE_ID_ANNOTATION, INSTANCE_ID_FIELD_PATH
from rebalancer.structs.problems import FieldProblem, SpecInvalid
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind

# Kafka's consumer default, used when heartbeatIntervalMs is not given and a third of the
# session timeout is longer.
CLASSIC_HEARTBEAT_MS = 3000
# The broker's default for KIP-848 groups (group.consumer.heartbeat.interval.ms).
CONSUMER_HEARTBEAT_MS = 5000


class KeyScope(StrEnum):
    CLIENT = "client"  # an ordinary consumer property: passed through
    MANAGED = "managed"  # set from a typed field of spec.policy.settings
    BROKER = "broker"  # a broker setting: consumers ignore it
    GROUP = "group"  # a KIP-848 group config: set on the broker's GROUP resource
    CONNECTION = "connection"  # who and where the consumer is: the workload's own config
    SECRET = "secret"  # credentials: never in a ConfigMap


# Client property -> the field of spec.policy.settings (or spec) that sets it.
MANAGED_KEYS: dict[str, str] = {
    "session.timeout.ms": f"{SETTINGS_PATH}.sessionTimeoutMs",
    "heartbeat.interval.ms": f"{SETTINGS_PATH}.heartbeatIntervalMs",
    "max.poll.interval.ms": f"{SETTINGS_PATH}.maxPollIntervalMs",
    "partition.assignment.strategy": f"{SETTINGS_PATH}.assignmentStrategy",
    "group.instance.id": f"{SETTINGS_PATH}.staticMembership",
    "group.protocol": "spec.policy.protocol",
}
# Group config -> the field it is set from.
GROUP_KEYS: dict[str, str] = {
    GROUP_SESSION_KEY: f"{SETTINGS_PATH}.sessionTimeoutMs",
    GROUP_HEARTBEAT_KEY: f"{SETTINGS_PATH}.heartbeatIntervalMs",
}
# Client properties never start with "consumer."; group configs do (Kafka 4.0 and later).
_GROUP_PREFIXES = ("consumer.",)
BROKER_KEYS = frozenset(
    {
        "group.initial.rebalance.delay.ms",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.max.size",
        "group.coordinator.rebalance.protocols",
        "group.coordinator.threads",
        "auto.create.topics.enable",
        "delete.topic.enable",
        "default.replication.factor",
        "min.insync.replicas",
        "num.partitions",
        "broker.id",
        "node.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "unclean.leader.election.enable",
    }
)
_BROKER_PREFIXES = (
    "group.consumer.",
    "group.share.",
    "group.coordinator.",
    "offsets.",
    "transaction.state.log.",
    "log.",
    "num.",
    "broker.",
    "controller.",
    "zookeeper.",
    "replica.",
    "socket.request.max",
    "queued.max",
)
CONNECTION_KEYS = frozenset({"bootstrap.servers", "metadata.broker.list", "group.id"})
_SECRET_WORDS = ("password", "secret", "jaas", ".key.pem", "ssl_key", "keystore.key", "user.info")


def classify_key(key: str) -> KeyScope:
    lowered = key.lower()
    if lowered in MANAGED_KEYS:
        return KeyScope.MANAGED
    if any(word in lowered for word in _SECRET_WORDS):
        return KeyScope.SECRET
    if lowered in CONNECTION_KEYS:
        return KeyScope.CONNECTION
    if lowered in BROKER_KEYS or lowered.startswith(_BROKER_PREFIXES):
        return KeyScope.BROKER
    # Redpanda's cluster properties are snake_case words (group_initial_rebalance_delay).
    if "_" in lowered and "." not in lowered:
        return KeyScope.BROKER
    if lowered in GROUP_KEYS or lowered.startswith(_GROUP_PREFIXES):
        return KeyScope.GROUP
    return KeyScope.CLIENT


@dataclass(frozen=True)
class SettingsContext:
    """What the settings depend on besides the policy."""

    workload_kind: WorkloadKind
    protocol_choice: ProtocolChoice = ProtocolChoice.AUTO
    # status.group.protocol as last observed; None or UNKNOWN when not known.
    observed_protocol: GroupProtocol | None = None
    limits: BrokerLimits = field(default_factory=BrokerLimits)
    # The assignors the running consumers list (parse_strategy); None: not known.
    current_strategy: tuple[str, ...] | None = None
    # Every pod runs the workload's latest template (nothing of the last change is pending).
    rolled_out: bool = True
    # The group has members: a migration matters only then.
    group_active: bool = True
    # The operator opens the pods' join gates, where it can hand out identity slots.
    gate_joins: bool = False


@dataclass(frozen=True)
class ResolvedSettings:
    protocol: GroupProtocol  # CLASSIC or CONSUMER
    library: ClientLibrary
    # Client properties every pod shares (the ConfigMap and the env vars), sorted by key.
    properties: tuple[tuple[str, str], ...]
    static_membership: bool
    # KIP-848 only: per-group configs to set on the broker, sorted by key.
    group_configs: tuple[tuple[str, str], ...]
    assignor: AssignorStep | None
    heartbeat_interval_ms: int
    notes: tuple[str, ...] = ()
    # Where each pod's group.instance.id comes from (a downward-API field path) when static:
    # the pod's name on a StatefulSet, the identity slot the operator writes on a Deployment's.
    instance_id_field: str = "metadata.name"

    def property(self, key: str) -> str | None:
        return dict(self.properties).get(key)


class SettingsRefused(SpecInvalid):
    """Settings the operator will not deliver; each problem names the field and the fix."""


def effective_protocol(choice: ProtocolChoice, observed: GroupProtocol | None) -> GroupProtocol:
    """The protocol to render for: the user's choice, else what the broker showed, else classic.

    Classic is the safe guess: clients speak it unless told otherwise, and a KIP-848 group shows
    itself as soon as one member joins. A declared streams group has no client settings to
    render (check_settings refuses them before this is asked).
    """
    if choice is ProtocolChoice.CLASSIC:
        return GroupProtocol.CLASSIC
    if choice is ProtocolChoice.CONSUMER:
        return GroupProtocol.CONSUMER
    if observed is GroupProtocol.CONSUMER:
        return GroupProtocol.CONSUMER
    return GroupProtocol.CLASSIC


def derived_heartbeat(policy: SettingsPolicy, protocol: GroupProtocol) -> int:
    if policy.heartbeat_interval_ms is not None:
        return policy.heartbeat_interval_ms
    usual = CONSUMER_HEARTBEAT_MS if protocol is GroupProtocol.CONSUMER else CLASSIC_HEARTBEAT_MS
    return max(1, min(usual, policy.session_timeout_ms // 3))


def env_variable(key: str, prefix: str) -> str:
    """Upper-snake variable name: session.timeout.ms -> <prefix>SESSION_TIMEOUT_MS."""
    return prefix + "".join(ch if ch.isalnum() else "_" for ch in key).upper()


def _check_passthrough(policy: SettingsPolicy, protocol: GroupProtocol) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    for key, _ in policy.properties:
        path = f"{SETTINGS_PATH}.properties[{key}]"
        scope = classify_key(key)
        if scope is KeyScope.MANAGED:
            setter = MANAGED_KEYS[key.lower()]
            problem = "is set by the operator"
            if protocol is GroupProtocol.CONSUMER and key in (
                "session.timeout.ms",
                "heartbeat.interval.ms",
                "partition.assignment.strategy",
            ):
                problem = (
                    "is owned by the broker for a KIP-848 group (group.protocol=consumer); "
                    "clients refuse it"
                )
            problems.append(FieldProblem(path, problem, f"remove it and set {setter}"))
        elif scope is KeyScope.BROKER:
            fix = "set it on the brokers, not the consumers"
            if key.lower() in ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay"):
                fix = f"remove it and set {DELAY_PATH}.delayMs"
            problems.append(
                FieldProblem(path, "is a broker setting; consumers ignore or refuse it", fix)
            )
        elif scope is KeyScope.GROUP:
            group_setter = GROUP_KEYS.get(key.lower())
            fix = (
                f"remove it and set {group_setter}"
                if group_setter
                else "set it on the group with kafka-configs"
            )
            problems.append(
                FieldProblem(path, "is a group config on the broker, not a client property", fix)
            )
        elif scope is KeyScope.CONNECTION:
            problems.append(
                FieldProblem(
                    path,
                    "is part of the consumer's identity, which the workload configures",
                    "remove it; spec.groupId and spec.kafka describe the group for the operator",
                )
            )
        elif scope is KeyScope.SECRET:
            problems.append(
                FieldProblem(
                    path,
                    "is a credential and would be stored in a ConfigMap in plain text",
                    "remove it and give it to the consumer from a Secret",
                )
            )
    return problems


def _check_timings(
    policy: SettingsPolicy, protocol: GroupProtocol, limits: BrokerLimits, library: ClientLibrary
) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    session = policy.session_timeout_ms
    heartbeat = derived_heartbeat(policy, protocol)
    session_path = f"{SETTINGS_PATH}.sessionTimeoutMs"
    heartbeat_path = f"{SETTINGS_PATH}.heartbeatIntervalMs"
    problem = _heartbeat_problem(heartbeat, session, heartbeat_path)
    if problem is not None:
        problems.append(problem)
    source = limits.describe_source()
    if protocol is GroupProtocol.CONSUMER:
        low, high = limits.consumer_min_session_ms, limits.consumer_max_session_ms
        keys = "group.consumer.min/max.session.timeout.ms"
        hb_low, hb_high = limits.consumer_min_heartbeat_ms, limits.consumer_max_heartbeat_ms
        if not hb_low <= heartbeat <= hb_high:
            problems.append(
                FieldProblem(
                    heartbeat_path,
                    f"({heartbeat}) is outside {source} group.consumer.min/max.heartbeat."
                    f"interval.ms ({hb_low} to {hb_high}) for KIP-848 groups",
                    f"set heartbeatIntervalMs between {hb_low} and {hb_high}, or raise the "
                    "broker's limits",
                )
            )
    else:
        low, high = limits.min_session_ms, limits.max_session_ms
        keys = "group.min/max.session.timeout.ms"
    if not low <= session <= high:
        problems.append(
            FieldProblem(
                session_path,
                f"({session}) is outside {source} {keys} ({low} to {high}); the broker would "
                "refuse every JoinGroup",
                f"set sessionTimeoutMs between {low} and {high}, or change the broker's {keys}",
            )
        )
    if (
        protocol is GroupProtocol.CLASSIC
        and library is ClientLibrary.LIBRDKAFKA
        and policy.max_poll_interval_ms < session
    ):
        problems.append(
            FieldProblem(
                f"{SETTINGS_PATH}.maxPollIntervalMs",
                f"({policy.max_poll_interval_ms}) is below sessionTimeoutMs ({session}); "
                "librdkafka refuses to start such a consumer",
                f"set maxPollIntervalMs to at least {session}",
            )
        )
    return problems


def _heartbeat_problem(heartbeat: int, session: int, heartbeat_path: str) -> FieldProblem | None:
    """A heartbeat interval too long for the session to survive one late heartbeat."""
    if heartbeat >= session:
        return FieldProblem(
            heartbeat_path,
            f"({heartbeat}) is not below sessionTimeoutMs ({session}): the member would "
            "expire between two heartbeats",
            f"set heartbeatIntervalMs to at most {session // 3} (a third of the session)",
        )
    if heartbeat * 3 > session:
        return FieldProblem(
            heartbeat_path,
            f"({heartbeat}) is more than a third of sessionTimeoutMs ({session}): one late "
            "heartbeat would cost the member its partitions",
            f"set heartbeatIntervalMs to at most {session // 3}",
        )
    return None


def _check_delivery(
    policy: SettingsPolicy, kind: WorkloadKind, gate_joins: bool = False
) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    path = f"{SETTINGS_PATH}.staticMembership"
    if policy.static_membership and kind is WorkloadKind.DEPLOYMENT and not gate_joins:
        problems.append(
            FieldProblem(
                path,
                "on a Deployment needs the join gate: its pods get new names, so each takes the "
                "identity of a pod that left, which the operator hands out when it opens the "
                "pod's gate (without it each old group.instance.id would hold its partitions "
                "for a session timeout)",
                "set spec.policy.rollout.enabled and gateJoins to true, with the gate in the "
                "template or spec.policy.rollout.injectGate: true; or run the consumers as a "
                "StatefulSet; or set staticMembership: false",
            )
        )
    if policy.static_membership and policy.env.effective_prefix is None:
        problems.append(
            FieldProblem(
                path,
                "needs each pod's name as group.instance.id, which only an environment variable "
                "can carry (the properties file is shared by every pod)",
                f"set {SETTINGS_PATH}.env.convention to kafka, spring or custom",
            )
        )
    prefix = policy.env.effective_prefix
    if prefix is not None:
        seen = {env_variable(key, prefix): key for key in MANAGED_KEYS}
        for key, _ in policy.properties:
            if classify_key(key) is KeyScope.MANAGED:
                continue  # refused on its own above
            name = env_variable(key, prefix)
            other = seen.get(name)
            if other in MANAGED_KEYS:
                problems.append(
                    FieldProblem(
                        f"{SETTINGS_PATH}.properties[{key}]",
                        f"becomes the variable {name}, which carries {other}",
                        f"remove it and set {MANAGED_KEYS[other]}",
                    )
                )
            elif other is not None:
                problems.append(
                    FieldProblem(
                        f"{SETTINGS_PATH}.properties[{key}]",
                        f"and properties[{other}] both become the variable {name}",
                        "keep one of the two",
                    )
                )
            seen[name] = key
    return problems


def check_settings(policy: SettingsPolicy, context: SettingsContext) -> list[FieldProblem]:
    """Every reason the settings cannot be delivered as asked (empty: they can)."""
    if context.protocol_choice is ProtocolChoice.STREAMS:
        # Refused by the schema already; an older CRD lets it through to here.
        return [streams_settings_problem(SETTINGS_PATH)]
    protocol = effective_protocol(context.protocol_choice, context.observed_protocol)
    library = policy.library
    problems = _check_passthrough(policy, protocol)
    problems += _check_timings(policy, protocol, context.limits, library)
    problems += _check_delivery(policy, context.workload_kind, context.gate_joins)
    if protocol is GroupProtocol.CLASSIC:
        step = _assignor(policy, context)
        if step.problem is not None:
            problems.append(
                FieldProblem(
                    f"{SETTINGS_PATH}.assignmentStrategy",
                    step.problem,
                    step.fix or "choose another assignor",
                )
            )
    return problems


def _assignor(policy: SettingsPolicy, context: SettingsContext) -> AssignorStep:
    return plan_assignor(
        policy.strategy,
        policy.library,
        context.current_strategy,
        rolled_out=context.rolled_out,
        group_active=context.group_active,
    )


def resolve_settings(policy: SettingsPolicy, context: SettingsContext) -> ResolvedSettings:
    """The settings to deliver, or SettingsRefused listing every problem (check_settings)."""
    problems = check_settings(policy, context)
    if problems:
        raise SettingsRefused(tuple(problems))
    protocol = effective_protocol(context.protocol_choice, context.observed_protocol)
    library = policy.library
    heartbeat = derived_heartbeat(policy, protocol)
    properties = dict(policy.properties)
    notes: list[str] = []
    group_configs: dict[str, str] = {}
    assignor: AssignorStep | None = None
    properties["max.poll.interval.ms"] = str(policy.max_poll_interval_ms)
    if protocol is GroupProtocol.CONSUMER:
        if context.protocol_choice is ProtocolChoice.CONSUMER:
            # The client opts in; under auto the consumers already chose it themselves.
            properties["group.protocol"] = "consumer"
        group_configs[GROUP_SESSION_KEY] = str(policy.session_timeout_ms)
        group_configs[GROUP_HEARTBEAT_KEY] = str(heartbeat)
        notes.append(
            "KIP-848 group: session and heartbeat are set on the broker as group configs; "
            "the broker assigns partitions"
        )
        if policy.assignment_strategy is not None:
            notes.append(
                f"assignmentStrategy {policy.assignment_strategy.value} is not applied: under "
                "KIP-848 the broker's assignor decides (group.remote.assignor picks one)"
            )
    else:
        properties["session.timeout.ms"] = str(policy.session_timeout_ms)
        properties["heartbeat.interval.ms"] = str(heartbeat)
        assignor = _assignor(policy, context)
        properties["partition.assignment.strategy"] = render_strategy(assignor.strategies, library)
        if assignor.note:
            notes.append(assignor.note)
    instance_id_field = "metadata.name"
    if policy.static_membership and context.workload_kind is WorkloadKind.DEPLOYMENT:
        instance_id_field = INSTANCE_ID_FIELD_PATH
        notes.append(
            "static membership: group.instance.id is the identity slot the operator writes on "
            f"each pod ({INSTANCE_ID_ANNOTATION}) when it opens the pod's gate; a new pod takes "
            "the slot of a pod that left"
        )
    elif policy.static_membership:
        notes.append("static membership: group.instance.id is each pod's name")
    if policy.env.convention is EnvConvention.NONE:
        notes.append("settings are delivered in the properties file only")
    return ResolvedSettings(
        protocol=protocol,
        library=library,
        properties=tuple(sorted(properties.items())),
        static_membership=policy.static_membership,
        instance_id_field=instance_id_field,
        group_configs=tuple(sorted(group_configs.items())),
        assignor=assignor,
        heartbeat_interval_ms=heartbeat,
        notes=tuple(notes),
    )


def summarize_problems(problems: Sequence[FieldProblem]) -> str:
    return "; ".join(str(problem) for problem in problems)
