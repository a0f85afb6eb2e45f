"""Fixtures shared by test folders that talk to the operator through the API emulator: a fresh
emulator per test, and the operator's Kubernetes client pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.lab.apiserver import ApiServerThread


@pytest.fixture
def api() -> Iterator[ApiServerThread]:
    with ApiServerThread(host="127.0.0.1", port=0, bookmark_interval=0.3) as server:
        yield server


@pytest.fixture
def kube(api: ApiServerThread) -> Iterator[KubernetesApi]:
    configuration = client.Configuration()
    configuration.host = api.url
    api_client = client.ApiClient(configuration)
    yield KubernetesApi(
        core=client.CoreV1Api(api_client),
        apps=client.AppsV1Api(api_client),
        custom=client.CustomObjectsApi(api_client),
        api_client=api_client,
    )
    api_client.close()
