"""Fixtures of test folders that talk to the real control plane shared by the session: the
cluster, an admin client of it, and a namespace of the test's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.kube_clusters import SharedCluster, fresh_namespace, shared_cluster

from rebalancer.clients.kubernetes_api import KubernetesApi


@pytest.fixture(scope="session")
def cluster() -> SharedCluster:
    return shared_cluster()


@pytest.fixture
def kube(cluster: SharedCluster) -> Iterator[KubernetesApi]:
    api = cluster.kube()
    yield api
    api.close()


@pytest.fixture
def ns(kube: KubernetesApi) -> str:
    """A namespace of the test's own."""
    return fresh_namespace(kube)
