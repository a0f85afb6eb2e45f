"""The settings' Kafka calls against Apache Kafka: the broker reports its configs, per-group
KIP-848 configs are applied and read back, and the static initial delay is refused as it is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import fresh

from rebalancer.clients.broker_configs import (
    alter_broker_config,
    alter_group_configs,
    broker_ids,
    describe_broker_configs,
    read_broker_limits,
)
from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.structs.broker_configs import ApplyState, LimitSource


@pytest.fixture
def gateway(bootstrap: str) -> Iterator[AdminGateway]:
    admin = AdminGateway(build_client_config([bootstrap], None))
    yield admin
    admin.close()


async def test_kafka_reports_its_configs_and_the_limits_come_from_it(
    gateway: AdminGateway,
) -> None:
    assert await broker_ids(gateway) == [1]
    configs = await describe_broker_configs(gateway)
    assert configs["group.initial.rebalance.delay.ms"] == "3000"
    limits = await read_broker_limits(gateway)
    assert limits.source is LimitSource.BROKER
    # Written into server.properties: static, read-only on Apache Kafka.
    assert limits.initial_rebalance_delay_ms == 3000
    assert limits.initial_rebalance_delay_source == "static-broker-config"
    # Kafka 4's own defaults, now as the broker states them.
    assert (limits.min_session_ms, limits.max_session_ms) == (6000, 1800000)
    assert "Kafka's default" not in limits.describe_source()


async def test_group_configs_are_applied_and_read_back(gateway: AdminGateway) -> None:
    group = fresh("settings")
    outcome = await alter_group_configs(
        gateway,
        group,
        {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"},
    )
    assert outcome.state is ApplyState.APPLIED, outcome
    assert "consumer.heartbeat.interval.ms=6000, consumer.session.timeout.ms=50000" in (
        outcome.message
    )
    assert (await alter_group_configs(gateway, group, {})).state is ApplyState.NOT_NEEDED


async def test_a_group_config_kafka_does_not_know_is_refused_with_its_words(
    gateway: AdminGateway,
) -> None:
    outcome = await alter_group_configs(
        gateway, fresh("settings"), {"consumer.initial.rebalance.delay.ms": "1000"}
    )
    assert outcome.state is ApplyState.FAILED
    assert "Unknown group config name: consumer.initial.rebalance.delay.ms" in outcome.message


async def test_the_static_initial_delay_cannot_be_altered_on_apache_kafka(
    gateway: AdminGateway,
) -> None:
    outcome = await alter_broker_config(gateway, "group.initial.rebalance.delay.ms", "8000")
    assert outcome.state is ApplyState.FAILED
    assert "Cannot update these configs dynamically" in outcome.message
    configs = await describe_broker_configs(gateway)
    assert configs["group.initial.rebalance.delay.ms"] == "3000"
