"""`rebalancer lab`: Apache Kafka, a Kubernetes control plane, the operator, an example fleet and
a producer on one machine.

The control plane is Kubernetes' own (etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, built from Kubernetes' Go modules, see `rebalancer_lab.controlplane`); the lab's
kubelet registers a Node and runs the pods bound to it as local processes.
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, dynamic

from rebalancer_lab.broker import KafkaBroker, KafkaCluster
from rebalancer_lab.cluster import LabCluster, with_container_env
from rebalancer_lab.controlplane import ControlPlane
from rebalancer_lab.crd_install import install_crds
from rebalancer_lab.manifests import examples, gate_rbac
from rebalancer_lab.processes import ChildProcess, python_module, stop_all
from rebalancer_lab.prometheus import find_prometheus, prometheus_process, wait_ready

logger = logging.getLogger(__name__)
# The ValidatingWebhookConfiguration the lab's operator writes (its webhook is named
# ownership.<this>, a domain of three segments as the API server requires).
ADMISSION_CONFIGURATION = "lab.rebalancer.dev"


@dataclass(frozen=True)
class LabConfig:
    state_dir: Path
    host: str = "127.0.0.1"
    broker_port: int = 9092
    reports_port: int = 8090
    consumers: int = 3
    partitions: int = 12
    topic: str = "orders"
    group_id: str = "orders"
    namespace: str = "default"
    rate: float = 20.0
    start_spread_seconds: float = 2.0
    session_timeout_ms: int = 6000
    # Apache Kafka nodes the lab starts (1 combined node, or 3 for failover), and their
    # group.initial.rebalance.delay.ms: the production default unless a value is under test.
    brokers: int = 1
    initial_rebalance_delay_ms: int = 3000
    # A Kafka cluster that is already running (its bootstrap servers): the lab starts none.
    external_bootstrap: str | None = None
    # None: no Prometheus server even when one is installed.
    prometheus_port: int | None = 9090
    # The operator's admission webhook (refusing a second owner of a group or a workload),
    # served on this port of `host` and registered with the lab's API server; None: off.
    admission_port: int | None = None
    # More flags per control-plane component (ControlPlane's extra_flags), for a lab whose API
    # server must behave in a way under test (`{"kube-apiserver": ("--watch-cache=false",)}`).
    control_plane_flags: Mapping[str, tuple[str, ...]] | None = None
    # More flags for `rebalancer operator` (`("--rollout-resting-poll-seconds", "600")`).
    operator_flags: tuple[str, ...] = ()
    # A second listener of this name on each Kafka node, advertised at ports a proxy in front
    # of it listens on (KafkaCluster's side_listener; rebalancer_lab.tcp_cut): clients given
    # its addresses reach Kafka through the proxy alone.
    side_listener: str | None = None


@dataclass
class Lab:
    config: LabConfig
    broker: KafkaCluster | None = None
    operator: ChildProcess | None = None
    producer: ChildProcess | None = None
    prometheus: ChildProcess | None = None
    consumers: list[ChildProcess] = field(default_factory=list)
    kubeconfig: Path | None = None
    api_client: client.ApiClient | None = None
    cluster: LabCluster | None = None
    plane: ControlPlane | None = None

    @property
    def bootstrap(self) -> str:
        if self.config.external_bootstrap is not None:
            return self.config.external_bootstrap
        assert self.broker is not None
        return self.broker.bootstrap

    @property
    def report_url(self) -> str:
        return f"http://{self.config.host}:{self.config.reports_port}/v1/reports"

    def start(
        self, *, fleet: bool = True, pods: bool = False, jitter: str | float | None = None
    ) -> None:
        """`pods`: run workloads applied to the API as pods (kubelet and controllers), so the
        example fleet runs as the StatefulSet's pods instead of consumers the lab starts;
        `jitter` delays each pod's start (see `rebalancer_lab.kubelet.Jitter`)."""
        state = self.config.state_dir
        state.mkdir(parents=True, exist_ok=True)
        logger.info("state and logs in %s", state)
        self.start_broker()
        self.start_kubernetes()
        assert self.kubeconfig is not None
        self.api_client = _client(self.kubeconfig)
        self.install_crds()
        if pods:
            assert self.plane is not None
            # The kubelet acts as its node (the Node authorizer checks it).
            node = self.plane.node_credentials()
            self.cluster = LabCluster(
                node.kubeconfig,
                state,
                jitter=jitter,
                node_name=node.name,
                service_account_tokens=True,
            )
            # Pods act as their ServiceAccount: the fleet's gets what the chart gives a gated
            # fleet (gate.serviceAccounts).
            self.apply(gate_rbac(self.config.namespace))
            self.cluster.start()
        self.start_operator()
        self.start_prometheus()
        if fleet:
            self.apply_examples()
            self.start_producer()
            if self.cluster is None:
                self.start_consumers()

    def start_operator(self, kubeconfig: Path | None = None) -> None:
        """`rebalancer operator` as its own process, talking to the API server as `kubeconfig`
        says (default: the lab's own, the admin's). Tests that put a proxy between the operator
        and the API server (rebalancer_lab.api_faults) stop the lab's operator and start it
        again with the proxy's kubeconfig."""
        self.operator = self.operator_process(kubeconfig)
        self.operator.start()
        logger.info("operator started (log: %s)", self.operator.log_path)

    def operator_process(
        self,
        kubeconfig: Path | None = None,
        *,
        name: str = "operator",
        reports_port: int | None = None,
        flags: tuple[str, ...] = (),
    ) -> ChildProcess:
        """The lab's `rebalancer operator` command, not started: logging to logs/NAME.log,
        serving reports and /metrics on `reports_port` (default: the lab's), with `flags` after
        the lab's own (they win). More than one of them (`--shards`) share the groups."""
        state = self.config.state_dir
        return ChildProcess(
            name,
            python_module(
                "rebalancer",
                "operator",
                "--kubeconfig",
                str(kubeconfig or self.kubeconfig),
                "--reports-host",
                self.config.host,
                "--reports-port",
                str(reports_port or self.config.reports_port),
                "--history-dir",
                str(state / "history"),
                "--status-refresh-seconds",
                "15",
                *self._admission_flags(),
                *self.config.operator_flags,
                *flags,
            ),
            state / "logs" / f"{name}.log",
        )

    def _admission_flags(self) -> list[str]:
        """The webhook on loopback, where the lab's API server calls it; the operator writes
        the ValidatingWebhookConfiguration itself (the chart installs its own)."""
        port = self.config.admission_port
        if port is None:
            return []
        return [
            "--admission-port",
            str(port),
            "--admission-listen",
            self.config.host,
            "--admission-host",
            self.config.host,
            "--admission-configuration",
            ADMISSION_CONFIGURATION,
        ]

    def start_kubernetes(self) -> None:
        state = self.config.state_dir
        # Each lab starts from an empty cluster, as it starts an empty broker: etcd's data from
        # an earlier lab in the same state directory would hold its objects (the examples it
        # applies again, pods of a node that is gone).
        shutil.rmtree(state / "control-plane", ignore_errors=True)
        self.plane = ControlPlane(
            state / "control-plane",
            self.config.host,
            progress=logger.info,
            extra_flags=self.config.control_plane_flags,
        )
        self.plane.start()
        # One stable path for kubectl, whatever port the API server got this time.
        self.kubeconfig = state / "kubeconfig"
        shutil.copyfile(self.plane.kubeconfig, self.kubeconfig)
        logger.info(
            "Kubernetes control plane at %s (logs in %s); kubeconfig %s",
            self.plane.server,
            self.plane.state_dir,
            self.kubeconfig,
        )

    def start_broker(self) -> None:
        config = self.config
        if config.external_bootstrap is not None:
            logger.info("Kafka at %s (not started by the lab)", config.external_bootstrap)
            return
        folder = config.state_dir / "kafka"
        if config.brokers == 1:
            self.broker = KafkaBroker(
                config.host,
                config.broker_port,
                log_dir=folder,
                initial_rebalance_delay_ms=config.initial_rebalance_delay_ms,
                side_listener=config.side_listener,
            )
        else:
            self.broker = KafkaCluster(
                config.brokers,
                config.host,
                log_dir=folder,
                initial_rebalance_delay_ms=config.initial_rebalance_delay_ms,
                side_listener=config.side_listener,
            )
        self.broker.start()
        logger.info(
            "Apache Kafka %s at %s (group.initial.rebalance.delay.ms=%d; logs in %s)",
            self.broker.version,
            self.bootstrap,
            config.initial_rebalance_delay_ms,
            folder,
        )

    @property
    def prometheus_url(self) -> str | None:
        if self.prometheus is None or self.config.prometheus_port is None:
            return None
        return f"http://{self.config.host}:{self.config.prometheus_port}"

    def start_prometheus(self) -> None:
        binary = find_prometheus()
        if self.config.prometheus_port is None:
            return
        if binary is None:
            logger.info("no prometheus binary installed: metrics only at %s", self.metrics_url)
            return
        target = f"{self.config.host}:{self.config.reports_port}"
        self.prometheus = prometheus_process(
            binary, self.config.state_dir, self.config.host, self.config.prometheus_port, [target]
        )
        self.prometheus.start()
        assert self.prometheus_url is not None
        wait_ready(self.prometheus_url)
        logger.info("Prometheus at %s scrapes %s", self.prometheus_url, self.metrics_url)

    @property
    def metrics_url(self) -> str:
        return f"http://{self.config.host}:{self.config.reports_port}/metrics"

    def install_crds(self) -> None:
        assert self.api_client is not None
        install_crds(self.api_client)

    def apply(self, documents: list[dict[str, Any]]) -> None:
        assert self.api_client is not None
        dyn = dynamic.DynamicClient(self.api_client)
        for doc in documents:
            resource = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            namespace = doc["metadata"].get("namespace", self.config.namespace)
            resource.create(body=doc, namespace=namespace)

    def apply_examples(self) -> None:
        documents = examples(self.bootstrap, self.report_url, self.config.consumers)
        if self.cluster is not None:
            # The pods get what the lab gives the consumers it starts itself.
            env = {k: v for k, v in self.consumer_env(0).items() if k != "POD_NAME"}
            documents = with_container_env(documents, env)
        self.apply(documents)

    def start_producer(self) -> None:
        state = self.config.state_dir
        self.producer = ChildProcess(
            "producer",
            python_module(
                "rebalancer_lab.producer",
                "--bootstrap",
                self.bootstrap,
                "--topic",
                self.config.topic,
                "--partitions",
                str(self.config.partitions),
                "--rate",
                str(self.config.rate),
            ),
            state / "logs" / "producer.log",
        )
        self.producer.start()

    def consumer_env(
        self, index: int, group_id: str | None = None, prefix: str = "orders-consumer"
    ) -> dict[str, str]:
        group = group_id or self.config.group_id
        return {
            "POD_NAME": f"{prefix}-{index}",
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "KAFKA_GROUP_ID": group,
            "KAFKA_TOPICS": self.config.topic if group_id is None else group,
            "KAFKA_SESSION_TIMEOUT_MS": str(self.config.session_timeout_ms),
            "KAFKA_HEARTBEAT_INTERVAL_MS": str(self.config.session_timeout_ms // 3),
            "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
            "REBALANCER_REPORT_URL": self.report_url,
            "REBALANCER_NAMESPACE": self.config.namespace,
            "REBALANCER_CONSUMER_GROUP": group,
        }

    def start_consumer(
        self,
        index: int,
        *,
        group_id: str | None = None,
        prefix: str = "orders-consumer",
        env: dict[str, str] | None = None,
    ) -> ChildProcess:
        """A consumer process as a pod would run it; by default of the example fleet."""
        pod = f"{prefix}-{index}"
        child = ChildProcess(
            pod,
            python_module("rebalancer_lab.consumer"),
            self.config.state_dir / "logs" / f"{pod}.log",
            env={**self.consumer_env(index, group_id, prefix), **(env or {})},
        )
        child.start()
        self.consumers.append(child)
        return child

    def start_sidecar(
        self,
        pod: str,
        group_id: str,
        token_file: Path,
        port: int,
        env: dict[str, str] | None = None,
    ) -> ChildProcess:
        """The enforcement sidecar of one pod, as `rebalancer sidecar` runs next to a consumer."""
        child = ChildProcess(
            f"{pod}-sidecar",
            python_module(
                "rebalancer",
                "sidecar",
                "--token-file",
                str(token_file),
                "--listen",
                f"{self.config.host}:{port}",
            ),
            self.config.state_dir / "logs" / f"{pod}-sidecar.log",
            env={**self.consumer_env(0, group_id), "POD_NAME": pod, **(env or {})},
        )
        child.start()
        self.consumers.append(child)
        return child

    def running_consumers(self) -> int:
        """Consumer processes or pods that are running now."""
        if self.cluster is None or self.api_client is None:
            return sum(1 for consumer in self.consumers if consumer.running)
        pods = client.CoreV1Api(self.api_client).list_namespaced_pod(
            self.config.namespace, label_selector="app.kubernetes.io/name=orders-consumer"
        )
        return sum(1 for pod in pods.items if (pod.status and pod.status.phase) == "Running")

    def start_consumers(self) -> None:
        for index in range(self.config.consumers):
            if index:
                time.sleep(self.config.start_spread_seconds)
            self.start_consumer(index)
            logger.info("consumer orders-consumer-%d started", index)

    def stop(self) -> None:
        # A second Ctrl-C while stopping must not leave orphans behind.
        if threading.current_thread() is not threading.main_thread():
            self._stop()
            return
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self._stop()
        finally:
            signal.signal(signal.SIGINT, previous)

    def _stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        fleet = [*self.consumers, *([self.producer] if self.producer else [])]
        stop_all(fleet, grace=10)
        if self.operator is not None:
            self.operator.stop(grace=15)
        if self.prometheus is not None:
            self.prometheus.stop()
        if self.api_client is not None:
            self.api_client.close()
        if self.plane is not None:
            self.plane.stop()
        if self.broker is not None:
            self.broker.stop()


def _client(kubeconfig: Path) -> client.ApiClient:
    from kubernetes import config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)
