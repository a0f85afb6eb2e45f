"""One lab (broker, control plane, kubelet, operator) shared by the end-to-end tests of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.operator.e2e.support import running_lab

from rebalancer_lab.running import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        prometheus=True,
        consumers=2,
        partitions=6,
        start_spread_seconds=0.2,
    ) as running:
        yield running
