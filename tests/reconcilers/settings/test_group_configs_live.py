"""spec.policy.groupConfigs on the session's Apache Kafka broker: per-group configs set live on
the GROUP config resource, read back with DescribeConfigs, refused with the field and the fix
when outside the broker's bounds. The lab broker keeps Kafka's default bounds
(group.consumer.min/max.session.timeout.ms 45000/60000, group.streams.max.standby.replicas 2)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from rebalancer.clients.broker_configs import set_group_configs
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kafka_errors import KafkaRequestFailed
from rebalancer.reconcilers.group_configs import reconcile_group_configs
from rebalancer.reconcilers.settings import with_group_configs
from rebalancer.reconcilers.settings_delivery import SettingsOutcome
from rebalancer.structs.group_configs_spec import (
    ConsumerGroupConfigsSpec,
    GroupConfigsSpec,
    StreamsGroupConfigsSpec,
)
from rebalancer.structs.specs import parse_spec
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def described(broker: KafkaBroker, group_id: str) -> dict[str, tuple[str, ConfigSource]]:
    """The group's configs as a separate admin client reads them: name -> (value, source)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group_id)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: (entry.value, ConfigSource(entry.source)) for name, entry in entries.items()}


def kip848_member_count(broker: KafkaBroker, group_id: str) -> tuple[str, int]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = admin.describe_consumer_groups([group_id])[group_id].result(timeout=30)
    return group.type.name, len(group.members)


@pytest.fixture
async def kip848_group(broker: KafkaBroker) -> Any:
    """A live KIP-848 group: one consumer (group.protocol=consumer) that owns its partitions."""
    topic, group_id = fresh("group-configs"), fresh("group-configs")
    await ensure_topic(broker.bootstrap, topic, 2)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group_id,
            "group.protocol": "consumer",
            "log_level": "0",
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the KIP-848 consumer got no partitions within 60 s"
    yield group_id, consumer
    consumer.close()


async def test_a_kip848_session_timeout_is_set_live_and_read_back(
    gateway: AdminGateway, broker: KafkaBroker, kip848_group: Any
) -> None:
    group_id, consumer = kip848_group
    before = described(broker, group_id)
    assert before["consumer.session.timeout.ms"] == ("45000", ConfigSource.DEFAULT_CONFIG)
    spec = GroupConfigsSpec(
        consumer=ConsumerGroupConfigsSpec(
            sessionTimeoutMs=52000, heartbeatIntervalMs=6000, assignmentIntervalMs=2000
        )
    )
    outcome = await reconcile_group_configs(gateway, group_id, spec, {})
    assert outcome.status["state"] == "applied", outcome.status
    assert outcome.status["configs"]["consumer.session.timeout.ms"] == {
        "value": "52000",
        "source": "group-config",
    }
    assert [(n.warning, n.reason) for n in outcome.notices] == [(False, "GroupConfigsApplied")]
    assert "consumer.session.timeout.ms was 45000" in outcome.notices[0].message
    after = described(broker, group_id)
    assert after["consumer.session.timeout.ms"] == ("52000", ConfigSource.GROUP_CONFIG)
    assert after["consumer.heartbeat.interval.ms"] == ("6000", ConfigSource.GROUP_CONFIG)
    # KIP-1263 (4.3+): the least time between two target assignments, per group.
    assert after["consumer.assignment.interval.ms"] == ("2000", ConfigSource.GROUP_CONFIG)
    # No broker restart, no new group: the same member still holds its partitions.
    consumer.poll(0.5)
    assert consumer.assignment()
    assert kip848_member_count(broker, group_id) == ("CONSUMER", 1)
    # Level-based: a second reconcile finds nothing to change and says nothing.
    again = await reconcile_group_configs(gateway, group_id, spec, outcome.status)
    assert again.status == outcome.status and again.notices == ()


async def test_a_session_timeout_outside_the_broker_bounds_is_refused_before_sending(
    gateway: AdminGateway, broker: KafkaBroker, kip848_group: Any
) -> None:
    group_id, _ = kip848_group
    spec = GroupConfigsSpec(consumer=ConsumerGroupConfigsSpec(sessionTimeoutMs=10000))
    outcome = await reconcile_group_configs(gateway, group_id, spec, {})
    message = outcome.status["message"]
    assert outcome.status["state"] == "refused"
    assert message.startswith("spec.policy.groupConfigs.consumer.sessionTimeoutMs (10000)")
    assert "45000 to 60000" in message and "group.consumer.min.session.timeout.ms" in message
    assert "fix: set a value from 45000 to 60000" in message
    assert [(n.warning, n.reason) for n in outcome.notices] == [(True, "GroupConfigsRefused")]
    # Nothing was sent: the group keeps the broker's default.
    assert described(broker, group_id)["consumer.session.timeout.ms"][0] == "45000"
    # Said once: the status keeps saying it.
    again = await reconcile_group_configs(gateway, group_id, spec, outcome.status)
    assert again.notices == ()


