"""Kafka client properties as containers receive them: KAFKA_* variables and .properties text.

The lab consumer and the sidecar read the same variables from the same pod, so they must agree
on what each variable means; this is the one table both use.
"""

from __future__ import annotations

from collections.abc import Mapping

from rebalancer.structs.errors import RebalancerError

# Environment variable -> librdkafka property: the settings Rebalancer tunes, the static
# member's instance id, and the security settings a cluster may need.
ENV_PROPERTIES: Mapping[str, str] = {
    "KAFKA_BOOTSTRAP_SERVERS": "bootstrap.servers",
    "KAFKA_GROUP_ID": "group.id",
    "KAFKA_SESSION_TIMEOUT_MS": "session.timeout.ms",
    "KAFKA_HEARTBEAT_INTERVAL_MS": "heartbeat.interval.ms",
    "KAFKA_MAX_POLL_INTERVAL_MS": "max.poll.interval.ms",
    "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "partition.assignment.strategy",
    "KAFKA_GROUP_INSTANCE_ID": "group.instance.id",
    "KAFKA_GROUP_PROTOCOL": "group.protocol",
    "KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "KAFKA_SASL_MECHANISM": "sasl.mechanism",
    "KAFKA_SASL_USERNAME": "sasl.username",
    "KAFKA_SASL_PASSWORD": "sasl.password",
    "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
    "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
    "KAFKA_SSL_KEY_PASSWORD": "ssl.key.password",
}

# Under group.protocol=consumer (KIP-848) the broker owns these; librdkafka refuses them.
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


class SettingsError(RebalancerError, ValueError):
    """A client setting is missing or malformed; the message says which and how to fix it."""


class PropertiesError(SettingsError):
    """A .properties line that is not key=value; the message names the file and line."""


def env_variable(name: str) -> str:
    """The KAFKA_* variable that sets property `name` (for messages that say how to fix)."""
    return next(variable for variable, prop in ENV_PROPERTIES.items() if prop == name)


def env_properties(env: Mapping[str, str]) -> dict[str, str]:
    """The properties the environment sets; blank variables set nothing."""
    return {
        name: env[variable].strip()
        for variable, name in ENV_PROPERTIES.items()
        if env.get(variable, "").strip()
    }


def parse_properties(text: str, origin: str) -> dict[str, str]:
    """Java-style .properties: key=value or key: value, # and ! start comments."""
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cuts = [index for index in (line.find("="), line.find(":")) if index > 0]
        if not cuts:
            raise PropertiesError(f"{origin}:{number}: expected key=value, got {line!r}")
        cut = min(cuts)
        properties[line[:cut].strip()] = line[cut + 1 :].strip()
    return properties


def drop_classic_only(properties: dict[str, str]) -> None:
    """KIP-848 members must not send what the broker now owns."""
    if properties.get("group.protocol") == "consumer":
        for name in CLASSIC_ONLY:
            properties.pop(name, None)
