from __future__ import annotations

import pytest

from rebalancer.clients.kafka_config import build_client_config, redacted
from rebalancer.structs.brokers import SecuritySettings, cluster_key

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
