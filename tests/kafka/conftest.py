"""A real Tansu broker for the whole session, and real consumer processes on demand.

Tansu fixes a group's session timeout with the first member that ever joins, and holds each
JoinGroup about half of it: every test uses a fresh group id and session.timeout.ms 6000, so a
join completes in about 3 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_support import Fleet

from rebalancer.lab.broker import TansuBroker


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker(log_dir=tmp_path_factory.mktemp("tansu"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def bootstrap(tansu: TansuBroker) -> str:
    return tansu.bootstrap


@pytest.fixture
def fleet(bootstrap: str, tmp_path: Path) -> Iterator[Fleet]:
    consumers = Fleet(bootstrap, tmp_path)
    try:
        yield consumers
    finally:
        consumers.kill_all()
