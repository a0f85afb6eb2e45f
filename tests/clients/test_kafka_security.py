from __future__ import annotations

import pytest

from rebalancer.clients.kafka_errors import (
    ConnectionEvent,
    ConnectionWatch,
    KafkaRequestFailed,
    KafkaUnavailable,
    connection_problem,
    principal_of,
    request_failed,
    unreachable,
)
from rebalancer.clients.librdkafka_config import build_client_config, redacted
from rebalancer.planning.consumer_settings_plans import (
    SettingsPlan,
    settings_conditions,
    settings_status,
)
from rebalancer.planning.kafka_problems import hidden_topics, kafka_problem, refused_topics_problem
from rebalancer.structs.broker_configs import BrokerLimits
from rebalancer.structs.brokers import SecuritySettings, cluster_key
from rebalancer.structs.conditions import ConditionStatus, ConditionType
from rebalancer.structs.kafka_problems import KafkaProblem
from rebalancer.structs.specs import (
    KafkaSpec,
    SaslMechanism,
    SaslSpec,
    SecretKeyRef,
    SubscriptionSpec,
    TlsSpec,
)

PASSWORD = "hunter2-very-secret"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIsecretkeymaterial\n-----END PRIVATE KEY-----"
CERT = "-----BEGIN CERTIFICATE-----\nMIIcert\n-----END CERTIFICATE-----"


def full() -> SecuritySettings:
    return SecuritySettings(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username="rebalancer",
        password=PASSWORD,
        ca_pem=CERT,
        cert_pem=CERT,
        key_pem=KEY,
    )


def test_repr_and_str_never_show_the_password_or_key() -> None:
    settings = full()
    for text in (repr(settings), str(settings), f"{settings}", f"{settings!r}", str([settings])):
        assert PASSWORD not in text
        assert "secretkeymaterial" not in text
        assert "MIIcert" not in text
        assert "rebalancer" in text
        assert "<hidden>" in text


def test_repr_says_when_secrets_are_absent() -> None:
    assert "password=None" in repr(SecuritySettings())


def test_cluster_key_hides_secrets_but_tells_identities_apart() -> None:
    key = cluster_key(["b2:9092", "b1:9092"], full())
    assert PASSWORD not in key and "secretkeymaterial" not in key and "rebalancer" not in key
    assert key == cluster_key(["b1:9092", "b2:9092"], full())
    other = SecuritySettings(
        protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username="rebalancer", password="x"
    )
    assert key != cluster_key(["b1:9092", "b2:9092"], other)
    assert cluster_key(["b1:9092"], None) == cluster_key(["b1:9092"], SecuritySettings())
    assert cluster_key(["b1:9092"], None) != cluster_key(["b2:9092"], None)


def test_sasl_ssl_config() -> None:
    config = build_client_config([" b1:9093 ", "b2:9093"], full())
    assert config == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "rebalancer",
        "sasl.password": PASSWORD,
        "ssl.ca.pem": CERT,
        "ssl.certificate.pem": CERT,
        "ssl.key.pem": KEY,
    }
    shown = redacted(config)
    assert PASSWORD not in str(shown) and "secretkeymaterial" not in str(shown)


def test_plaintext_is_the_default() -> None:
    assert build_client_config(["localhost:9092"], None) == {
        "bootstrap.servers": "localhost:9092",
        "security.protocol": "PLAINTEXT",
    }


