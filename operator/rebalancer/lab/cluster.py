"""LabCluster: a one-node cluster's moving parts (kubelet and controller manager) for any API.

    with LabCluster("http://127.0.0.1:8001", state_dir, jitter="uniform(0,5)") as cluster:
        ...  # StatefulSets, Deployments, ReplicaSets and pods applied to the API now run

It talks to the API only over HTTP, with list+watch and writes through the API (pods, status
subresources, ownerReferences), so whoever watches the API (the operator under test, kubectl)
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

import yaml

from .controllers import ControllerManager, Informers
from .kube.recording import EventRecorder
from .kube.requesting import Api, configuration_for
from .kubelet import Jitter, Kubelet, KubeletSettings
from .kubelet.environment import DEFAULT_IMAGES
from .kubelet.node import NodeAgent

logger = logging.getLogger(__name__)


class LabCluster:
    def __init__(
        self,
        api: str | Path | Any,
        state_dir: str | Path,
        *,
        jitter: Jitter | str | float | None = None,
        seed: int | None = 0,
        python: str = sys.executable,
        node_name: str = "lab",
        kubelet: bool = True,
        controllers: bool = True,
        resync_seconds: float = 10.0,
        backoff_base: float = 10.0,
        backoff_max: float = 300.0,
        stop_grace: float = 10.0,
        images: Mapping[str, Sequence[str]] | None = None,
        scheduled: bool = False,
        pod_kubeconfig: Path | None = None,
        service_account_tokens: bool = False,
    ) -> None:
        """`api`: the API server's URL, a kubeconfig path or a kubernetes Configuration.

        `scheduled`: a real control plane runs the controllers and the scheduler; the kubelet
        registers its Node, keeps its Lease and runs only the pods bound to it (pass
        `controllers=False` and the node's own kubeconfig as `api`). `pod_kubeconfig`: what the
        pods' processes reach the API with (default: `api` itself when it is a kubeconfig);
        `service_account_tokens`: each pod gets a token of its own ServiceAccount instead, as on
        a cluster (needs an API server that issues them, and `api` with its CA).

        `jitter` delays each pod's start (see `Jitter.parse`); `backoff_*` are the kubelet's
        container restart back-off (kube's 10 s doubling to 300 s by default); `stop_grace`
        caps the pods' grace period when the cluster stops.
        """
        self.target = api
        self.state_dir = Path(state_dir)
        self.jitter = Jitter.parse(jitter, seed)
        self.python = python
        self.node_name = node_name
        self.run_kubelet = kubelet
        self.run_controllers = controllers
        self.resync_seconds = resync_seconds
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stop_grace = stop_grace
        self.images = dict(DEFAULT_IMAGES if images is None else images)
        self.scheduled = scheduled
        self.pod_kubeconfig = pod_kubeconfig
        self.service_account_tokens = service_account_tokens
        self.node: NodeAgent | None = None
        self.api: Api | None = None
        self.informers: Informers | None = None
        self.kubelet: Kubelet | None = None
        self.controllers: ControllerManager | None = None
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
        self.informers = Informers.create(
            self.api, node_name=self.node_name if self.scheduled else None
        )
        self.recorder = EventRecorder(self.api)
        self.recorder.start()
        if self.run_kubelet and self.scheduled:
            self.node = NodeAgent(self.api, self.node_name)
            self.node.start()
            if not self.node.wait_schedulable():
                logger.warning(
                    "node %s is still tainted not-ready: pods stay Pending until the node "
                    "lifecycle controller sees it Ready",
                    self.node_name,
                )
        if self.run_kubelet:
            settings = KubeletSettings(
                state_dir=self.state_dir,
                node_name=self.node_name,
                python=self.python,
                images=self.images,
                kubeconfig=self._pod_kubeconfig(),
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                scheduled=self.scheduled,
                # A real API server keeps a deleted pod Terminating until its kubelet deletes it
                # with grace 0; only the emulator needs the kubelet's finalizer for that.
                hold_finalizer=not self.scheduled,
            )
            if self.service_account_tokens:
                configuration = configuration_for(self.target)
                settings.service_account_server = str(configuration.host)
                settings.service_account_ca = Path(configuration.ssl_ca_cert)
            self.kubelet = Kubelet(
                self.api, self.informers.pods, settings, self.jitter, self.recorder
            )
            self.kubelet.start()
        if self.run_controllers:
            self.controllers = ControllerManager(
                self.api, self.informers, self.resync_seconds, self.recorder
            )
        for informer in self.informers.all():
            informer.start()
        for informer in self.informers.all():
            if not informer.wait_synced(30):
                raise RuntimeError(f"the {informer.name} informer did not sync with {self.url}")
        if self.controllers is not None:
            self.controllers.start()
        logger.info(
            "lab cluster on %s: kubelet %s, controllers %s, jitter %s",
            self.url,
            "on" if self.kubelet else "off",
            "on" if self.controllers else "off",
            self.jitter.describe(),
        )

    @property
    def url(self) -> str:
        return str(configuration_for(self.target).host)

    def _pod_kubeconfig(self) -> Path:
        """Pods reach the API through a kubeconfig; for a bare URL, the lab writes one."""
        if self.pod_kubeconfig is not None:
            return self.pod_kubeconfig
        target = self.target
        if isinstance(target, Path) or (
            isinstance(target, str) and not target.startswith(("http://", "https://"))
        ):
            return Path(target).resolve()
        path = self.state_dir / "pods-kubeconfig"
        context = "rebalancer-lab"
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "rebalancer-lab"}}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": "default"},
                }
            ],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    def stop(self) -> None:
        """Stop controllers, then every pod's processes, then the informers. Idempotent."""
        with self._lock:
            if not self._started:
                return
            self._started = False
        atexit.unregister(self.stop)
        # Controllers first, so that nothing recreates the pods being stopped.
        if self.controllers is not None:
            try:
                self.controllers.stop()
            except Exception:
                logger.exception("stopping the lab cluster's controllers failed")
        if self.kubelet is not None:
            try:
                self.kubelet.stop(self.stop_grace)
            except Exception:
                logger.exception("stopping the lab cluster's kubelet failed")
        for informer in self.informers.all() if self.informers else ():
            try:
                informer.stop()
            except Exception:
                logger.exception("stopping the %s informer failed", informer.name)
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
