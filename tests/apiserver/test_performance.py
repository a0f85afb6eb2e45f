"""Cost per request stays flat with history and object count; memory stays bounded."""

from __future__ import annotations

import statistics
import time

import pytest
import requests
from tests.apiserver.support import GROUP, PLURAL, widget

from rebalancer.lab.apiserver import ApiServerThread

pytestmark = pytest.mark.usefixtures("crd")


def test_a_thousand_custom_resources_and_their_status_writes(api: ApiServerThread) -> None:
    session = requests.Session()
    base = f"{api.url}/apis/{GROUP}/v1/namespaces/default/{PLURAL}"
    merge = {"Content-Type": "application/merge-patch+json"}

    def timed_batch(start: int, count: int) -> float:
        """Median seconds per create plus status write: robust to a noisy machine."""
        spent = []
        for i in range(start, start + count):
            began = time.perf_counter()
            assert session.post(base, json=widget(f"w{i}"), timeout=5).status_code == 201
            status = {
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            }
            answer = session.patch(f"{base}/w{i}/status", json=status, headers=merge, timeout=5)
            assert answer.status_code == 200
            spent.append(time.perf_counter() - began)
        return statistics.median(spent)

    early = timed_batch(0, 100)
    timed_batch(100, 800)
    late = timed_batch(900, 100)
    assert late < early * 3 + 0.002, (early, late)
    assert early < 0.05, early

    began = time.perf_counter()
    listed = session.get(base, timeout=10).json()
    assert len(listed["items"]) == 1000
    assert time.perf_counter() - began < 1.0


def test_history_and_subscribers_stay_bounded() -> None:
    with ApiServerThread(history_limit=50) as small:
        session = requests.Session()
        url = f"{small.url}/api/v1/namespaces/default/configmaps"
        for i in range(200):
            session.post(
                url, json={"metadata": {"generateName": "c-"}, "data": {"i": str(i)}}, timeout=5
            )
        store = small.server.cluster.store
        assert all(len(h) <= 50 for h in store._history.values())
        assert store.subscriptions() == []
