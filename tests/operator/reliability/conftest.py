"""Fixtures of the reliability tests.

`lab`: one lab (Apache Kafka, Kubernetes' own control plane, the operator) for the lab tests of
a module; no Prometheus. The lab starts a broker of its own: some of these tests stop it.
`cluster`, `kube`, `ns`: the session's cluster and a namespace per test, for tests that need an
API server and no lab."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
from tests.operator.e2e.support import running_lab

from rebalancer_lab.running import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        own_broker=True,
        consumers=2,
        partitions=4,
        start_spread_seconds=0.2,
        session_timeout_ms=6000,
    ) as running:
        yield running
