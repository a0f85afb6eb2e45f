"""KAFKA-7126: one new topic, 200 pattern-subscribed consumers, metadata.max.age.ms of 5 minutes."""

from __future__ import annotations

import pytest

from rebalancer.simulation import (
    SimulationResult,
    TopicNotice,
    build_kafka_7126_scenario,
    simulate,
)
from rebalancer.simulation.presets import KAFKA_7126_TOPIC_AT_MS

TOPIC_AT_S = KAFKA_7126_TOPIC_AT_MS / 1000
FIVE_MINUTES_S = 300.0


def after_the_topic(result: SimulationResult) -> list[str]:
    return [
        rebalance.cause
        for rebalance in result.rebalances
        if TOPIC_AT_S <= rebalance.start_s < TOPIC_AT_S + FIVE_MINUTES_S
    ]


@pytest.mark.parametrize("seed", [0, 1])
def test_pre_fix_clients_rebalance_tens_of_times_in_five_minutes(seed: int) -> None:
    result = simulate(build_kafka_7126_scenario("pre-fix", seed=seed))
    causes = after_the_topic(result)
    # The report: 50 rebalances for each of the 200 consumers in 5 minutes. The model gives
    # about 75 with 100 ms JoinGroups and about 50 when members take ~2 s to rejoin (MirrorMaker
    # flushing its producer on revocation): the same order either way.
    assert 20 <= len(causes) <= 150
    assert set(causes) == {"metadata-change"}
    assert all(len(rebalance.members) == 200 for rebalance in result.rebalances)
    # The storm ends once every member has refreshed its metadata.
    assert result.rebalances[-1].end_s < TOPIC_AT_S + FIVE_MINUTES_S + 10


@pytest.mark.parametrize(
    ("notice", "cause"), [("fixed", "metadata-change"), ("enforced", "enforced")]
)
def test_the_client_fix_or_an_enforced_rebalance_costs_exactly_one(
    notice: TopicNotice, cause: str
) -> None:
    result = simulate(build_kafka_7126_scenario(notice, seed=0))
    assert after_the_topic(result) == [cause]
    assert [rebalance.cause for rebalance in result.rebalances] == ["initial-join", cause]


def test_an_enforced_rebalance_starts_when_the_topic_appears() -> None:
    enforced = simulate(build_kafka_7126_scenario("enforced"))
    fixed = simulate(build_kafka_7126_scenario("fixed"))
    # One member's JoinGroup, 100 ms after the topic appears, starts it.
    assert enforced.rebalances[-1].start_s == pytest.approx(TOPIC_AT_S + 0.1)
    # The fixed client waits for a first metadata refresh; the enforced one does not.
    assert fixed.rebalances[-1].start_s > enforced.rebalances[-1].start_s
    assert enforced.stop_the_world_partition_s < fixed.stop_the_world_partition_s
