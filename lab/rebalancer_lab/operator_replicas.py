"""Operator replicas that elect a leader, as the chart's two replicas do: each a
`rebalancer operator --peering` process of the lab, as if in its pod (POD_NAME, POD_NAMESPACE:
its name in the peering, and the pod it labels rebalancer.dev/active for the Services).

    prepare_peering(lab, "rebalancer", ["operator-0", "operator-1"])
    first = PeeringReplica(lab, "first", lab.config.reports_port, "operator-0", "rebalancer")
    first.start()
"""

from __future__ import annotations

import signal
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from kubernetes import client, dynamic
from prometheus_client.parser import text_string_to_metric_families

from rebalancer_lab.processes import ChildProcess, python_module
from rebalancer_lab.running import Lab

Samples = dict[str, list[tuple[dict[str, str], float]]]


def prepare_peering(lab: Lab, peering: str, pods: Sequence[str]) -> None:
    """The ClusterKopfPeering the replicas share, and their pods, held Pending by a scheduling
    gate (the replicas run as processes of the lab, not as these pods)."""
    assert lab.api_client is not None
    dyn = dynamic.DynamicClient(lab.api_client)
    peerings = dyn.resources.get(api_version="kopf.dev/v1", kind="ClusterKopfPeering")
    kind = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering"}
    peerings.create(body={**kind, "metadata": {"name": peering}})
    namespace = lab.config.namespace
    for pod in pods:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace},
            "spec": {
                "schedulingGates": [{"name": "rebalancer.dev/test"}],
                "containers": [{"name": "operator", "image": "rebalancer:test"}],
            },
        }
        client.CoreV1Api(lab.api_client).create_namespaced_pod(namespace, body)


class PeeringReplica:
    """One `rebalancer operator --peering` process and its /metrics."""

    def __init__(
        self,
        lab: Lab,
        label: str,
        reports_port: int,
        pod: str,
        peering: str = "rebalancer",
        kubeconfig: Path | None = None,
    ) -> None:
        """`kubeconfig`: where the replica finds the API server (default: the lab's own; a
        FaultyApi's to meet its faults)."""
        self.port = reports_port
        assert lab.kubeconfig is not None
        state = lab.config.state_dir
        argv = python_module(
            "rebalancer",
            "operator",
            "--kubeconfig",
            str(kubeconfig or lab.kubeconfig),
            "--reports-host",
            lab.config.host,
            "--reports-port",
            str(reports_port),
            "--history-dir",
            str(state / "history"),
            "--status-refresh-seconds",
            "15",
            "--peering",
            peering,
            *lab.config.operator_flags,
        )
        self.label = label
        self.log_path = state / "logs" / f"operator-{label}.log"
        self.pod = pod
        self.namespace = lab.config.namespace
        env = {"POD_NAME": pod, "POD_NAMESPACE": self.namespace}
        self.child = ChildProcess(f"operator-{label}", argv, self.log_path, env=env)
        self.lab = lab
        self.url = f"http://{lab.config.host}:{reports_port}/metrics"

    def start(self) -> PeeringReplica:
        self.child.start()
        return self

    def again(self) -> PeeringReplica:
        """The same command started again, as a container restart does after a crash."""
        self.child.stop(grace=1)
        self.child = ChildProcess(self.child.name, self.child.argv, self.log_path, self.child.env)
        return self.start()

    def exit_code(self) -> int | None:
        """The process's exit code once it has ended; None while it runs (or never started)."""
        process = self.child.process
        return process.poll() if process is not None else None

    @property
    def pid(self) -> int | None:
        process = self.child.process
        return process.pid if process is not None and process.poll() is None else None

    def metrics(self) -> str | None:
        try:
            with urllib.request.urlopen(self.url, timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            return None

    def leader(self) -> float | None:
        """rebalancer_leader on this replica; None while it does not answer."""
        text = self.metrics()
        for line in (text or "").splitlines():
            if line.startswith("rebalancer_leader "):
                return float(line.split()[-1])
        return None

    def samples(self, consumergroup: str) -> Samples:
        """The replica's series of one ConsumerGroup, by sample name."""
        with urllib.request.urlopen(self.url, timeout=5) as response:
            text = response.read().decode()
        found: Samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("consumergroup") == consumergroup:
                    found.setdefault(sample.name, []).append((sample.labels, sample.value))
        return found

    def active(self) -> str | None:
        """The rebalancer.dev/active label of the replica's pod."""
        assert self.lab.api_client is not None
        pod = client.CoreV1Api(self.lab.api_client).read_namespaced_pod(self.pod, self.namespace)
        return (pod.metadata.labels or {}).get("rebalancer.dev/active")

    def kill(self) -> None:
        """SIGKILL, as a node failure: no goodbye in the peering object."""
        process = self.child.process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace") if self.log_path.exists() else ""