def test_skip_verify_turns_off_both_checks() -> None:
    config = build_client_config(["b:9093"], SecuritySettings(protocol="SSL", skip_verify=True))
    assert config["enable.ssl.certificate.verification"] == "false"
    assert config["ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(
    ("servers", "settings", "words"),
    [
        ([], None, "bootstrap"),
        (["b:9092"], SecuritySettings(protocol="KERBEROS"), "unknown Kafka security protocol"),
        (["b:9092"], SecuritySettings(protocol="SASL_PLAINTEXT", username="u"), "mechanism"),
        (
            ["b:9092"],
            SecuritySettings(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="u"),
            "password",
        ),
        (["b:9092"], SecuritySettings(protocol="SSL", cert_pem=CERT), "key"),
    ],
)
def test_bad_settings_are_named(
    servers: list[str], settings: SecuritySettings | None, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        build_client_config(servers, settings)


# -- What a failure on a secured cluster says, and what the ConsumerGroup's owner should change.
# The texts below are librdkafka 2.16's, as met on Apache Kafka 4.4
# (tests/clients/kafka/test_security.py meets them for real).

AUTH_FAILED = (
    "[thrd:sasl_plaintext://127.0.0.1:4/bootstrap]: sasl_plaintext://127.0.0.1:4/bootstrap: SASL "
    "authentication error: Authentication failed during authentication due to invalid "
    "credentials with SASL mechanism SCRAM-SHA-512 (after 307ms in state AUTH_REQ)"
)
TLS_TO_PLAINTEXT = (
    "sasl_ssl://127.0.0.1:4/bootstrap: SSL handshake failed: Disconnected: SSL connection closed "
    "by peer: connecting to a PLAINTEXT broker listener? (after 101ms in state SSL_HANDSHAKE)"
)
PLAINTEXT_TO_TLS = (
    "127.0.0.1:5/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN "
    "(after 4ms in state APIVERSION_QUERY)"
)
NO_SASL_TO_SASL = (
    "127.0.0.1:4/bootstrap: Disconnected: connection closed by peer: receive 0 after POLLIN "
    "(after 2ms in state UP)"
)
UNKNOWN_CA = (
    "sasl_ssl://127.0.0.1:5/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
    "certificate verify failed: broker certificate could not be verified, verify that "
    "ssl.ca.location is correctly configured or root CA certificates are installed (install "
    "ca-certificates package) (after 5ms in state SSL_HANDSHAKE)"
)

SASL_TO_PLAINTEXT = (
    "sasl_plaintext://127.0.0.1:4/bootstrap: SASL PLAIN mechanism handshake failed: Broker: "
    "Request not valid in current SASL state: broker's supported mechanisms:  (after 1ms in "
    "state AUTH_HANDSHAKE)"
)


@pytest.mark.parametrize(
    ("text", "sasl", "problem", "words"),
    [
        (AUTH_FAILED, True, KafkaProblem.AUTHENTICATION, "invalid credentials"),
        (TLS_TO_PLAINTEXT, True, KafkaProblem.SECURITY_MISMATCH, "the listener does not"),
        (PLAINTEXT_TO_TLS, True, KafkaProblem.SECURITY_MISMATCH, "probably expects TLS"),
        (NO_SASL_TO_SASL, False, KafkaProblem.SECURITY_MISMATCH, "expects SASL"),
        # With SASL, a closed connection in state UP is a broker going away, not a mismatch.
        (NO_SASL_TO_SASL, True, KafkaProblem.UNREACHABLE, "connection closed by peer"),
        (UNKNOWN_CA, True, KafkaProblem.TLS, "could not be verified"),
        (SASL_TO_PLAINTEXT, True, KafkaProblem.SECURITY_MISMATCH, "takes no SASL"),
        (
            SASL_TO_PLAINTEXT.replace("mechanisms:  (", "mechanisms: SCRAM-SHA-512 ("),
            True,
            KafkaProblem.AUTHENTICATION,
            "it takes SCRAM-SHA-512",
        ),
        (
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
            "(after 0ms in state CONNECT)",
            True,
            KafkaProblem.UNREACHABLE,
            "connection refused",
        ),
    ],
)
def test_connection_problems_are_told_apart(
    text: str, sasl: bool, problem: KafkaProblem, words: str
) -> None:
    found, phrase = connection_problem(text, 5, sasl)
    assert found is problem
    assert words in phrase
    # librdkafka's advice about its own ssl.ca.location would mislead an operator user.
    assert "ssl.ca.location" not in phrase and "ms in state" not in phrase


def test_an_authentication_error_code_wins_over_a_text_of_no_known_kind() -> None:
    event = ConnectionEvent(0.0, "_AUTHENTICATION", "b:1/bootstrap: something new")
    problem, message = unreachable("b:1", event, 1.5, 5)
    assert problem is KafkaProblem.AUTHENTICATION
    assert message.startswith("cannot reach Kafka at b:1: ")
    known = ConnectionEvent(0.0, "_AUTHENTICATION", SASL_TO_PLAINTEXT)
    assert unreachable("b:1", known, 1.5, 5)[0] is KafkaProblem.SECURITY_MISMATCH


def test_repeated_failures_do_not_restart_the_outage_clock() -> None:
    now = [100.0]
    watch = ConnectionWatch(clock=lambda: now[0])
    watch.record("_AUTHENTICATION", AUTH_FAILED)
    for _ in range(5):
        # librdkafka retries and fails again about every second.
        now[0] += 1.0
        watch.record("_AUTHENTICATION", AUTH_FAILED)
        watch.record("_ALL_BROKERS_DOWN", "1/1 brokers are down")
    assert watch.down_since() == 100.0
    watch.note_success()
    assert watch.down_since() is None
    now[0] += 1.0
    watch.record("_ALL_BROKERS_DOWN", "1/1 brokers are down")
    assert watch.down_since() == 106.0


def test_a_refused_request_names_the_principal_and_the_acl() -> None:
    message = request_failed(
        "describing group 'orders'",
        "GROUP_AUTHORIZATION_FAILED",
        "Broker: Group authorization failed",
        acl="Describe on group 'orders'",
        principal="User:orders-operator",
    )
    assert message == (
        "describing group 'orders' failed: Kafka refused it to User:orders-operator "
        "(GROUP_AUTHORIZATION_FAILED): grant User:orders-operator Describe on group 'orders'"
    )
    unnamed = request_failed("x", "CLUSTER_AUTHORIZATION_FAILED", "no")
    assert "the client's principal" in unnamed and "on the cluster" in unnamed
    assert KafkaRequestFailed(message, code="GROUP_AUTHORIZATION_FAILED").reason == (
        "KafkaNotAuthorized"
    )
    assert KafkaRequestFailed("x", code="INVALID_CONFIG").reason == "KafkaRequestFailed"
    assert KafkaUnavailable("x").reason == "KafkaUnreachable"


def test_the_principal_is_told_from_the_settings_without_the_password() -> None:
    config = build_client_config(["b:1"], full())
    assert principal_of(config) == "User:rebalancer"
    assert principal_of({"security.protocol": "PLAINTEXT"}) == "User:ANONYMOUS"
    # A TLS client certificate's subject is the principal; the settings do not tell it.
    assert principal_of({"security.protocol": "SSL"}) is None


def kafka_spec(**fields: object) -> KafkaSpec:
    sasl = SaslSpec(
        SaslMechanism.SCRAM_SHA_512,
        SecretKeyRef("orders-kafka", "username"),
        SecretKeyRef("orders-kafka", "password"),
    )
    base: dict[str, object] = {"bootstrap_servers": ("b:9092",), "sasl": sasl}
    base.update(fields)
    return KafkaSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("problem", "spec", "words"),
    [
        (
            KafkaProblem.AUTHENTICATION,
            kafka_spec(),
            [
                "Secret shop/orders-kafka key 'password' (spec.kafka.sasl.passwordSecretRef)",
                "exists on the cluster for SCRAM-SHA-512",
            ],
        ),
        (KafkaProblem.AUTHENTICATION, kafka_spec(sasl=None), ["set spec.kafka.sasl"]),
        (
            KafkaProblem.TLS,
            kafka_spec(tls=TlsSpec(ca=SecretKeyRef("kafka-ca", "ca.crt"))),
            ["Secret shop/kafka-ca key 'ca.crt' (spec.kafka.tls.caSecretRef)"],
        ),
        (KafkaProblem.TLS, kafka_spec(tls=TlsSpec()), ["set spec.kafka.tls.caSecretRef"]),
        (
            KafkaProblem.SECURITY_MISMATCH,
            kafka_spec(),
            ["connects with SASL_PLAINTEXT", "spec.kafka.tls not set, spec.kafka.sasl set"],
        ),
        (
            KafkaProblem.SECURITY_MISMATCH,
            kafka_spec(sasl=None, tls=TlsSpec()),
            ["connects with SSL"],
        ),
        (KafkaProblem.UNREACHABLE, kafka_spec(), ["check spec.kafka.bootstrapServers"]),
        (
            KafkaProblem.NOT_AUTHORIZED,
            kafka_spec(),
            ["(spec.kafka.sasl.usernameSecretRef)", "docs/kafka-security.md"],
        ),
    ],
)
def test_the_fix_names_the_fields_and_secrets(
    problem: KafkaProblem, spec: KafkaSpec, words: list[str]
) -> None:
    message = kafka_problem(problem, "cannot reach Kafka at b:9092: why", spec, "shop")
    assert message.startswith("cannot reach Kafka at b:9092: why; fix: ")
    for word in words:
        assert word in message


