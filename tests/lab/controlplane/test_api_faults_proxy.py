"""The fault proxy (rebalancer_lab.api_faults) passes requests on unchanged: the operator's
permission check through it finds the workloads followable, as it does against kube-apiserver
directly.

The Kubernetes client sends its SelfSubjectAccessReviews without a Content-Type; aiohttp used
to label such a body application/octet-stream on the way, kube-apiserver refused it with 415,
and an operator behind the proxy (bench/scale.py) followed no workload and read each one with
a GET at every look."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rebalancer.clients.kubernetes_api import connect
from rebalancer.clients.permissions import followable_workloads
from rebalancer_lab.api_faults import FaultyApi
from rebalancer_lab.controlplane import ControlPlane


def test_the_permission_check_through_the_proxy_finds_the_workloads_followable(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    with FaultyApi(control_plane) as proxy:
        kube = connect(proxy.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            plurals, denied = asyncio.run(followable_workloads(kube, ()))
        finally:
            kube.close()
    assert sorted(plurals) == ["deployments", "statefulsets"]
    assert denied == []
