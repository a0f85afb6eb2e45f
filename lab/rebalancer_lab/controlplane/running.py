"""A Kubernetes control plane on this machine: etcd, kube-apiserver, controller manager, scheduler.

All four run from the one `kube-lab` binary (see `building.py`), each as its own process with its
log in the state folder. Authentication is what a kubeadm cluster has: a CA, client certificates
whose subjects are the components' and nodes' identities, service-account tokens signed with the
state folder's RSA key; authorization is Node + RBAC, so RBAC mistakes show up in the lab as they
would on a real cluster. There is no kubelet: Pods are created, scheduled if a Node exists, and
otherwise stay Pending; the lab's own kubelet may register Nodes with `node_credentials()`.

    with ControlPlane(tmp_path / "cp") as plane:
        subprocess.run(["kubectl", "--kubeconfig", plane.kubeconfig, "get", "ns"])
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from rebalancer_lab.controlplane.building import ensure_control_plane
from rebalancer_lab.controlplane.health import client_context, probe, wait_until
from rebalancer_lab.controlplane.processes import Child, stop_all
from rebalancer_lab.controlplane.supervising import Restart, Supervisor
from rebalancer_lab.ports import free_port

Progress = Callable[[str], None]

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Soft heap limits (GOMEMLIMIT): the Go runtime collects harder near them instead of growing.
# A lab's API server holds a few hundred objects; the defaults are sized for thousands of Nodes.
_MEMORY_LIMITS = {
    "etcd": "256MiB",
    "kube-apiserver": "768MiB",
    "kube-controller-manager": "256MiB",
    "kube-scheduler": "128MiB",
}


class ControlPlaneError(RuntimeError):
    """A component exited or did not become healthy in time; the message quotes its log."""


@dataclass(frozen=True)
class NodeCredentials:
    """A kubelet's client identity (CN=system:node:<name>, O=system:nodes)."""

    name: str
    certificate: Path
    key: Path
    kubeconfig: Path


