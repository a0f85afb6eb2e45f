"""The lab's Kafka: Apache Kafka brokers in KRaft mode, one combined node or a three-node cluster.

Each node is a JVM running `kafka.Kafka` from the jars `kafka_jars` fetched, acting as broker and
controller at once, with a bounded heap and the production default
`group.initial.rebalance.delay.ms=3000` written into its config (a value under test is passed in;
it is never 0 unless asked). Data lives in the node's folder, so `restart()` brings the same
topics, offsets and groups back, as a restarted broker would; `kill()` is a crash (SIGKILL).

The processes stay in our process group (no new session): whoever kills the group, a CI timeout
or a Ctrl-C, takes the brokers with it. PR_SET_PDEATHSIG is no option: it fires when the starting
*thread* exits, and brokers are started from worker threads.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from rebalancer_lab.broker_security import (
    SCRAM_MECHANISMS,
    BrokerSecurity,
    TlsFiles,
    client_settings,
    listener_settings,
    make_certificates,
    scram_format_arguments,
)
from rebalancer_lab.kafka_jars import KAFKA_VERSION, class_path, data_file, java_binary
from rebalancer_lab.ports import free_port

logger = logging.getLogger(__name__)

_running: weakref.WeakSet[KafkaNode] = weakref.WeakSet()

DEFAULT_HEAP = ("-Xmx512m", "-Xms256m")
# A group the readiness probe describes: finding its coordinator makes the broker create
# __consumer_offsets, which every first JoinGroup would otherwise wait for.
_PROBE_GROUP = "rebalancer-lab-readiness"
# The probe's DescribeGroups gets this long in librdkafka, longer than any start: librdkafka
# 2.16 aborts the process when a request to a group coordinator timed out in librdkafka before
# the coordinator was known and the coordinator is found later (an assertion in
# rd_kafka_enq_once_del_source_return). Measured: with a 2 s timeout per try, a first start of
# a three-node cluster took the starting process down (1 of 2 runs; a test session with it).
_PROBE_REQUEST_TIMEOUT_S = 600.0
# A request that has waited this long is joined by a new one, the old left in flight (it is
# dropped with the probe): a lookup that met "no coordinator yet" may wait for a broker state
# change that never comes (measured: one request unanswered for 90 s on a ready cluster).
_PROBE_ASK_AGAIN_S = 5.0


# Asked in a process of its own: librdkafka 2.16 aborts the whole process when a client whose
# request went unanswered for want of a broker sees that broker again (an assertion in
# rd_kafka_enq_once_del_source_return), which took a test session down with it once. The
# client settings come on stdin: a secured broker's include the super user's password.
_COORDINATOR_SCRIPT = """
import json, sys
from confluent_kafka.admin import AdminClient
admin = AdminClient({**json.load(sys.stdin), "log_level": "0"})
future = admin.describe_consumer_groups([sys.argv[1]], request_timeout=5)[sys.argv[1]]
print(future.result(timeout=10).coordinator.id)
"""


def _ask_coordinator(settings: Mapping[str, str], group_id: str) -> int | None:
    """The coordinator's node id, or None when no answer came (or the asking process died)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _COORDINATOR_SCRIPT, group_id],
            input=json.dumps(dict(settings)),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    answer = done.stdout.strip()
    return int(answer) if done.returncode == 0 and answer.isdigit() else None


# The listener names the lab's nodes use already.
_LISTENER_NAMES = frozenset({"PLAINTEXT", "CONTROLLER", "SASL_PLAINTEXT", "SASL_SSL"})


class BrokerStartError(RuntimeError):
    """The broker did not start or did not answer; the message quotes the end of its log."""


def port_taken(host: str, port: int) -> bool:
    # SO_REUSEADDR tolerates our own previous run's TIME_WAIT sockets on restart, but not a
    # live listener.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


@dataclass(frozen=True)
class SideListener:
    """A second PLAINTEXT listener of a node, `name` on `port`, advertised at `advertised_port`
    of the same host, where something else (a proxy in front of `port`) listens."""

    name: str
    port: int
    advertised_port: int


