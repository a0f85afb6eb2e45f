"""The broker settings that bound a group's timeouts, as the broker reports them or as defaulted.

Brokers differ in what DescribeConfigs returns: Apache Kafka lists every setting, a managed
service or a Kafka-protocol broker may return few or none. A limit the broker did not report
takes Apache Kafka's default, and `source` says which it was, so a refusal can say "the broker
says" or "Kafka's default is".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

MIN_SESSION_KEY = "group.min.session.timeout.ms"
MAX_SESSION_KEY = "group.max.session.timeout.ms"
CONSUMER_MIN_SESSION_KEY = "group.consumer.min.session.timeout.ms"
CONSUMER_MAX_SESSION_KEY = "group.consumer.max.session.timeout.ms"
CONSUMER_MIN_HEARTBEAT_KEY = "group.consumer.min.heartbeat.interval.ms"
CONSUMER_MAX_HEARTBEAT_KEY = "group.consumer.max.heartbeat.interval.ms"
DELAY_KEY = "group.initial.rebalance.delay.ms"
REDPANDA_DELAY_KEY = "group_initial_rebalance_delay"

# KIP-848 per-group configs (IncrementalAlterConfigs on a GROUP resource).
GROUP_SESSION_KEY = "consumer.session.timeout.ms"
GROUP_HEARTBEAT_KEY = "consumer.heartbeat.interval.ms"


class LimitSource(StrEnum):
    BROKER = "broker"  # every limit came from DescribeConfigs
    PARTLY = "partly"  # some did, the rest are Kafka's defaults
    DEFAULT = "default"  # the broker said nothing: Kafka's defaults


@dataclass(frozen=True)
class BrokerLimits:
    min_session_ms: int = 6000
    max_session_ms: int = 1800000
    consumer_min_session_ms: int = 45000
    consumer_max_session_ms: int = 60000
    consumer_min_heartbeat_ms: int = 5000
    consumer_max_heartbeat_ms: int = 15000
    # As the broker reports it; None when it did not (the broker may still have one).
    initial_rebalance_delay_ms: int | None = None
    # Where the broker says that value comes from (static-broker-config, default-config, ...).
    initial_rebalance_delay_source: str | None = None
    source: LimitSource = LimitSource.DEFAULT
    # Why the broker's configs could not be read (an ACL the operator lacks), in words that
    # say what to grant; None when they were read, or the broker simply reported none.
    refusal: str | None = None

    def describe_source(self) -> str:
        if self.refusal is not None:
            return "Kafka's default (the broker refused to describe its configs)"
        if self.source is LimitSource.BROKER:
            return "the broker's"
        if self.source is LimitSource.PARTLY:
            return "the broker's (Kafka's defaults where it did not say)"
        return "Kafka's default (the broker reports no configs)"


def _integer(configs: Mapping[str, str | None], key: str) -> int | None:
    raw = configs.get(key)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def limits_from_configs(
    configs: Mapping[str, str | None], sources: Mapping[str, str] | None = None
) -> BrokerLimits:
    """BrokerLimits from a DescribeConfigs answer (name -> value, and name -> where the value
    comes from, when known); missing names default."""
    base = BrokerLimits()
    keys = {
        "min_session_ms": MIN_SESSION_KEY,
        "max_session_ms": MAX_SESSION_KEY,
        "consumer_min_session_ms": CONSUMER_MIN_SESSION_KEY,
        "consumer_max_session_ms": CONSUMER_MAX_SESSION_KEY,
        "consumer_min_heartbeat_ms": CONSUMER_MIN_HEARTBEAT_KEY,
        "consumer_max_heartbeat_ms": CONSUMER_MAX_HEARTBEAT_KEY,
    }
    found: dict[str, int] = {}
    for attribute, key in keys.items():
        value = _integer(configs, key)
        if value is not None:
            found[attribute] = value
    delay = _integer(configs, DELAY_KEY)
    delay_source = (sources or {}).get(DELAY_KEY) if delay is not None else None
    if delay is None:
        # Redpanda spells it its own way, and in milliseconds too.
        delay = _integer(configs, REDPANDA_DELAY_KEY)
        delay_source = (sources or {}).get(REDPANDA_DELAY_KEY) if delay is not None else None
    # Only the classic pair decides "from the broker": KIP-848 keys are absent before Kafka 3.7.
    classic = {"min_session_ms", "max_session_ms"}
    if classic <= found.keys():
        source = LimitSource.BROKER
    elif found:
        source = LimitSource.PARTLY
    else:
        source = LimitSource.DEFAULT
    return BrokerLimits(
        min_session_ms=found.get("min_session_ms", base.min_session_ms),
        max_session_ms=found.get("max_session_ms", base.max_session_ms),
        consumer_min_session_ms=found.get("consumer_min_session_ms", base.consumer_min_session_ms),
        consumer_max_session_ms=found.get("consumer_max_session_ms", base.consumer_max_session_ms),
        consumer_min_heartbeat_ms=found.get(
            "consumer_min_heartbeat_ms", base.consumer_min_heartbeat_ms
        ),
        consumer_max_heartbeat_ms=found.get(
            "consumer_max_heartbeat_ms", base.consumer_max_heartbeat_ms
        ),
        initial_rebalance_delay_ms=delay,
        initial_rebalance_delay_source=delay_source,
        source=source,
    )


class ApplyState(StrEnum):
    APPLIED = "applied"  # the broker reads back what was set
    UNVERIFIABLE = "accepted-not-verifiable"  # accepted, but the broker reports no configs
    FAILED = "failed"  # refused, or it reads back something else
    NOT_NEEDED = "not-needed"  # nothing to set (a classic group has no group configs)


@dataclass(frozen=True)
class ConfigOutcome:
    state: ApplyState
    message: str


def verify_configs(
    wanted: Mapping[str, str], described: Mapping[str, str | None], what: str
) -> ConfigOutcome:
    """Compare what was set with what the broker reads back after an accepted change.

    A broker that answers DescribeConfigs with nothing at all cannot show that it kept a
    change; that is said as it is, not counted as success.
    """
    shown = ", ".join(f"{key}={value}" for key, value in sorted(wanted.items()))
    if not described:
        return ConfigOutcome(
            ApplyState.UNVERIFIABLE,
            f"{what}: the broker accepted {shown} but reports no configs to check it against",
        )
    differing = [
        f"{key} is {described.get(key)!r}, not {value!r}"
        for key, value in sorted(wanted.items())
        if described.get(key) != value
    ]
    if differing:
        return ConfigOutcome(
            ApplyState.FAILED,
            f"{what}: the broker accepted the change but reads back otherwise: "
            + "; ".join(differing),
        )
    return ConfigOutcome(ApplyState.APPLIED, f"{what}: {shown}")