class ControlPlane:
    def __init__(
        self,
        state_dir: Path | str,
        host: str = "127.0.0.1",
        *,
        nodes: Sequence[str] = ("lab",),
        binary: Path | None = None,
        progress: Progress = print,
        start_timeout: float = 120.0,
        extra_flags: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """`extra_flags`: more flags per component (`{"kube-scheduler": ["-v=4"]}`)."""
        self.state_dir = Path(state_dir)
        self.host = host
        self.nodes = tuple(nodes)
        self.binary = binary
        self.progress = progress
        self.start_timeout = start_timeout
        self.extra_flags = {name: list(flags) for name, flags in (extra_flags or {}).items()}
        self.pki = self.state_dir / "pki"
        self.children: list[Child] = []
        # Seconds to build (0 when cached), then from launching etcd to each component healthy.
        self.timings: dict[str, float] = {}
        self._port = 0
        # How each component shows it is healthy, for restart().
        self._healthy: dict[str, Callable[[], bool]] = {}
        self._supervisor: Supervisor | None = None

    # -- what clients need ------------------------------------------------------------------

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self._port}"

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (O=system:masters): everything is allowed."""
        return self.state_dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    def node_credentials(self, name: str | None = None) -> NodeCredentials:
        node = name or self.nodes[0]
        if node not in self.nodes:
            raise KeyError(f"no credentials were issued for node {node!r} (nodes={self.nodes})")
        return NodeCredentials(
            name=node,
            certificate=self.pki / f"node-{node}.crt",
            key=self.pki / f"node-{node}.key",
            kubeconfig=self.pki / f"node-{node}.kubeconfig",
        )

    @property
    def restarts(self) -> list[Restart]:
        """Components that exited on their own and were started again (supervising.py)."""
        return list(self._supervisor.restarts) if self._supervisor else []

    def rss_bytes(self) -> dict[str, int | None]:
        """Each component's resident memory now."""
        return {child.name: child.rss_bytes() for child in self.children}

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self.children:
            raise ControlPlaneError("this control plane is already started")
        started = time.monotonic()
        binary = self.binary or ensure_control_plane(self.progress)
        self.timings["build"] = time.monotonic() - started
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # A caller that forgets stop() (or dies of an exception outside `with`) must not leave
        # an etcd and an API server running after the interpreter exits.
        atexit.register(self.stop)
        try:
            self._start(str(binary), time.monotonic())
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM every component and reap them; etcd last, so the others shut down cleanly."""
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None
        etcd = [child for child in self.children if child.name == "etcd"]
        stop_all([child for child in self.children if child.name != "etcd"], grace)
        stop_all(etcd, grace)
        self.children = []
        atexit.unregister(self.stop)

    def _start(self, binary: str, started: float) -> None:
        host = self.host
        self._port = free_port(host)
        hosts = ",".join(dict.fromkeys(["127.0.0.1", "localhost", host]))
        self._run_certs(binary, hosts)
        shutil.copyfile(self.pki / "admin.kubeconfig", self.kubeconfig)
        pki = self.pki

        etcd_port = free_port(host)
        etcd_url = f"http://{host}:{etcd_port}"
        etcd = self._spawn(
            binary,
            "etcd",
            f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--listen-peer-urls=http://{host}:{free_port(host)}",
            "--unsafe-no-fsync",
        )
        self._healthy["etcd"] = lambda: probe(f"{etcd_url}/health")[0] == 200
        self._await(etcd, self._healthy["etcd"], started)

        apiserver = self._spawn(
            binary,
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            f"--bind-address={host}",
            f"--advertise-address={host}",
            # The endpoint reconcilers refuse a loopback address for the `kubernetes` Service's
            # endpoints; nothing in the lab dials that Service (there is no kube-proxy), so none.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self._port}",
            f"--cert-dir={self.state_dir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # Aggregated API servers (metrics-server and the like) trust these headers.
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--allow-privileged=true",
            "--profiling=false",
        )
        admin = client_context(str(pki / "ca.crt"), str(pki / "admin.crt"), str(pki / "admin.key"))
        self._healthy["kube-apiserver"] = lambda: probe(f"{self.server}/readyz", admin)[0] == 200
        self._await(apiserver, self._healthy["kube-apiserver"], started)

        authn = [
            f"--bind-address={host}",
            "--leader-elect=false",
            "--profiling=false",
        ]
        controller_port = free_port(host)
        controller_manager = self._spawn(
            binary,
            "kube-controller-manager",
            *self._component_kubeconfigs("controller-manager"),
            *authn,
            f"--secure-port={controller_port}",
            f"--cert-dir={self.state_dir / 'controller-manager-certs'}",
            "--use-service-account-credentials",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            # Lets the lab's kubelets get serving certificates through CSRs, as kubeadm's can.
            f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}",
            # A new Node is tainted not-ready until the node lifecycle controller sees it Ready;
            # it looks every 5 s by default, which a lab pays at every start.
            "--node-monitor-period=1s",
        )
        scheduler_port = free_port(host)
        scheduler = self._spawn(
            binary,
            "kube-scheduler",
            *self._component_kubeconfigs("scheduler"),
            *authn,
            f"--secure-port={scheduler_port}",
        )
        # Both serve self-signed certificates; /healthz needs no credentials.
        insecure = client_context(None, None, None)
        for child, port in ((controller_manager, controller_port), (scheduler, scheduler_port)):
            self._healthy[child.name] = _answers_ok(f"https://{host}:{port}/healthz", insecure)
            self._await(child, self._healthy[child.name], started)
        self.timings["all healthy"] = time.monotonic() - started
        self._supervisor = Supervisor(self.children, self.progress)
        self._supervisor.start()
        self.progress(
            f"control plane at {self.server} healthy in {self.timings['all healthy']:.1f} s; "
            f"kubeconfig {self.kubeconfig}"
        )

    def restart(self, name: str = "kube-apiserver", down_seconds: float = 0.0) -> float:
        """Stop one component (SIGTERM, then SIGKILL after 15 s), leave it down `down_seconds`,
        start it again with the same flags and port; seconds from the stop until it is healthy.

        What an upgrade or a crash of that component looks like to its clients: connections
        refused, watches ended, then the same endpoint again."""
        [child] = [c for c in self.children if c.name == name]
        started = time.monotonic()
        held = self._supervisor.hold(name) if self._supervisor else contextlib.nullcontext()
        with held:
            stop_all([child], 15.0)
            time.sleep(down_seconds)
            child.start()
            self._await(child, self._healthy[name], time.monotonic())
        return time.monotonic() - started

    def _component_kubeconfigs(self, identity: str) -> list[str]:
        # The same identity authenticates callers of its /metrics and delegates authorization;
        # without these the component guesses an in-cluster config and logs warnings.
        path = self.pki / f"{identity}.kubeconfig"
        return [
            f"--kubeconfig={path}",
            f"--authentication-kubeconfig={path}",
            f"--authorization-kubeconfig={path}",
        ]

    def _run_certs(self, binary: str, hosts: str) -> None:
        command = [
            binary,
            "certs",
            f"--dir={self.pki}",
            f"--server={self.server}",
            f"--hosts={hosts}",
            f"--nodes={','.join(self.nodes)}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        if result.returncode != 0:
            raise ControlPlaneError(
                f"`{' '.join(command)}` exited {result.returncode}: {result.stderr.strip()}"
            )

    def _spawn(self, binary: str, name: str, *flags: str) -> Child:
        child = Child(
            name,
            [binary, name, *flags, *self.extra_flags.get(name, ())],
            self.state_dir / f"{name}.log",
            env={"GOMEMLIMIT": _MEMORY_LIMITS[name]},
        )
        child.start()
        self.children.append(child)
        return child

    def _await(self, child: Child, healthy: Callable[[], bool], started: float) -> None:
        def alive() -> None:
            if child.exit_code is not None:
                raise ControlPlaneError(
                    f"{child.name} exited with {child.exit_code} while starting; "
                    f"{child.log_path} ends with:\n{child.log_tail()}"
                )

        if not wait_until(healthy, self.start_timeout, alive):
            raise ControlPlaneError(
                f"{child.name} was not healthy {self.start_timeout:.0f} s after it started; "
                f"{child.log_path} ends with:\n{child.log_tail()}"
            )
        self.timings[child.name] = time.monotonic() - started


def _answers_ok(url: str, context: ssl.SSLContext) -> Callable[[], bool]:
    return lambda: probe(url, context)[0] == 200
