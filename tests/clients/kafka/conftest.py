"""The session's Apache Kafka broker, and real consumer processes on demand.

Every test uses a fresh group id. An Empty classic group waits group.initial.rebalance.delay.ms
(3 s) after its first JoinGroup, one more step for each join meanwhile, so a first join completes
in about 3 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_support import Fleet
from tests.kafka_brokers import shared_broker

from rebalancer_lab.broker import KafkaBroker


@pytest.fixture(scope="session")
def kafka() -> KafkaBroker:
    return shared_broker()


@pytest.fixture(scope="session")
def bootstrap(kafka: KafkaBroker) -> str:
    return kafka.bootstrap


@pytest.fixture
def fleet(bootstrap: str, tmp_path: Path) -> Iterator[Fleet]:
    consumers = Fleet(bootstrap, tmp_path)
    try:
        yield consumers
    finally:
        consumers.kill_all()
