"""Fixtures for the settings tests: the session's cluster with a namespace per test, and the
session's Kafka broker with an admin gateway to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
from tests.kafka_brokers import shared_broker

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer_lab.broker import KafkaBroker


@pytest.fixture(scope="session")
def broker() -> KafkaBroker:
    return shared_broker()


@pytest.fixture
def gateway(broker: KafkaBroker) -> Iterator[AdminGateway]:
    admin = AdminGateway(build_client_config([broker.bootstrap], None))
    yield admin
    admin.close()
