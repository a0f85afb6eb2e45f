"""The lab kubelet's Node: registered, kept Ready, and its Lease renewed, as a kubelet does.

On a real control plane the scheduler only binds pods to a Node that exists, is Ready and has room,
and the node lifecycle controller taints a Node whose Lease (`kube-node-lease/<node>`) is not
renewed within its grace period (50 s) and then evicts its pods. So the lab's kubelet registers
its Node with the machine's capacity, renews the Lease every 10 s (the kubelet's default) and
re-posts the Ready condition every minute (the kubelet posts it every 5 minutes when nothing
changed; a minute keeps `kubectl get nodes` fresh).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import threading
import time
from datetime import UTC, datetime
from typing import Any

from ..kube.requesting import Api, ApiUnreachable, RequestFailed, resource_path

logger = logging.getLogger(__name__)

Body = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASE_SECONDS = 40
RENEW_EVERY_S = 10.0
STATUS_EVERY_S = 60.0
# A kubelet's default --max-pods.
MAX_PODS = 110
RUNTIME = "rebalancer-lab://1"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _memory_bytes() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 8 * 1024**3


def _architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def node_status(name: str, since: str, address: str = "127.0.0.1") -> Body:
    """What this kubelet reports of its node: capacity, Ready (since `since`), addresses."""
    capacity = {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{_memory_bytes() // 1024}Ki",
        "pods": str(MAX_PODS),
        "ephemeral-storage": "100Gi",
    }
    now = _time()

    def condition(kind: str, status: str, reason: str, message: str) -> Body:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }

    return {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "enough memory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "enough PIDs"),
            condition("Ready", "True", "KubeletReady", "the lab kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": address},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
        "nodeInfo": {
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kernelVersion": platform.release(),
            "osImage": f"{platform.system()} (rebalancer lab, pods are local processes)",
            "containerRuntimeVersion": RUNTIME,
            "kubeletVersion": "v1.37.2-lab",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": _architecture(),
        },
    }


class NodeAgent:
    """Registers `node_name` and keeps it alive until `stop()`."""

    def __init__(
        self,
        api: Api,
        node_name: str,
        *,
        renew_every: float = RENEW_EVERY_S,
        status_every: float = STATUS_EVERY_S,
    ) -> None:
        self.api = api
        self.name = node_name
        self.renew_every = renew_every
        self.status_every = status_every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._node_uid: str | None = None
        self._since = _time()

    def start(self) -> None:
        """Register the node (raises if the API refuses it), then keep it alive in a thread."""
        self.register()
        self.renew_lease()
        self._thread = threading.Thread(target=self._loop, name=f"node-{self.name}", daemon=True)
        self._thread.start()

    def wait_schedulable(self, timeout: float = 30.0) -> bool:
        """Wait for the node lifecycle controller to lift the `not-ready` taint every new Node
        gets, after which the scheduler binds pods here."""
        path = resource_path("v1", "nodes", name=self.name)
        deadline = time.monotonic() + timeout
        while True:
            node = self.api.get(path) or {}
            taints = (node.get("spec") or {}).get("taints") or ()
            if node and not any(t.get("key") == NOT_READY_TAINT for t in taints):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def register(self) -> None:
        path = resource_path("v1", "nodes", name=self.name)
        body: Body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": _architecture(),
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": _architecture(),
                },
            },
            "spec": {},
            "status": node_status(self.name, self._since),
        }
        try:
            created = self.api.create(resource_path("v1", "nodes"), body)
        except RequestFailed as exc:
            if exc.status != 409:
                raise
            created = self.api.get(path) or {}
        self._node_uid = str((created.get("metadata") or {}).get("uid") or "") or None
        self.post_status()

    def post_status(self) -> None:
        path = resource_path("v1", "nodes", name=self.name, subresource="status")
        self.api.patch(path, {"status": node_status(self.name, self._since)})

    def renew_lease(self) -> None:
        path = resource_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE, self.name)
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _micro_time(),
        }
        try:
            self.api.patch(path, {"spec": spec})
        except RequestFailed as exc:
            if exc.status != 404:
                raise
            metadata: Body = {"name": self.name, "namespace": LEASE_NAMESPACE}
            if self._node_uid:
                # As a kubelet does: the Lease goes with its Node.
                metadata["ownerReferences"] = [
                    {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": self._node_uid}
                ]
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
            self.api.create(
                resource_path("coordination.k8s.io/v1", "leases", LEASE_NAMESPACE),
                {**lease, "metadata": metadata, "spec": spec},
            )

    def _loop(self) -> None:
        since_status = 0.0
        while not self._stop.wait(self.renew_every):
            since_status += self.renew_every
            try:
                self.renew_lease()
                if since_status >= self.status_every:
                    since_status = 0.0
                    self.post_status()
            except (RequestFailed, ApiUnreachable, OSError) as exc:
                # The API restarting: the next renewal tries again, well within the grace period.
                logger.warning("node %s: renewing its lease failed: %s", self.name, exc)
