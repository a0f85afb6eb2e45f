"""The numbered producer keeps its rate: the no-message-lost tests rely on it writing while
rollouts run, not flooding the topic in the first second."""

from __future__ import annotations

import time

import pytest
from tests.kafka_brokers import shared_broker

from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import NumberedProducer

pytestmark = pytest.mark.e2e


@pytest.fixture
def broker() -> KafkaBroker:
    return shared_broker()


def test_the_producer_writes_at_its_rate(broker: KafkaBroker) -> None:
    producer = NumberedProducer(broker.bootstrap, "paced")
    started = time.monotonic()
    producer.run(rate=50, count=40)
    took = time.monotonic() - started
    assert producer.delivered == 40
    # 40 messages at 50/s take 0.78 s at least; unpaced they took about 0.1 s.
    assert took >= 0.75, f"40 messages at 50/s took {took:.2f} s"