async def test_the_broker_refuses_an_out_of_range_value_naming_its_range(
    gateway: AdminGateway,
) -> None:
    """What a broker whose bounds the operator could not read answers: the status relays it."""
    with pytest.raises(KafkaRequestFailed, match="must be in the range 45000 to 60000"):
        await set_group_configs(gateway, fresh("refused"), {"consumer.session.timeout.ms": "70000"})


async def test_a_streams_group_gets_its_own_initial_rebalance_delay(
    gateway: AdminGateway, broker: KafkaBroker
) -> None:
    # The GROUP resource exists apart from the group: the delay is in place before the first
    # member of the streams application joins.
    group_id = fresh("streams-app")
    spec = GroupConfigsSpec(
        streams=StreamsGroupConfigsSpec(initialRebalanceDelayMs=7000, numStandbyReplicas=1)
    )
    outcome = await reconcile_group_configs(gateway, group_id, spec, {})
    assert outcome.status["state"] == "applied", outcome.status
    after = described(broker, group_id)
    assert after["streams.initial.rebalance.delay.ms"] == ("7000", ConfigSource.GROUP_CONFIG)
    assert after["streams.num.standby.replicas"] == ("1", ConfigSource.GROUP_CONFIG)
    # Other groups keep the broker's default delay.
    assert described(broker, fresh("other"))["streams.initial.rebalance.delay.ms"][0] == "3000"


async def test_a_delay_equal_to_the_broker_default_becomes_the_groups_own(
    gateway: AdminGateway, broker: KafkaBroker
) -> None:
    # The broker already reads 3000 for the group, as its default: the spec's 3000 is set on
    # the group all the same, so a later change of the default leaves this group's delay.
    group_id = fresh("streams-app")
    assert described(broker, group_id)["streams.initial.rebalance.delay.ms"] == (
        "3000",
        ConfigSource.DEFAULT_CONFIG,
    )
    spec = GroupConfigsSpec(streams=StreamsGroupConfigsSpec(initialRebalanceDelayMs=3000))
    outcome = await reconcile_group_configs(gateway, group_id, spec, {})
    assert outcome.status["configs"]["streams.initial.rebalance.delay.ms"] == {
        "value": "3000",
        "source": "group-config",
    }, outcome.status
    assert described(broker, group_id)["streams.initial.rebalance.delay.ms"] == (
        "3000",
        ConfigSource.GROUP_CONFIG,
    )
    again = await reconcile_group_configs(gateway, group_id, spec, outcome.status)
    assert again.notices == (), "a group holding its own value is not altered again"


async def test_too_many_standby_replicas_are_refused_naming_the_broker_cap(
    gateway: AdminGateway,
) -> None:
    spec = GroupConfigsSpec(streams=StreamsGroupConfigsSpec(numStandbyReplicas=5))
    outcome = await reconcile_group_configs(gateway, fresh("streams-app"), spec, {})
    assert outcome.status["state"] == "refused"
    assert "spec.policy.groupConfigs.streams.numStandbyReplicas" in outcome.status["message"]
    assert "group.streams.max.standby.replicas (2)" in outcome.status["message"]


async def test_the_spec_field_reaches_status_settings(
    gateway: AdminGateway, broker: KafkaBroker
) -> None:
    group_id = fresh("from-spec")
    spec = parse_spec(
        {
            "groupId": group_id,
            "kafka": {"bootstrapServers": [broker.bootstrap]},
            "subscription": {"topics": ["orders"]},
            "workload": {"kind": "StatefulSet", "name": "orders"},
            "policy": {"groupConfigs": {"streams": {"initialRebalanceDelayMs": 9000}}},
        }
    )
    outcome = await with_group_configs(gateway, spec, {}, SettingsOutcome(None))
    assert outcome.status is not None
    live = outcome.status["perGroupConfigs"]
    assert live["configs"] == {
        "streams.initial.rebalance.delay.ms": {"value": "9000", "source": "group-config"}
    }
