"""`Lab.start(pods=True)`: the example fleet runs as the StatefulSet's pods, and its consumers
form the group the operator observes."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.lab.support import alive, pid_of, wait_for
from tests.operator.e2e.support import free_port

from rebalancer_lab.kube.requesting import Api
from rebalancer_lab.running import Lab, LabConfig

pytestmark = pytest.mark.e2e


def test_the_example_fleet_runs_as_pods(tmp_path: Path) -> None:
    config = LabConfig(
        state_dir=tmp_path,
        broker_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
        consumers=2,
        partitions=4,
    )
    lab = Lab(config)
    try:
        lab.start(pods=True, jitter="uniform(0,1)")
        assert not lab.consumers, "the pods are the consumers"
        assert lab.kubeconfig is not None
        api = Api.connect(lab.kubeconfig)
        group = "/apis/rebalancer.dev/v1alpha1/namespaces/default/consumergroups/orders"

        def stable() -> dict[str, object] | None:
            found = api.get(group) or {}
            observed = (found.get("status") or {}).get("group") or {}
            return (
                observed
                if observed.get("state") == "Stable" and observed.get("members") == 2
                else None
            )

        wait_for(stable, timeout=60, what="the group Stable with both pods as members")
        pods = api.list("/api/v1/namespaces/default/pods")["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == [
            "orders-consumer-0",
            "orders-consumer-1",
        ]
        assert all(p["status"]["phase"] == "Running" for p in pods)
        pids = [pid_of(p["status"]["containerStatuses"][0]) for p in pods]
        api.close()
    finally:
        lab.stop()
    assert not [pid for pid in pids if alive(pid)], "a consumer outlived the lab"
