"""One Kubernetes cluster for the whole test session: the real control plane and the lab kubelet.

Started the first time a test asks for it (a few seconds once the control plane is built), with
the project's CRDs installed. Tests share it with a namespace of their own each (`fresh_namespace`),
as tests share the session's Kafka broker with a group and topic of their own. Tests that stop
or restart parts of a cluster start their own (`ControlPlane` and `LabCluster` directly).
Everything stops when the session's process exits.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

from rebalancer.clients.kubernetes_api import KubernetesApi, connect
from rebalancer_lab.cluster import LabCluster
from rebalancer_lab.controlplane import ControlPlane
from rebalancer_lab.crd_install import install_crds


@dataclass
class SharedCluster:
    plane: ControlPlane
    kubelet: LabCluster
    state_dir: Path

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def api_client(self) -> client.ApiClient:
        configuration = client.Configuration()
        config.load_kube_config(str(self.kubeconfig), client_configuration=configuration)
        return client.ApiClient(configuration)

    def kube(self) -> KubernetesApi:
        return connect(self.kubeconfig)

    def pod_logs(self) -> Path:
        """Where the kubelet keeps each pod's container logs (`<ns>_<pod>_<uid>/<container>`)."""
        return self.state_dir / "kubelet" / "logs" / "pods"

    def stop(self) -> None:
        self.kubelet.stop()
        self.plane.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)


_lock = threading.Lock()
_cluster: SharedCluster | None = None


def shared_cluster() -> SharedCluster:
    global _cluster
    with _lock:
        if _cluster is None:
            state = Path(tempfile.mkdtemp(prefix="rebalancer-test-cluster-"))
            plane = ControlPlane(state / "control-plane")
            plane.start()
            try:
                node = plane.node_credentials()
                kubelet = LabCluster(
                    node.kubeconfig,
                    state / "kubelet",
                    service_account_tokens=True,
                    backoff_base=0.5,
                    backoff_max=5.0,
                    stop_grace=3.0,
                )
                kubelet.start()
            except BaseException:
                plane.stop()
                raise
            cluster = SharedCluster(plane, kubelet, state)
            _install_crds(cluster)
            atexit.register(cluster.stop)
            _cluster = cluster
        return _cluster


def _install_crds(cluster: SharedCluster) -> None:
    api_client = cluster.api_client()
    try:
        install_crds(api_client)
    finally:
        api_client.close()


def fresh_namespace(kube: KubernetesApi, prefix: str = "t") -> str:
    """A new namespace for one test; names are never reused, so nothing waits for deletions."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kube.core.create_namespace({"metadata": {"name": name}})
    # The ServiceAccount controller creates `default` shortly after; pods need it.
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.core.read_namespaced_service_account("default", name)
            return name
        except client.ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
