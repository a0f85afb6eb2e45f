"""What the owner of a ConsumerGroup should change when its Kafka cluster cannot be used (pure).

The admin gateway names the cause in Kafka's terms ("authentication failed ... SCRAM-SHA-512",
"Kafka refused it to User:orders-operator"); the same gateway serves the sidecar, which knows
nothing of ConsumerGroups. Here the operator adds the fix in the resource's terms: which field,
which Secret and key. Nothing here reads a Secret, so no message can quote one.
"""

from __future__ import annotations

from collections.abc import Iterable

from rebalancer.structs.kafka_problems import KafkaProblem
from rebalancer.structs.specs import KafkaSpec, SecretKeyRef, SubscriptionSpec

SECURITY_DOC = "docs/kafka-security.md"


def security_protocol(kafka: KafkaSpec) -> str:
    """The security protocol the operator speaks for this spec, as Kafka names it."""
    tls = kafka.tls is not None and kafka.tls.enabled
    if kafka.sasl is not None:
        return "SASL_SSL" if tls else "SASL_PLAINTEXT"
    return "SSL" if tls else "PLAINTEXT"


def _secret(ref: SecretKeyRef, namespace: str, field: str) -> str:
    return f"Secret {namespace}/{ref.name} key {ref.key!r} ({field})"


def _fix(problem: str, kafka: KafkaSpec, namespace: str) -> str | None:
    sasl = kafka.sasl
    tls = kafka.tls if kafka.tls is not None and kafka.tls.enabled else None
    if problem == KafkaProblem.AUTHENTICATION:
        if sasl is None:
            return (
                "the cluster asked for credentials the ConsumerGroup does not give: set "
                "spec.kafka.sasl (mechanism and the Secrets holding the user name and password)"
            )
        user = _secret(sasl.username, namespace, "spec.kafka.sasl.usernameSecretRef")
        password = _secret(sasl.password, namespace, "spec.kafka.sasl.passwordSecretRef")
        return (
            f"check the user name in {user} and the password in {password}, and that the "
            f"user exists on the cluster for {sasl.mechanism.value} (spec.kafka.sasl.mechanism)"
        )
    if problem == KafkaProblem.TLS:
        if tls is not None and tls.ca is not None:
            ca = _secret(tls.ca, namespace, "spec.kafka.tls.caSecretRef")
            return (
                f"check that {ca} holds the CA certificate that signed the brokers' "
                "certificates, and that those name the hosts of spec.kafka.bootstrapServers"
            )
        return (
            "set spec.kafka.tls.caSecretRef to the CA certificate that signed the brokers' "
            "certificates (without it only public CAs are trusted)"
        )
    if problem == KafkaProblem.SECURITY_MISMATCH:
        protocol = security_protocol(kafka)
        return (
            f"the operator connects with {protocol} (spec.kafka.tls "
            f"{'set' if tls is not None else 'not set'}, spec.kafka.sasl "
            f"{'set' if sasl is not None else 'not set'}): make these match the security "
            "protocol of the listener spec.kafka.bootstrapServers names, or name a listener "
            f"that speaks {protocol}"
        )
    if problem == KafkaProblem.UNREACHABLE:
        return (
            "check spec.kafka.bootstrapServers (host names and ports) and that the brokers run "
            "and are reachable from the operator's pod"
        )
    if problem == KafkaProblem.COORDINATOR_UNAVAILABLE:
        return (
            "nothing in the ConsumerGroup: Kafka names a new coordinator once the controller "
            "has fenced the lost broker (about 10 s on Apache Kafka); if it lasts, check that "
            "the brokers run and that the group's __consumer_offsets partition has a leader"
        )
    if problem == KafkaProblem.NOT_AUTHORIZED:
        where = ""
        if sasl is not None:
            user = _secret(sasl.username, namespace, "spec.kafka.sasl.usernameSecretRef")
            where = f"the operator's Kafka user is the one in {user}; "
        return f"{where}{SECURITY_DOC} lists the ACLs the operator needs"
    return None


def kafka_problem(problem: str, message: str, kafka: KafkaSpec, namespace: str) -> str:
    """The gateway's `message` for a `problem` (a KafkaProblem value), with the fix in terms of
    the ConsumerGroup's fields."""
    fix = _fix(problem, kafka, namespace)
    return f"{message}; fix: {fix}" if fix else message


def hidden_topics(subscription: SubscriptionSpec, visible: Iterable[str]) -> tuple[str, ...]:
    """Topics spec.subscription.topics names that the cluster's metadata does not show.

    Kafka leaves a topic out of the metadata when it does not exist and also when the asker
    may not Describe it (the gateway's refused_topics tells which). A pattern cannot tell."""
    if subscription.pattern is not None:
        return ()
    shown = set(visible)
    return tuple(topic for topic in subscription.topics if topic not in shown)


def refused_topics_problem(message: str, kafka: KafkaSpec, namespace: str) -> str:
    """The gateway's refusal to describe subscribed topics, as the Degraded message says it."""
    return kafka_problem(
        KafkaProblem.NOT_AUTHORIZED,
        f"{message}; without it the operator cannot count their partitions",
        kafka,
        namespace,
    )
