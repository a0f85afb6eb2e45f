"""Fixtures for the settings tests: a fresh API emulator per test, and a Tansu broker per module
with an admin gateway to it (a module may start its own broker per test instead)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.emulator_fixtures import api, kube  # noqa: F401  (fixtures, found by name)

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.lab.broker import TansuBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu")) as running:
        yield running


@pytest.fixture
def gateway(broker: TansuBroker) -> Iterator[AdminGateway]:
    admin = AdminGateway(build_client_config([broker.bootstrap], None))
    yield admin
    admin.close()
