"""The settings' Kafka calls against Tansu, which describes no configs and keeps none: limits
fall back to Kafka's defaults and every accepted change is reported as not verifiable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import fresh

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.clients.kafka_configuring import (
    alter_broker_config,
    alter_group_configs,
    broker_ids,
    describe_broker_configs,
    read_broker_limits,
)
from rebalancer.structs.broker_configs import ApplyState, BrokerLimits, LimitSource


@pytest.fixture
def gateway(bootstrap: str) -> Iterator[AdminGateway]:
    admin = AdminGateway(build_client_config([bootstrap], None))
    yield admin
    admin.close()


async def test_tansu_reports_no_broker_configs_so_the_limits_are_kafkas_defaults(
    gateway: AdminGateway,
) -> None:
    assert await broker_ids(gateway) == [111]
    assert await describe_broker_configs(gateway) == {}
    limits = await read_broker_limits(gateway)
    assert limits == BrokerLimits()
    assert limits.source is LimitSource.DEFAULT
    assert "Kafka's default" in limits.describe_source()


async def test_group_configs_on_tansu_are_accepted_not_verifiable(gateway: AdminGateway) -> None:
    group = fresh("settings")
    outcome = await alter_group_configs(
        gateway,
        group,
        {"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000"},
    )
    assert outcome.state is ApplyState.UNVERIFIABLE
    assert "accepted consumer.heartbeat.interval.ms=5000, consumer.session.timeout.ms=45000" in (
        outcome.message
    )
    assert (await alter_group_configs(gateway, group, {})).state is ApplyState.NOT_NEEDED


async def test_a_live_broker_delay_on_tansu_is_accepted_not_verifiable(
    gateway: AdminGateway,
) -> None:
    outcome = await alter_broker_config(gateway, "group_initial_rebalance_delay", "8000")
    assert outcome.state is ApplyState.UNVERIFIABLE
    assert "1 broker(s)" in outcome.message
