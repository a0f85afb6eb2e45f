"""Settings of the example consumer, read the way a containerised consumer reads them.

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

from rebalancer.clients.librdkafka_config import read_properties_file
from rebalancer.structs.kafka_properties import (
    SettingsError,
    drop_classic_only,
    env_properties,
    env_variable,
)

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
    properties.update(env_properties(env))
    for name in ("bootstrap.servers", "group.id"):
        if not properties.get(name):
            raise SettingsError(
                f"{name} is not set: set {env_variable(name)} or put it in KAFKA_CONFIG_FILE"
            )
    drop_classic_only(properties)

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