def test_an_unknown_problem_keeps_the_gateways_words() -> None:
    assert kafka_problem("KafkaRequestFailed", "it failed", kafka_spec(), "shop") == "it failed"


def test_subscribed_topics_missing_from_the_metadata_are_checked_and_a_refusal_named() -> None:
    subscription = SubscriptionSpec(topics=("orders", "refunds"))
    assert hidden_topics(subscription, {"orders": 4}.keys()) == ("refunds",)
    assert hidden_topics(subscription, ["orders", "refunds"]) == ()
    # A pattern matches whatever the metadata shows: nothing to check.
    assert hidden_topics(SubscriptionSpec(pattern="orders.*"), []) == ()
    refusal = request_failed(
        "describing topic 'refunds'",
        "TOPIC_AUTHORIZATION_FAILED",
        "",
        acl="Describe on topic 'refunds'",
        principal="User:orders-operator",
    )
    message = refused_topics_problem(refusal, kafka_spec(), "shop")
    assert "grant User:orders-operator Describe on topic 'refunds'" in message
    assert "cannot count their partitions" in message
    assert "Secret shop/orders-kafka key 'username'" in message


def test_a_refused_describe_configs_is_kept_and_made_a_condition() -> None:
    refusal = (
        "describing the configs of broker 1 failed: Kafka refused it to User:op "
        "(CLUSTER_AUTHORIZATION_FAILED): grant User:op DescribeConfigs on the cluster"
    )
    limits = BrokerLimits(refusal=refusal)
    assert "refused" in limits.describe_source()
    status = settings_status(SettingsPlan(problems=()), limits, applied=True)
    assert refusal in status["sessionLimits"]["message"]
    status["hash"] = "h1"  # a plan that was delivered: nothing else to say
    [condition] = settings_conditions(status)
    assert (condition.type, condition.status) == (ConditionType.DEGRADED, ConditionStatus.TRUE)
    assert condition.reason == "KafkaNotAuthorized"
    assert "DescribeConfigs on the cluster" in condition.message
    assert settings_conditions({"hash": "h1", "sessionLimits": {"source": "default"}}) == []
