"""How long a broker gathers joins into one generation: the planner's batch window."""

from __future__ import annotations

from rebalancer.simulation.scenarios import ConsumerSettings, CoordinatorSettings
from rebalancer.structs.brokers import BrokerProfile


def join_window(
    settings: CoordinatorSettings,
    profile: BrokerProfile,
    consumer: ConsumerSettings | None = None,
) -> float:
    """Seconds after an empty group's first JoinGroup within which later joins share its generation.

    Apache Kafka and Redpanda: group.initial.rebalance.delay.ms. Joins inside it always land in the
    first generation; a join inside it also buys one more delay (up to the rebalance timeout, for a
    brand-new group), so a steady trickle can stretch it, but only this much is guaranteed.
    Zero means every join on its own.
    A group that is already Stable has no such window: each batch of joins costs a rebalance, and
    joins land together only while the existing members take up to heartbeat.interval.ms to rejoin.
    """
    del profile, consumer  # the same on every supported broker; kept for callers' clarity
    return settings.initial_rebalance_delay_ms / 1000.0
