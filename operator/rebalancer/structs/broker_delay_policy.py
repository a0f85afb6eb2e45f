"""`spec.policy.brokerDelay` as the planner reads it: what the group wants for the cluster-wide
`group.initial.rebalance.delay.ms` and how the operator may get it (recommend, a Strimzi `Kafka`
resource, or IncrementalAlterConfigs). Absent unless asked.

The block is defined, validated and described once, by the model
(consumer_group_spec.BrokerDelaySpec, from which the CRD is rendered); every problem names its
field and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.structs.consumer_group_spec import BrokerDelaySpec, DelayMode
from rebalancer.structs.spec_models import read_spec

__all__ = [
    "DELAY_PATH",
    "BrokerDelayPolicy",
    "DelayMode",
    "StrimziRef",
    "broker_delay_policy_of",
    "parse_broker_delay_policy",
]

DELAY_PATH = "spec.policy.brokerDelay"


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
    return broker_delay_policy_of(read_spec(BrokerDelaySpec, raw, path))


def broker_delay_policy_of(spec: BrokerDelaySpec) -> BrokerDelayPolicy:
    """The BrokerDelayPolicy of a validated block."""
    strimzi = (
        None if spec.strimzi is None else StrimziRef(spec.strimzi.name, spec.strimzi.namespace)
    )
    return BrokerDelayPolicy(spec.mode, spec.delay_ms, spec.max_delay_ms, strimzi)
