"""`spec.policy.brokerDelay`, parsed: what the group wants for the cluster-wide
`group.initial.rebalance.delay.ms` and how the operator may get it (recommend, a Strimzi `Kafka`
resource, or IncrementalAlterConfigs); every problem names its field. Absent unless asked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.field_reader import FieldReader, required_int
from rebalancer.structs.problems import FieldProblem, SpecInvalid

DELAY_PATH = "spec.policy.brokerDelay"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class DelayMode(StrEnum):
    RECOMMEND = "recommend"  # status and an Event with the value to set
    STRIMZI = "strimzi"  # patch the Strimzi Kafka resource's spec.kafka.config
    ALTER_CONFIGS = "alter-configs"  # IncrementalAlterConfigs, where the broker takes it live


@dataclass(frozen=True)
class StrimziRef:
    name: str
    namespace: str | None = None  # None: the ConsumerGroup's namespace


@dataclass(frozen=True)
class BrokerDelayPolicy:
    mode: DelayMode = DelayMode.RECOMMEND
    delay_ms: int = 3000
    # The most this group tolerates: the cluster's value is capped at the smallest of these.
    max_delay_ms: int = 30000
    strimzi: StrimziRef | None = None


def parse_broker_delay_policy(raw: object, path: str = DELAY_PATH) -> BrokerDelayPolicy | None:
    """`spec.policy.brokerDelay` (None when absent: no delay is wanted), or SpecInvalid."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecInvalid((FieldProblem(path, "must be an object", "see the CRD docs"),))
    reader = FieldReader(path)
    base = BrokerDelayPolicy()
    mode = reader.choice(raw, "mode", DelayMode, base.mode)
    delay = required_int(reader, raw, "delayMs", base.delay_ms, 0, 300000)
    cap = required_int(reader, raw, "maxDelayMs", base.max_delay_ms, 0, 300000)
    if delay > cap:
        reader.fail(
            "delayMs",
            f"({delay}) is above maxDelayMs ({cap})",
            "raise maxDelayMs or lower delayMs",
        )
    strimzi: StrimziRef | None = None
    strimzi_raw = reader.mapping(raw.get("strimzi"), "strimzi")
    if strimzi_raw:
        name = reader.string(strimzi_raw, "name")
        namespace = reader.string(strimzi_raw, "namespace")
        for key, value in (("name", name), ("namespace", namespace)):
            if value is not None and not _DNS_SUBDOMAIN.match(value):
                reader.fail(f"strimzi.{key}", f"{value[:80]!r} is not a valid name", "fix it")
        if name is None:
            reader.fail("strimzi.name", "is required", "name the Strimzi Kafka resource")
        else:
            strimzi = StrimziRef(name, namespace)
    if mode is DelayMode.STRIMZI and strimzi is None and not strimzi_raw:
        reader.fail(
            "strimzi",
            "is required with mode strimzi",
            "set strimzi.name to the Kafka resource (kafka.strimzi.io) of this cluster",
        )
    if reader.problems:
        raise SpecInvalid(tuple(reader.problems))
    return BrokerDelayPolicy(mode, delay, cap, strimzi)
