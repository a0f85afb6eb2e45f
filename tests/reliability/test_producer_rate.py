"""The numbered producer keeps its rate: the no-message-lost tests rely on it writing while
rollouts run, not flooding the topic in the first second."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebalancer.lab.broker import TansuBroker
from rebalancer.lab.producer import NumberedProducer

pytestmark = pytest.mark.e2e


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    running = TansuBroker(host="127.0.0.1", port=0, log_dir=tmp_path)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_the_producer_writes_at_its_rate(broker: TansuBroker) -> None:
    producer = NumberedProducer(broker.bootstrap, "paced")
    started = time.monotonic()
    producer.run(rate=50, count=40)
    took = time.monotonic() - started
    assert producer.delivered == 40
    # 40 messages at 50/s take 0.78 s at least; unpaced they took about 0.1 s.
    assert took >= 0.75, f"40 messages at 50/s took {took:.2f} s"
