"""librdkafka client settings from bootstrap servers and SecuritySettings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rebalancer.structs.brokers import SecurityProtocol, SecuritySettings
from rebalancer.structs.kafka_properties import SettingsError, parse_properties

# Property names whose values must never reach a log line or a status message.
SECRET_PROPERTIES = frozenset(
    {
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl_key",
    }
)

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def build_client_config(
    bootstrap_servers: Sequence[str], security: SecuritySettings | None
) -> dict[str, str]:
    """librdkafka properties for any client (admin, consumer, producer) of this cluster.

    Raises ValueError naming the missing or contradictory setting.
    """
    servers = [server.strip() for server in bootstrap_servers if server.strip()]
    if not servers:
        raise ValueError("no Kafka bootstrap servers given: list at least one host:port")
    settings = security or SecuritySettings()
    protocol = str(settings.protocol).upper()
    if protocol not in {member.value for member in SecurityProtocol}:
        allowed = ", ".join(member.value for member in SecurityProtocol)
        raise ValueError(f"unknown Kafka security protocol {protocol!r}: use one of {allowed}")
    config = {"bootstrap.servers": ",".join(servers), "security.protocol": protocol}
    if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        mechanism = (settings.sasl_mechanism or "").upper()
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(
                f"SASL needs a mechanism, one of {', '.join(SASL_MECHANISMS)}; "
                f"got {settings.sasl_mechanism!r}"
            )
        if not settings.username or settings.password is None:
            raise ValueError("SASL needs both a username and a password")
        config["sasl.mechanism"] = mechanism
        config["sasl.username"] = settings.username
        config["sasl.password"] = settings.password
    if protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL):
        if (settings.cert_pem is None) != (settings.key_pem is None):
            raise ValueError("a TLS client certificate needs its key, and a key its certificate")
        if settings.ca_pem:
            config["ssl.ca.pem"] = settings.ca_pem
        if settings.cert_pem and settings.key_pem:
            config["ssl.certificate.pem"] = settings.cert_pem
            config["ssl.key.pem"] = settings.key_pem
        if settings.skip_verify:
            config["enable.ssl.certificate.verification"] = "false"
            config["ssl.endpoint.identification.algorithm"] = "none"
    return config


def redacted(config: Mapping[str, object]) -> dict[str, str]:
    """The config as text fit for logs: secrets replaced, PEM blocks shortened."""
    shown: dict[str, str] = {}
    for key, value in config.items():
        if key in SECRET_PROPERTIES:
            shown[key] = "<hidden>"
        elif key.endswith(".pem"):
            shown[key] = "<pem>"
        elif isinstance(value, str | int | float | bool):
            shown[key] = str(value)
    return shown


def read_properties_file(path: Path) -> dict[str, str]:
    """A mounted consumer.properties (KAFKA_CONFIG_FILE), as librdkafka properties."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SettingsError(f"cannot read KAFKA_CONFIG_FILE {path}: {error.strerror}") from None
    return parse_properties(text, str(path))
