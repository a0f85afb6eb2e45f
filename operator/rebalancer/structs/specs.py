"""The ConsumerGroup spec as typed data, read from the resource body through its model.

The CRD schema rejects most mistakes at admission, but the operator validates again: a cluster
may run an older CRD, a schema cannot check that a regex compiles, and the operator must never
act on half-understood input. It validates with the same model the CRD is rendered from
(structs/consumer_group_spec.py, through spec_models.read_spec), so a bound, a default or an
enum is never copied; every problem names the field path the user has to fix. The frozen
dataclasses below are what the rest of the operator reads, made from a validated model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rebalancer.structs.broker_delay_policy import BrokerDelayPolicy, broker_delay_policy_of
from rebalancer.structs.consumer_group_spec import (
    BrokerProfileChoice,
    KafkaConnectionSpec,
    ProtocolChoice,
    ResourceSpec,
    SaslMechanism,
    WorkloadKind,
)
from rebalancer.structs.consumer_settings_policy import SettingsPolicy, settings_policy_of
from rebalancer.structs.enforce_policy import EnforceSpec, enforce_policy_of
from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS
from rebalancer.structs.group_configs_spec import GroupConfigsSpec
from rebalancer.structs.problems import FieldProblem, SpecInvalid, kind_of
from rebalancer.structs.recommendations import LearningPolicy, learning_policy_of
from rebalancer.structs.rollout_policy import RolloutPolicy, policy_of
from rebalancer.structs.spec_models import read_spec
from rebalancer.structs.topic_patterns import MAX_PATTERN_LENGTH, check_pattern

__all__ = [
    "MAX_PATTERN_LENGTH",
    "BrokerProfileChoice",
    "ConsumerGroupSpec",
    "KafkaSpec",
    "ObservePolicy",
    "Policy",
    "ProtocolChoice",
    "SaslMechanism",
    "SaslSpec",
    "SecretKeyRef",
    "SubscriptionSpec",
    "TlsSpec",
    "WorkloadKind",
    "WorkloadRef",
    "check_pattern",
    "parse_spec",
]


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


def parse_spec(raw: object, *, bypass_default: int = DEFAULT_BYPASS_SECONDS) -> ConsumerGroupSpec:
    """Parse a ConsumerGroup's `spec`, or raise SpecInvalid listing every problem.

    `bypass_default` stands for an unset `policy.rollout.bypassGateAfterSeconds`: the operator's
    own default (--gate-bypass-after-seconds)."""
    model = read_spec(ResourceSpec, _spec_mapping(raw), "spec")
    return ConsumerGroupSpec(
        group_id=model.group_id,
        kafka=_kafka_of(model.kafka),
        subscription=SubscriptionSpec(
            topics=tuple(model.subscription.topics or ()), pattern=model.subscription.pattern
        ),
        workload=WorkloadRef(model.workload.kind, model.workload.name, model.workload.container),
        policy=_policy_of(model, bypass_default),
    )


def _spec_mapping(raw: object) -> Mapping[str, object]:
    if raw is None:
        raise SpecInvalid((FieldProblem("spec", "is required", "add spec to the ConsumerGroup"),))
    if not isinstance(raw, Mapping):
        wrong = FieldProblem(
            "spec", f"must be an object, got {kind_of(raw)}", "write spec as a mapping"
        )
        raise SpecInvalid((wrong,))
    return raw


def _policy_of(model: ResourceSpec, bypass_default: int) -> Policy:
    """spec.policy of a validated spec (SpecInvalid when a learning bound crosses its default)."""
    policy = model.policy
    rollout = policy_of(policy.rollout, bypass_default)
    if "enabled" not in policy.rollout.model_fields_set:
        # Managed only when the user turned it on: the CRD's default is off, and an object its
        # defaulting never saw (an older CRD) is left alone too.
        rollout = replace(rollout, enabled=False)
    return Policy(
        protocol=policy.protocol,
        observe=ObservePolicy(policy.observe.interval_seconds, policy.observe.report_ttl_seconds),
        history_enabled=policy.history.enabled,
        settings=None if policy.settings is None else settings_policy_of(policy.settings),
        broker_delay=(
            None if policy.broker_delay is None else broker_delay_policy_of(policy.broker_delay)
        ),
        group_configs=policy.group_configs,
        learning=learning_policy_of(policy.learning, "spec.policy.learning"),
        rollout=rollout,
        enforce=EnforceSpec() if policy.enforce is None else enforce_policy_of(policy.enforce),
    )


def _kafka_of(kafka: KafkaConnectionSpec) -> KafkaSpec:
    tls: TlsSpec | None = None
    if kafka.tls is not None:
        ca, cert = kafka.tls.ca_secret_ref, kafka.tls.client_cert_secret_ref
        tls = TlsSpec(
            enabled=kafka.tls.enabled,
            ca=None if ca is None else SecretKeyRef(ca.name, ca.key),
            client_cert=None if cert is None else SecretKeyRef(cert.name, cert.cert_key),
            client_key=None if cert is None else SecretKeyRef(cert.name, cert.key_key),
            insecure_skip_verify=kafka.tls.insecure_skip_verify,
        )
    sasl: SaslSpec | None = None
    if kafka.sasl is not None:
        user, password = kafka.sasl.username_secret_ref, kafka.sasl.password_secret_ref
        sasl = SaslSpec(
            kafka.sasl.mechanism,
            SecretKeyRef(user.name, user.key),
            SecretKeyRef(password.name, password.key),
        )
    return KafkaSpec(
        tuple(kafka.bootstrap_servers), kafka.profile, kafka.request_timeout_seconds, tls, sasl
    )