class KafkaNode:
    """One combined broker and controller: its config, its data folder, its JVM."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        controller_port: int,
        folder: Path,
        settings: Mapping[str, str],
        heap: tuple[str, ...] = DEFAULT_HEAP,
        security: BrokerSecurity | None = None,
        tls_port: int | None = None,
        tls: TlsFiles | None = None,
        side: SideListener | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.folder = folder
        self.settings = dict(settings)
        self.heap = heap
        self.security = security
        self.tls_port = tls_port
        self.tls = tls
        self.side = side
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def controller_address(self) -> str:
        return f"{self.host}:{self.controller_port}"

    @property
    def log_path(self) -> Path:
        return self.folder / "kafka.log"

    @property
    def config_path(self) -> Path:
        return self.folder / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def tls_bootstrap(self) -> str | None:
        return f"{self.host}:{self.tls_port}" if self.tls_port is not None else None

    def _listeners(self) -> dict[str, str]:
        if self.security is not None:
            keystore = self.tls.keystore if self.tls is not None else None
            return listener_settings(
                self.security, self.host, self.port, self.controller_port, self.tls_port, keystore
            )
        listeners = f"PLAINTEXT://{self.bootstrap},CONTROLLER://{self.controller_address}"
        advertised = f"PLAINTEXT://{self.bootstrap}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        side = self.side
        if side is not None:
            # A broker answers a client's metadata request with the addresses of the listener
            # the request came in on: a client bootstrapped on the advertised ports is told of
            # those ports alone, for every node.
            listeners += f",{side.name}://{self.host}:{side.port}"
            advertised += f",{side.name}://{self.host}:{side.advertised_port}"
            protocols += f",{side.name}:PLAINTEXT"
        return {
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": protocols,
            "inter.broker.listener.name": "PLAINTEXT",
        }

    def write_config(self, quorum: Mapping[str, str]) -> None:
        config = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **self._listeners(),
            "log.dirs": str(self.data_dir),
            **quorum,
            **self.settings,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))

    def format(self, cluster_id: str, standalone: bool, classpath: str) -> None:
        """Format the data folder once; a node that has data keeps it."""
        if (self.data_dir / "meta.properties").exists():
            return
        command = [*self._java(classpath), "kafka.tools.StorageTool", "format"]
        # `=`: a base64 id may begin with "-", which the tool's parser would take for an option.
        command += [f"--cluster-id={cluster_id}", f"--config={self.config_path}"]
        if standalone:
            command.append("--standalone")
        if self.security is not None:
            command += scram_format_arguments(self.security)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerStartError(
                f"formatting Kafka node {self.node_id}'s storage failed: "
                f"{(result.stdout + result.stderr).strip()[-2000:]}"
            )

    def spawn(self, classpath: str) -> None:
        ports = (self.port, self.controller_port, *([self.tls_port] if self.tls_port else []))
        ports += (self.side.port,) if self.side is not None else ()
        for port in ports:
            if port_taken(self.host, port):
                raise BrokerStartError(
                    f"cannot start Kafka node {self.node_id}: {self.host}:{port} is already in use"
                )
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        command = [*self._java(classpath), "kafka.Kafka", str(self.config_path)]
        self._log.write(f"--- starting node {self.node_id}: {' '.join(command[-2:])}\n".encode())
        self._log.flush()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Ctrl-C in the lab's terminal must reach the lab alone: it stops the broker last,
            # after the consumers have closed against it (a broker gone first holds each
            # consumer's close for its whole grace period).
            start_new_session=True,
        )
        _running.add(self)

    def _java(self, classpath: str) -> list[str]:
        return [
            java_binary(),
            *self.heap,
            # One collector thread: the lab runs several JVMs on a couple of cores.
            "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={data_file('log4j2.yaml')}",
            "-cp",
            classpath,
        ]

    def terminate(self, grace: float) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
                try:
                    process.wait(timeout=max(grace, 0.1))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    process.wait()
            else:
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        _running.discard(self)


class KafkaCluster:
    """`nodes` combined Kafka nodes on `host` (ports picked free unless `port` is given for a
    single node), started, stopped and restarted together or one by one.

    With `security`, every listener asks for a password and ACLs decide what a user may do
    (rebalancer_lab.broker_security); `bootstrap` is then the SASL_PLAINTEXT listener,
    `tls_bootstrap` the SASL_SSL one, and `admin_settings()` the lab's super user's client."""

    def __init__(
        self,
        nodes: int = 3,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_dir: str | os.PathLike[str] | None = None,
        initial_rebalance_delay_ms: int = 3000,
        extra_config: Mapping[str, str] | None = None,
        heap: tuple[str, ...] = DEFAULT_HEAP,
        start_timeout: float = 90.0,
        version: str = KAFKA_VERSION,
        security: BrokerSecurity | None = None,
        side_listener: str | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError("a Kafka cluster needs at least one node")
        if port and nodes > 1:
            raise ValueError("a fixed port is for a single node; a cluster picks free ports")
        if initial_rebalance_delay_ms < 0:
            raise ValueError("initial_rebalance_delay_ms must not be negative")
        if side_listener is not None and security is not None:
            raise ValueError("side_listener is for a cluster without security; drop one of them")
        if side_listener is not None and side_listener.upper() in _LISTENER_NAMES:
            raise ValueError(f"side_listener {side_listener!r} is taken; name it e.g. 'OPERATOR'")
        self.host = host
        self.size = nodes
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.start_timeout = start_timeout
        self.version = version
        self.cluster_id = _cluster_id()
        self._folder = Path(log_dir) if log_dir is not None else None
        self._requested_port = port
        self._extra = dict(extra_config or {})
        self._heap = heap
        self.security = security
        self.side_listener = side_listener
        self._tls: TlsFiles | None = None
        self._nodes: list[KafkaNode] = []
        self._lock = threading.Lock()
        self.starts = 0

    # -- what callers read ---------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="kafka-"))
        return self._folder

    @property
    def nodes(self) -> list[KafkaNode]:
        return list(self._nodes)

    @property
    def bootstrap(self) -> str:
        if not self._nodes:
            raise RuntimeError("the broker has no port yet: start it first")
        return ",".join(node.bootstrap for node in self._nodes)

    @property
    def port(self) -> int:
        if not self._nodes:
            return self._requested_port
        return self._nodes[0].port

    @property
    def side_bootstrap(self) -> str:
        """The advertised addresses of the side listener (started with `side_listener`)."""
        sides = [node.side for node in self._nodes if node.side is not None]
        if not sides:
            raise RuntimeError("this broker has no side listener: start it with side_listener")
        return ",".join(f"{self.host}:{side.advertised_port}" for side in sides)

    def side_routes(self) -> list[tuple[int, int]]:
        """(advertised port, listening port) of each node's side listener: what a proxy in
        front of them listens on and forwards to."""
        sides = [node.side for node in self._nodes if node.side is not None]
        return [(side.advertised_port, side.port) for side in sides]

    @property
    def tls_bootstrap(self) -> str:
        """The SASL_SSL listeners of a secured cluster started with `tls`."""
        addresses = [node.tls_bootstrap for node in self._nodes if node.tls_bootstrap]
        if not addresses:
            raise RuntimeError("this broker has no TLS listener: start it with security tls=True")
        return ",".join(addresses)

    @property
    def ca_path(self) -> Path:
        """The CA certificate that signed the TLS listeners' certificate."""
        if self._tls is None:
            raise RuntimeError("this broker has no TLS listener: start it with security tls=True")
        return self._tls.ca

    def client_settings(
        self, user: str, password: str, *, mechanism: str = "SCRAM-SHA-512", tls: bool = False
    ) -> dict[str, str]:
        """librdkafka properties of a SCRAM user of this secured cluster."""
        if tls:
            return client_settings(
                self.tls_bootstrap, user, password, mechanism=mechanism, tls_ca=self.ca_path
            )
        return client_settings(self.bootstrap, user, password, mechanism=mechanism)

    def admin_settings(self) -> dict[str, str]:
        """librdkafka properties of the lab's own admin client: the super user when secured."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap}
        return self.client_settings(self.security.admin_user, self.security.admin_password)

    @property
    def log_path(self) -> Path:
        return self._nodes[0].log_path if self._nodes else self.folder / "node-1" / "kafka.log"

    @property
    def pid(self) -> int | None:
        return self._nodes[0].pid if self._nodes else None

    @property
    def running(self) -> bool:
        return bool(self._nodes) and all(node.running for node in self._nodes)

    def node(self, node_id: int) -> KafkaNode:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no Kafka node {node_id}: nodes are {[n.node_id for n in self._nodes]}")

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.bootstrap if self._nodes else "(not started)"
        return f"{type(self).__name__}({where}, {state})"

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        with self._lock:
            if self.running:
                return self
            classpath = class_path(self.version, progress=logger.info)
            fresh = not self._nodes
            # Ports picked by free_port() can be taken before the JVM binds them; try anew.
            attempts = 3 if fresh and not self._requested_port else 1
            if self.security is not None and self.security.tls and self._tls is None:
                self._tls = make_certificates(self.folder / "tls", self.host)
            for attempt in range(attempts):
                if fresh:
                    self._nodes = self._plan_nodes()
                try:
                    self._start_nodes(self._nodes, classpath, format_storage=True)
                    break
                except BrokerStartError:
                    for node in self._nodes:
                        node.terminate(grace=0)
                    if attempt == attempts - 1:
                        raise
            self.starts += 1
            return self

    def _plan_nodes(self) -> list[KafkaNode]:
        settings = {
            "group.initial.rebalance.delay.ms": str(self.initial_rebalance_delay_ms),
            # A few partitions: the first group's coordinator is ready sooner.
            "offsets.topic.num.partitions": "5",
            "offsets.topic.replication.factor": str(min(self.size, 3)),
            "transaction.state.log.replication.factor": str(min(self.size, 3)),
            "transaction.state.log.min.isr": str(min(self.size, 2)),
            "min.insync.replicas": "1",
            "default.replication.factor": str(min(self.size, 3)),
            **self._extra,
        }
        nodes = []
        for node_id in range(1, self.size + 1):
            port = self._requested_port or free_port(self.host)
            secured = self.security is not None and self.security.tls
            nodes.append(
                KafkaNode(
                    node_id,
                    self.host,
                    port,
                    free_port(self.host),
                    self.folder / f"node-{node_id}",
                    settings,
                    self._heap,
                    security=self.security,
                    tls_port=free_port(self.host) if secured else None,
                    tls=self._tls,
                    side=self._side(),
                )
            )
        return nodes

    def _side(self) -> SideListener | None:
        if self.side_listener is None:
            return None
        return SideListener(self.side_listener, free_port(self.host), free_port(self.host))

    def _quorum(self, nodes: list[KafkaNode]) -> dict[str, str]:
        if self.size == 1:
            return {"controller.quorum.bootstrap.servers": nodes[0].controller_address}
        voters = ",".join(f"{node.node_id}@{node.controller_address}" for node in nodes)
        return {"controller.quorum.voters": voters}

    def _start_nodes(self, nodes: list[KafkaNode], classpath: str, format_storage: bool) -> None:
        quorum = self._quorum(self._nodes)
        for node in nodes:
            node.write_config(quorum)
            if format_storage:
                node.format(self.cluster_id, standalone=self.size == 1, classpath=classpath)
        for node in nodes:
            node.spawn(classpath)
        self._wait_until_ready(nodes)
        logger.info(
            "Apache Kafka %s ready at %s (pids %s)",
            self.version,
            self.bootstrap,
            ", ".join(str(node.pid) for node in nodes),
        )

    def _wait_until_ready(self, nodes: list[KafkaNode]) -> None:
        """Until every node is in the cluster's metadata and group coordination answers."""
        deadline = time.monotonic() + self.start_timeout
        probe = AdminClient(
            {
                **self.admin_settings(),
                "bootstrap.servers": ",".join(node.bootstrap for node in nodes),
                "socket.connection.setup.timeout.ms": "1000",
                "reconnect.backoff.max.ms": "200",
                # Connection refusals while the nodes bind are expected; keep them quiet.
                "log_level": "0",
            }
        )
        wanted = {node.node_id for node in self._nodes if node in nodes or node.running}
        asked: list[tuple[float, Any]] = []  # DescribeGroups in flight: (sent at, future)
        try:
            while True:
                for node in nodes:
                    process = node.process
                    if process is None or process.poll() is not None:
                        code = None if process is None else process.returncode
                        raise BrokerStartError(
                            f"Kafka node {node.node_id} exited with code {code} before answering "
                            f"on {node.bootstrap}; its log ({node.log_path}) ends:\n"
                            f"{_tail(node.log_path)}"
                        )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerStartError(
                        f"Kafka did not become ready on {self.bootstrap} within "
                        f"{self.start_timeout:g} s; the log of node {nodes[0].node_id} "
                        f"({nodes[0].log_path}) ends:\n{_tail(nodes[0].log_path)}"
                    )
                if _answers(probe, wanted, min(2.0, remaining), asked):
                    return
                time.sleep(0.1)
        finally:
            del probe

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every node (a clean shutdown), SIGKILL after `grace` s; reaps them all."""
        with self._lock:
            for node in self._nodes:
                node.terminate(grace)

    def kill(self) -> None:
        """Stop every node without a chance to clean up, like a crashed broker."""
        self.stop(grace=0.0)

    def restart(self, down_for: float = 0.0) -> None:
        """Stop and start again on the same ports, keeping the data."""
        self.stop()
        if down_for > 0:
            time.sleep(down_for)
        self.start()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (the others keep serving, if a quorum remains)."""
        with self._lock:
            self.node(node_id).terminate(grace=0)

    def start_node(self, node_id: int) -> None:
        """Start one stopped node again with its data, and wait until it is back in the cluster."""
        with self._lock:
            node = self.node(node_id)
            if node.running:
                return
            self._start_nodes([node], class_path(self.version), format_storage=False)

    def coordinator_of(self, group_id: str, timeout: float = 60.0) -> int:
        """The id of the node that coordinates `group_id` now.

        Right after a node died the answer can take a while: the controller moves the group's
        __consumer_offsets partition only once it has fenced the node (broker.session.timeout.ms,
        9 s by default)."""
        deadline = time.monotonic() + timeout
        while True:
            found = _ask_coordinator(self.admin_settings(), group_id)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"no coordinator of group {group_id!r} known at {self.bootstrap} within "
                    f"{timeout:.0f} s"
                )
            time.sleep(0.5)

    # -- users and ACLs of a secured cluster ---------------------------------------------------

    def _secured_admin(self) -> AdminClient:
        if self.security is None:
            raise RuntimeError("users and ACLs need a secured broker: pass security=...")
        return AdminClient({**self.admin_settings(), "log_level": "0"})

    def add_user(
        self, name: str, password: str, mechanisms: tuple[str, ...] = SCRAM_MECHANISMS
    ) -> None:
        """Create a SCRAM user (or set a new password) through the admin API, as the super
        user: AlterUserScramCredentials, one credential per mechanism."""
        admin = self._secured_admin()
        # One mechanism per request: the broker refuses two changes of one user in one.
        for mechanism in mechanisms:
            info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 8192)
            upsert: UserScramCredentialAlteration = UserScramCredentialUpsertion(
                name, info, password.encode()
            )
            done = admin.alter_user_scram_credentials([upsert], request_timeout=10)
            for future in done.values():
                future.result(timeout=15)

    def grant(
        self, user: str, operation: str, resource: str, name: str = "", prefixed: bool = False
    ) -> None:
        """Allow User:`user` `operation` (READ, DESCRIBE, DESCRIBE_CONFIGS, ...) on a `resource`
        (TOPIC, GROUP, CLUSTER; a CLUSTER's name is implied), from any host."""
        admin = self._secured_admin()
        binding = _acl(AclBinding, user, operation, resource, name, prefixed)
        for future in admin.create_acls([binding], request_timeout=10).values():
            future.result(timeout=15)

    def revoke(
        self, user: str, operation: str, resource: str, name: str = "", prefixed: bool = False
    ) -> None:
        """Take back what `grant` with the same arguments allowed."""
        admin = self._secured_admin()
        found = _acl(AclBindingFilter, user, operation, resource, name, prefixed)
        for future in admin.delete_acls([found], request_timeout=10).values():
            future.result(timeout=15)

    # -- async and context-manager forms -----------------------------------------------------

    async def astart(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    async def arestart(self, down_for: float = 0.0) -> None:
        await asyncio.to_thread(self.restart, down_for)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.astart()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.astop()


class KafkaBroker(KafkaCluster):
    """One combined Kafka node on `host:port` (port 0 picks a free one): the lab's default."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_dir: str | os.PathLike[str] | None = None,
        initial_rebalance_delay_ms: int = 3000,
        extra_config: Mapping[str, str] | None = None,
        heap: tuple[str, ...] = DEFAULT_HEAP,
        start_timeout: float = 60.0,
        version: str = KAFKA_VERSION,
        security: BrokerSecurity | None = None,
        side_listener: str | None = None,
    ) -> None:
        super().__init__(
            1,
            host,
            port,
            log_dir=log_dir,
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            extra_config=extra_config,
            heap=heap,
            start_timeout=start_timeout,
            version=version,
            security=security,
            side_listener=side_listener,
        )


_CLUSTER_RESOURCE = "kafka-cluster"


def _acl(kind: Any, user: str, operation: str, resource: str, name: str, prefixed: bool) -> Any:
    # librdkafka calls Kafka's CLUSTER resource type (4) BROKER; its one name is kafka-cluster.
    kind_name = resource.upper()
    resource_type = ResourceType["BROKER" if kind_name == "CLUSTER" else kind_name]
    if resource_type is ResourceType.BROKER:
        name = _CLUSTER_RESOURCE
    elif not name:
        raise ValueError(f"an ACL on a {resource.lower()} needs the {resource.lower()}'s name")
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return kind(
        resource_type,
        name,
        pattern,
        f"User:{user}",
        "*",
        AclOperation[operation.upper()],
        AclPermissionType.ALLOW,
    )


def _cluster_id() -> str:
    # KRaft wants a base64url UUID without padding, what `kafka-storage random-uuid` prints.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _answers(
    probe: AdminClient, wanted: set[int], timeout: float, asked: list[tuple[float, Any]]
) -> bool:
    """Whether every `wanted` node is in the metadata and the probe group's coordinator answers.
    `asked` holds the DescribeGroups in flight from earlier looks: never timed out, looked at
    again (see _PROBE_REQUEST_TIMEOUT_S)."""
    try:
        metadata = probe.list_topics(timeout=timeout)
    except Exception:
        return False
    if not wanted <= set(metadata.brokers):
        return False
    now = time.monotonic()
    if not asked or now - asked[-1][0] >= _PROBE_ASK_AGAIN_S:
        request = probe.describe_consumer_groups(
            [_PROBE_GROUP], request_timeout=_PROBE_REQUEST_TIMEOUT_S
        )
        asked.append((now, request[_PROBE_GROUP]))
    done, _ = concurrent.futures.wait([future for _, future in asked], timeout=timeout)
    for future in done:
        if future.exception() is None:
            return True
    # Answered with an error (no coordinator yet): asked again at the next look.
    asked[:] = [(at, future) for at, future in asked if future not in done]
    return False


def _stop_all(*_: Any) -> None:
    for node in list(_running):
        node.terminate(grace=1.0)


atexit.register(_stop_all)
