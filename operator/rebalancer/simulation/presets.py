"""Published situations as ready-made scenarios."""

from __future__ import annotations

from rebalancer.simulation.distributions import Staggered
from rebalancer.simulation.scenarios import (
    ConsumerSettings,
    Scenario,
    TopicCreation,
    TopicNotice,
    plan_members,
)

KAFKA_7126_TOPIC_AT_MS = 60_000.0


def build_kafka_7126_scenario(
    notice: TopicNotice = "pre-fix", *, members: int = 200, seed: int = 0
) -> Scenario:
    """KAFKA-7126: pattern-subscribed consumers (MirrorMaker in the report) and one new topic.

    The report: "For a group of 200 MirrorMaker consumers with patten-based topic subscription, a
    single topic creation caused 50 rebalances for each of these consumer over 5 minutes period",
    for a 10-partition topic, because each consumer noticed the topic at its own metadata refresh
    (metadata.max.age.ms, 5 minutes) and rejoined. The group forms first (all members start
    together and join within one initial delay); the topic appears at 60 s. Client settings are
    the 2018 defaults (session 10 s, heartbeat 3 s) with round-robin, MirrorMaker's usual choice.
    Pre-fix, the model gives about 75 rebalances in the 5 minutes with the default 100 ms join
    latency, and about 50 with 2 s (members busy flushing on revocation before they rejoin).
    """
    consumer = ConsumerSettings(
        session_timeout_ms=10_000.0,
        heartbeat_interval_ms=3_000.0,
        max_poll_interval_ms=300_000.0,
        assignor="round-robin",
        metadata_max_age_ms=300_000.0,
    )
    return Scenario(
        members=plan_members(members, consumer=consumer),
        starts=Staggered(0.0),
        consumer=consumer,
        partitions=members,
        topic_creation=TopicCreation(at_ms=KAFKA_7126_TOPIC_AT_MS, partitions=10, notice=notice),
        seed=seed,
    )
