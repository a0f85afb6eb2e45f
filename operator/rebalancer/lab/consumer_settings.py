"""Settings of the lab's example consumer, read the way a containerised consumer reads them.

A `consumer.properties` file (KAFKA_CONFIG_FILE, librdkafka property names) is the base; the
KAFKA_* environment variables the operator tunes override it, so the operator can change one
setting through the pod template without touching the file.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Environment variable -> librdkafka property; these are the settings Rebalancer tunes.
ENV_PROPERTIES: Mapping[str, str] = {
    "KAFKA_BOOTSTRAP_SERVERS": "bootstrap.servers",
    "KAFKA_GROUP_ID": "group.id",
    "KAFKA_SESSION_TIMEOUT_MS": "session.timeout.ms",
    "KAFKA_HEARTBEAT_INTERVAL_MS": "heartbeat.interval.ms",
    "KAFKA_MAX_POLL_INTERVAL_MS": "max.poll.interval.ms",
    "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "partition.assignment.strategy",
    "KAFKA_GROUP_INSTANCE_ID": "group.instance.id",
    "KAFKA_GROUP_PROTOCOL": "group.protocol",
}

# Properties shown at start-up: the ones that decide how often the group rebalances.
SHOWN_PROPERTIES = (
    "bootstrap.servers",
    "group.id",
    "group.protocol",
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
)

# Under group.protocol=consumer (KIP-848) the broker owns these; librdkafka refuses them.
_CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


class SettingsError(ValueError):
    """A setting is missing or malformed; the message says which and how to fix it."""


@dataclass(frozen=True)
class ConsumerSettings:
    properties: dict[str, str]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    host: str = ""
    record_file: Path | None = None
    report_url: str | None = None
    report_token: str | None = field(default=None, repr=False)
    # Which ConsumerGroup resource the reports belong to, when the operator injected it.
    namespace: str | None = None
    consumer_group: str | None = None
    heartbeat_seconds: float = 5.0
    process_delay_ms: float = 0.0
    # REBALANCER_SETTINGS_HASH: which settings revision the operator started this pod with.
    settings_hash: str | None = None
    config_file: Path | None = None

    @property
    def group_id(self) -> str:
        return self.properties["group.id"]

    @property
    def incremental(self) -> bool:
        """Whether assignments change incrementally (cooperative-sticky, or KIP-848)."""
        strategy = self.properties.get("partition.assignment.strategy", "")
        return (
            "cooperative-sticky" in strategy
            or self.properties.get("group.protocol", "classic") == "consumer"
        )

    @property
    def protocol(self) -> str:
        return self.properties.get("group.protocol", "classic")

    @property
    def strategy(self) -> str:
        if self.protocol == "consumer":
            return self.properties.get("group.remote.assignor", "uniform")
        return self.properties.get("partition.assignment.strategy", "range,roundrobin")

    def subscription(self) -> list[str]:
        if self.pattern is not None:
            # librdkafka treats a subscription as a regex only when it starts with "^".
            return [self.pattern if self.pattern.startswith("^") else f"^{self.pattern}"]
        return list(self.topics)


def read_properties_file(path: Path) -> dict[str, str]:
    """A Java-style .properties file: key=value or key: value, # and ! start comments."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SettingsError(f"cannot read KAFKA_CONFIG_FILE {path}: {error.strerror}") from None
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separators = [index for index in (line.find("="), line.find(":")) if index > 0]
        if not separators:
            raise SettingsError(f"{path}:{number}: expected key=value, got {line!r}")
        cut = min(separators)
        properties[line[:cut].strip()] = line[cut + 1 :].strip()
    return properties


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, not {raw!r}") from None


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | None = None,
    record_file: str | None = None,
) -> ConsumerSettings:
    env = os.environ if env is None else env
    file_path = config_file or env.get("KAFKA_CONFIG_FILE") or None
    properties = read_properties_file(Path(file_path)) if file_path else {}
    for variable, name in ENV_PROPERTIES.items():
        value = env.get(variable, "").strip()
        if value:
            properties[name] = value
    for name in ("bootstrap.servers", "group.id"):
        if not properties.get(name):
            variable = next(var for var, prop in ENV_PROPERTIES.items() if prop == name)
            raise SettingsError(f"{name} is not set: set {variable} or put it in KAFKA_CONFIG_FILE")
    if properties.get("group.protocol") == "consumer":
        for name in _CLASSIC_ONLY:
            properties.pop(name, None)

    topics = tuple(t.strip() for t in env.get("KAFKA_TOPICS", "").split(",") if t.strip())
    pattern = env.get("KAFKA_TOPIC_PATTERN", "").strip() or None
    if bool(topics) == bool(pattern):
        raise SettingsError("set exactly one of KAFKA_TOPICS (comma list) or KAFKA_TOPIC_PATTERN")

    host = env.get("POD_NAME", "").strip() or socket.gethostname()
    properties.setdefault("client.id", host)
    properties.setdefault("auto.offset.reset", "earliest")
    # At-least-once: offsets are committed by the loop after processing, never in the background.
    properties["enable.auto.commit"] = "false"

    heartbeat = _number(env, "REBALANCER_REPORT_INTERVAL_S", 5.0)
    report_url = env.get("REBALANCER_REPORT_URL", "").strip() or None
    if report_url is not None:
        # The heartbeat report carries lag, which comes from librdkafka's statistics.
        properties.setdefault("statistics.interval.ms", str(max(int(heartbeat * 1000), 100)))
    record = record_file or env.get("RECORD_FILE") or None
    return ConsumerSettings(
        properties=properties,
        topics=topics,
        pattern=pattern,
        host=host,
        record_file=Path(record) if record else None,
        report_url=report_url,
        report_token=env.get("REBALANCER_REPORT_TOKEN", "").strip() or None,
        namespace=env.get("REBALANCER_NAMESPACE", "").strip() or None,
        consumer_group=env.get("REBALANCER_CONSUMER_GROUP", "").strip() or None,
        heartbeat_seconds=heartbeat,
        process_delay_ms=_number(env, "PROCESS_DELAY_MS", 0.0),
        settings_hash=env.get("REBALANCER_SETTINGS_HASH", "").strip() or None,
        config_file=Path(file_path) if file_path else None,
    )
