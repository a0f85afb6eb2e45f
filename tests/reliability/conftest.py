"""One lab (broker, API emulator, operator) for the lab tests of a module; no Prometheus."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.e2e.support import free_port

from rebalancer.lab.running import Lab, LabConfig


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("lab"),
        broker_port=free_port(),
        api_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
        consumers=2,
        partitions=4,
        start_spread_seconds=0.2,
        session_timeout_ms=6000,
    )
    running = Lab(config)
    try:
        running.start(fleet=False)
        yield running
    finally:
        running.stop()
