"""LabCluster: the lab's node on a real control plane: its kubelet registers a Node, keeps its
Lease and runs the pods the scheduler binds to it as local processes.

    with LabCluster(node.kubeconfig, state_dir, jitter="uniform(0,5)") as cluster:
        ...  # pods that kube-scheduler binds to the node now run

It talks to the API only over HTTP, with list+watch and writes through the API (pods and their
status subresource, events), so whoever watches the API (the operator under test, kubectl)
sees what a cluster would show. `stop()` kills every process it started, also when `start()`
fails half-way, and an `atexit` hook does it if the caller forgets.
"""

from __future__ import annotations

import atexit
import copy
import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .kube.informing import Informer
from .kube.recording import EventRecorder
from .kube.requesting import Api, configuration_for
from .kubelet import Jitter, Kubelet, KubeletSettings
from .kubelet.environment import DEFAULT_IMAGES
from .kubelet.node import NodeAgent

logger = logging.getLogger(__name__)


class LabCluster:
    def __init__(
        self,
        kubeconfig: str | Path,
        state_dir: str | Path,
        *,
        jitter: Jitter | str | float | None = None,
        seed: int | None = 0,
        python: str = sys.executable,
        node_name: str = "lab",
        backoff_base: float = 10.0,
        backoff_max: float = 300.0,
        stop_grace: float = 10.0,
        images: Mapping[str, Sequence[str]] | None = None,
        pod_kubeconfig: Path | None = None,
        service_account_tokens: bool = False,
    ) -> None:
        """`kubeconfig`: how the kubelet reaches the API server (the node's own credentials, so
        the Node authorizer checks it as it checks a kubelet). `pod_kubeconfig`: what the pods'
        processes reach the API with (default: `kubeconfig`); `service_account_tokens`: each
        pod gets a token of its own ServiceAccount instead, as on a cluster.

        `jitter` delays each pod's start (see `Jitter.parse`); `backoff_*` are the kubelet's
        container restart back-off (kube's 10 s doubling to 300 s by default); `stop_grace`
        caps the pods' grace period when the cluster stops.
        """
        self.target = Path(kubeconfig)
        self.state_dir = Path(state_dir)
        self.jitter = Jitter.parse(jitter, seed)
        self.python = python
        self.node_name = node_name
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stop_grace = stop_grace
        self.images = dict(DEFAULT_IMAGES if images is None else images)
        self.pod_kubeconfig = pod_kubeconfig
        self.service_account_tokens = service_account_tokens
        self.node: NodeAgent | None = None
        self.api: Api | None = None
        self.pods: Informer | None = None
        self.kubelet: Kubelet | None = None
        self.recorder: EventRecorder | None = None
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> LabCluster:
        with self._lock:
            if self._started:
                return self
            self._started = True
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.api = Api.connect(self.target)
        # Only the pods bound to this node, as a kubelet watches them.
        self.pods = Informer(
            self.api,
            "/api/v1/pods",
            name="pods",
            kind="Pod",
            api_version="v1",
            field_selector=f"spec.nodeName={self.node_name}",
        )
        self.recorder = EventRecorder(self.api)
        self.recorder.start()
        self.node = NodeAgent(self.api, self.node_name)
        self.node.start()
        if not self.node.wait_schedulable():
            logger.warning(
                "node %s is still tainted not-ready: pods stay Pending until the node "
                "lifecycle controller sees it Ready",
                self.node_name,
            )
        settings = KubeletSettings(
            state_dir=self.state_dir,
            node_name=self.node_name,
            python=self.python,
            images=self.images,
            kubeconfig=self.pod_kubeconfig or self.target.resolve(),
            backoff_base=self.backoff_base,
            backoff_max=self.backoff_max,
        )
        if self.service_account_tokens:
            configuration = configuration_for(self.target)
            settings.service_account_server = str(configuration.host)
            settings.service_account_ca = Path(configuration.ssl_ca_cert)
        self.kubelet = Kubelet(self.api, self.pods, settings, self.jitter, self.recorder)
        self.kubelet.start()
        self.pods.start()
        if not self.pods.wait_synced(30):
            raise RuntimeError(f"the pods informer did not sync with {self.url}")
        logger.info(
            "lab node %s on %s: jitter %s", self.node_name, self.url, self.jitter.describe()
        )

    @property
    def url(self) -> str:
        return str(configuration_for(self.target).host)

    def stop(self) -> None:
        """Stop every pod's processes, then the informer, the node and events. Idempotent."""
        with self._lock:
            if not self._started:
                return
            self._started = False
        atexit.unregister(self.stop)
        if self.kubelet is not None:
            try:
                self.kubelet.stop(self.stop_grace)
            except Exception:
                logger.exception("stopping the lab cluster's kubelet failed")
        if self.pods is not None:
            try:
                self.pods.stop()
            except Exception:
                logger.exception("stopping the pods informer failed")
        if self.node is not None:
            self.node.stop()
        if self.recorder is not None:
            self.recorder.stop()
        if self.api is not None:
            self.api.close()

    def __enter__(self) -> LabCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def with_container_env(
    documents: list[dict[str, Any]], env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Copies of the documents whose workloads' containers have `env` set (replacing values)."""
    out: list[dict[str, Any]] = []
    for original in documents:
        doc = copy.deepcopy(original)
        if doc.get("kind") in ("StatefulSet", "Deployment", "ReplicaSet"):
            for container in doc["spec"]["template"]["spec"].get("containers") or ():
                kept = [v for v in container.get("env") or () if v.get("name") not in env]
                container["env"] = [*kept, *({"name": k, "value": v} for k, v in env.items())]
        out.append(doc)
    return out
