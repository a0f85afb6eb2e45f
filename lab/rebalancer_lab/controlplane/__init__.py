"""A real Kubernetes control plane for the lab and the tests, built from Kubernetes' Go modules.

`ensure_control_plane()` builds (once) the `kube-lab` binary of `lab/controlplane/`;
`ControlPlane` runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler from it.
"""

from rebalancer_lab.controlplane.building import ControlPlaneBuildError, ensure_control_plane
from rebalancer_lab.controlplane.running import ControlPlane, ControlPlaneError, NodeCredentials

__all__ = [
    "ControlPlane",
    "ControlPlaneBuildError",
    "ControlPlaneError",
    "NodeCredentials",
    "ensure_control_plane",
]
