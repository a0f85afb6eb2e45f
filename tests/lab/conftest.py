"""The lab kubelet on the real control plane: the session's cluster (one control plane, the lab
kubelet as node "lab"), a namespace of each test's own, and kubelets of a test's own.

A test whose kubelet needs options of its own (jitter, a kubelet it stops, a proxy in front of
the API server) starts one with `own_kubelet`: registered as a Node of its own on the session's
control plane, tainted so that the scheduler puts nothing else there, and gone after the test.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cluster_fixtures import cluster, kube, ns  # noqa: F401  (fixtures, found by name)
from tests.kube_clusters import SharedCluster
from tests.lab.support import OWN_NODE_TAINT, Lab

from rebalancer_lab.cluster import LabCluster
from rebalancer_lab.kube.requesting import Api, resource_path

OwnKubelet = Callable[..., Lab]


@pytest.fixture
def api(cluster: SharedCluster) -> Iterator[Api]:  # noqa: F811  (the fixture imported above)
    """The admin's client of the session's API server."""
    client = Api.connect(cluster.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def lab(cluster: SharedCluster, api: Api, ns: str) -> Iterator[Lab]:  # noqa: F811
    """The test's namespace on the session's kubelet (node "lab")."""
    yield Lab(api, ns, cluster.kubelet, cluster.state_dir / "kubelet")
    # Pods left running (crash loops, probes every second) would cost every later test on the
    # shared kubelet; nothing waits for the namespace to go.
    api.delete(resource_path("v1", "namespaces", name=ns))


@pytest.fixture
def own_kubelet(
    cluster: SharedCluster,  # noqa: F811  (the fixture imported above)
    lab: Lab,
    tmp_path: Path,
) -> Iterator[OwnKubelet]:
    """Start a kubelet of the test's own (LabCluster options as keywords) on a Node of its own;
    the `Lab` it returns places the test's pods there."""
    started: list[LabCluster] = []

    def start(kubeconfig: Path | None = None, **options: Any) -> Lab:
        node = f"lab-{uuid.uuid4().hex[:6]}"
        register_tainted_node(lab.api, node)
        settings: dict[str, Any] = {
            "node_name": node,
            "backoff_base": 0.2,
            "backoff_max": 1.0,
            "stop_grace": 3.0,
            **options,
        }
        # The admin's kubeconfig: node credentials exist only for the session's node "lab".
        kubelet = LabCluster(kubeconfig or cluster.kubeconfig, tmp_path / node, **settings)
        started.append(kubelet)
        kubelet.start()
        return Lab(lab.api, lab.namespace, kubelet, tmp_path / node, node=node)

    yield start
    for kubelet in started:
        kubelet.stop()
        lab.api.delete(resource_path("v1", "nodes", name=kubelet.node_name))


def register_tainted_node(api: Api, node: str) -> None:
    """The Node, created before its kubelet registers it (which then finds it), with a taint
    only the test's own pods tolerate: other tests' pods are never scheduled onto it."""
    api.create(
        resource_path("v1", "nodes"),
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
            "spec": {"taints": [{"key": OWN_NODE_TAINT, "value": node, "effect": "NoSchedule"}]},
        },
    )
