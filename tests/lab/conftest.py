"""A fresh API emulator and lab cluster (kubelet and controllers) per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rebalancer.lab.apiserver import ApiServerThread
from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.kube.requesting import Api


@pytest.fixture
def apiserver() -> Iterator[ApiServerThread]:
    with ApiServerThread(host="127.0.0.1", port=0, bookmark_interval=0.5) as server:
        yield server


@pytest.fixture
def api(apiserver: ApiServerThread) -> Iterator[Api]:
    client = Api.connect(apiserver.url)
    yield client
    client.close()


MakeCluster = Callable[..., LabCluster]


@pytest.fixture
def make_cluster(apiserver: ApiServerThread, tmp_path: Path) -> Iterator[MakeCluster]:
    """Build a started LabCluster with test-friendly timings; stopped after the test."""
    started: list[LabCluster] = []

    def make(**options: Any) -> LabCluster:
        settings: dict[str, Any] = {
            "resync_seconds": 1.0,
            "backoff_base": 0.2,
            "backoff_max": 1.0,
            "stop_grace": 3.0,
            **options,
        }
        cluster = LabCluster(apiserver.url, tmp_path / "state", **settings)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> LabCluster:
    return make_cluster()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"
