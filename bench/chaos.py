"""Random faults while two managed fleets roll, scale and consume, checked by invariants.

    .venv/bin/python bench/chaos.py --duration 3600 --seed 1 --png bench/chaos-timeline.png
    .venv/bin/python bench/chaos.py --seeds-file bench/chaos-seeds.txt --duration 900

One lab (rebalancer_lab): Apache Kafka with three KRaft nodes (topics of three replicas,
min.insync.replicas 2, the producers waiting for every in-sync replica); Kubernetes' own control
plane and the lab's kubelet running each pod as local processes; two `rebalancer operator
--peering` replicas electing a leader (rebalancer_lab.operator_replicas), both talking to the
API server through a proxy that can cut their watches and answer with errors
(rebalancer_lab.api_faults), and to Kafka through TCP proxies that can cut them
(rebalancer_lab.tcp_cut: each node has a listener of the operator's own, advertised at the
proxies' ports, and the ConsumerGroups name the proxies as bootstrap servers). Two fleets of
--fleet-size real consumer processes, each recording every message it processes before
committing (rebalancer_lab.ledgers): a gated StatefulSet of static members (group.instance.id =
pod name) with cooperative-sticky and the enforcement sidecar (`rebalancer sidecar`) in every pod,
and a gated Deployment whose consumers take the identity slot the operator writes; one numbered
producer per fleet. The consumers, sidecars and producers reach Kafka directly.

A seeded scheduler makes changes (a template change, which is a rollout; a scale step, through
the scale subresource as an HPA does or through spec.replicas as `kubectl scale` does) and
injects faults, alone and overlapping: the operator's leader or follower SIGKILLed and started
again, a Kafka node SIGKILLed (the coordinator of a fleet's group half the time) and started
again, kube-apiserver restarted, etcd paused (SIGSTOP, then SIGCONT), the operators' watches cut,
API errors answered to the operators' writes, a consumer process SIGKILLed, a sidecar process
SIGKILLed (the kubelet starts it again), the network between the operators and Kafka cut for
5-45 s (open connections dropped, new ones refused or blackholed). Then the faults and changes
stop; the bench waits for the rollouts to finish and for status to agree with the broker, stops
the producers, waits for every message to be processed.

bench/chaos_checker.py checks the invariants on what the bench sampled (status, pods, gates, the
broker, the operators' /proc) and computes the figures. One JSON line per seed is appended to
--out; --png draws the faults, changes, rollouts and violations over time.

Not injected (no part of the lab makes them yet): enforced rebalances (the ConsumerGroups ask
for none), a new topic matching a subscription pattern (the fleets subscribe by name), a slow
broker behind a delaying proxy, a cut between the consumers and Kafka.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client

from chaos_checker import Checker, Event, Limits, Violation, table
from rebalancer.planning.sidecar_templates import SIDECAR_CONTAINER, render_sidecar
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.gates import GATE_CONTAINER, GATE_HELD_ANNOTATION
from rebalancer.structs.times import parse_rfc3339
from rebalancer_lab.api_faults import FaultyApi
from rebalancer_lab.fleets import (
    consumer_deployment,
    consumer_group,
    consumer_pid,
    consumer_statefulset,
)
from rebalancer_lab.ledgers import delivered_so_far, numbered_producer, recorded, tally
from rebalancer_lab.operator_replicas import PeeringReplica, prepare_peering
from rebalancer_lab.ports import free_port
from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.running import Lab, LabConfig
from rebalancer_lab.tcp_cut import MODES, TcpCut

ROOT = Path(__file__).resolve().parents[1]
NS = "default"
PEERING = "rebalancer"
SESSION_MS = 20000  # covers a static member's restart: a replaced pod rejoins without a rebalance
OBSERVE_S = 2
GATE_BYPASS_S = 120  # the gate's default --bypass-after
REPLICATION, MIN_INSYNC = 3, 2
SAMPLE_S = 2.0
PROC_SAMPLE_S = 5.0
# How often exited operator replicas are looked for, and the kubelet's first restart back-off.
SUPERVISE_S = 2.0
RESTART_BACKOFF_S = 10.0
FAULTS = (
    "operator-leader-kill",
    "operator-follower-kill",
    "broker-kill",
    "apiserver-restart",
    "etcd-pause",
    "watch-cut",
    "api-errors",
    "consumer-kill",
    "broker-pause",
    "operator-kafka-cut",
    "sidecar-kill",
)
# The Kafka listener only the operator replicas use, behind the cuttable proxies.
OPERATOR_LISTENER = "OPERATOR"
CUT_S = (5.0, 45.0)
SIDECAR_SECRET, SIDECAR_TOKEN = "chaos-sidecar-token", "chaos-sidecar-token-value"
CHANGES = ("rollout", "scale")


def say(text: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)


class Fleet:
    def __init__(
        self, name: str, kind: str, replicas: int, records: Path, sidecar: bool = False
    ) -> None:
        self.name, self.kind, self.replicas, self.records = name, kind, replicas, records
        self.sidecar = sidecar  # the enforcement sidecar in every pod
        self.version = 1
        self.producer: ChildProcess | None = None

    @property
    def workload(self) -> str:
        return f"{self.name}-consumer"


class Run:
    """One seed's run on a lab of its own."""

    def __init__(self, args: argparse.Namespace, seed: int, state: Path) -> None:
        self.args, self.seed, self.state = args, seed, state
        self.rng = random.Random(seed)
        self.checker = Checker(Limits(rollout_s=args.rollout_limit, observe_s=OBSERVE_S))
        self.events: list[Event] = []
        self.lock = threading.Lock()
        self.t0 = time.time()
        # Read now: the run lasts an hour, and the checkout may move meanwhile.
        self.commit = commit()
        self.lab: Lab | None = None
        self.proxy: FaultyApi | None = None
        self.kafka_cut: TcpCut | None = None
        self.replicas: list[PeeringReplica] = []
        self.fleets: list[Fleet] = []
        self.stop = threading.Event()
        self.quiet = False
        self.fault_id = 0
        self.busy: dict[str, threading.Lock] = {
            "broker": threading.Lock(),
            "plane": threading.Lock(),
            "operator": threading.Lock(),
            "operator-kafka": threading.Lock(),
        }
        self.threads: list[threading.Thread] = []
        self.pods_seen: dict[str, dict[str, tuple[str, str]]] = {}
        self.errors: list[str] = []

    # -- recording ----------------------------------------------------------------------------

    def now(self) -> float:
        return time.time() - self.t0

    def record(self, kind: str, fleet: str = "", **data: Any) -> list[Violation]:
        event = Event(round(self.now(), 2), kind, fleet, data)
        with self.lock:
            self.events.append(event)
            found = self.checker.feed(event)
        for violation in found:
            say(f"VIOLATION {violation.line(self.seed)}")
        return found

    @property
    def api(self) -> client.ApiClient:
        assert self.lab is not None and self.lab.api_client is not None
        return self.lab.api_client

    # -- the lab ------------------------------------------------------------------------------

    def start(self) -> None:
        args = self.args
        lab = Lab(
            LabConfig(
                state_dir=self.state,
                broker_port=free_port(),
                reports_port=free_port(),
                prometheus_port=None,
                brokers=3,
                session_timeout_ms=SESSION_MS,
                side_listener=OPERATOR_LISTENER,
            )
        )
        self.lab = lab
        # The lab's in-process parts (the kubelet, the fault proxy) log to a file of the run,
        # not between the bench's progress lines.
        self.state.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.state / "lab.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        say(f"seed {self.seed}: starting the lab in {self.state} (its log: lab.log there)")
        lab.start(fleet=False, pods=True, jitter="uniform(0,1)")
        assert lab.operator is not None and lab.plane is not None and lab.broker is not None
        # A node started again after its kill may take minutes on a loaded machine; until it
        # answers, the broker fault is not over and no second node is killed (one of three down
        # keeps the KRaft quorum and min.insync.replicas).
        lab.broker.start_timeout = 300.0
        # The operator replicas reach Kafka through these alone (the ConsumerGroups name them
        # as bootstrap servers); the consumers, sidecars and producers go straight to it.
        self.kafka_cut = TcpCut(lab.config.host, lab.broker.side_routes()).start()
        # Two replicas electing a leader instead of the lab's one, through the fault proxy.
        lab.operator.stop(grace=15)
        lab.operator = None
        self.proxy = FaultyApi(lab.plane).__enter__()
        kubeconfig = self.proxy.write_kubeconfig(self.state / "operator-kubeconfig")
        prepare_peering(lab, PEERING, ["operator-0", "operator-1"])
        first = PeeringReplica(
            lab, "a", lab.config.reports_port, "operator-0", PEERING, kubeconfig
        ).start()
        wait_for(lambda: first.leader() == 1.0, 90, "the first operator replica leading")
        second = PeeringReplica(lab, "b", free_port(), "operator-1", PEERING, kubeconfig).start()
        wait_for(lambda: second.leader() == 0.0, 90, "the second replica standing by")
        self.replicas = [first, second]
        size = args.fleet_size
        partitions = 2 * size
        self.fleets = [
            Fleet("chaos-sts", "StatefulSet", size, self.state / "records-sts", sidecar=True),
            Fleet("chaos-dep", "Deployment", size, self.state / "records-dep"),
        ]
        create_topics(lab, {fleet.name: partitions for fleet in self.fleets})
        lab.apply([sidecar_secret()])
        for fleet in self.fleets:
            fleet.records.mkdir(parents=True, exist_ok=True)
            lab.apply([self.group_body(fleet), self.workload_body(fleet)])
        for fleet in self.fleets:
            wait_for(
                lambda f=fleet: self.settled(f),  # type: ignore[misc]
                300,
                f"{fleet.name}: cold start Completed, {size} members on every partition",
            )
            fleet.producer = numbered_producer(
                lab, f"{fleet.name}-producer", fleet.name, args.rate, 0
            )
            fleet.producer.start()
        say(f"seed {self.seed}: lab ready at t={self.now():.0f}s; bootstrap {lab.bootstrap}")

    def group_body(self, fleet: Fleet) -> dict[str, Any]:
        assert self.lab is not None
        body = consumer_group(fleet.name, self.lab.bootstrap)
        spec = body["spec"]
        assert self.kafka_cut is not None
        spec["kafka"]["bootstrapServers"] = self.kafka_cut.addresses.split(",")
        spec["kafka"]["profile"] = "apache-kafka"
        spec["workload"] = {"kind": fleet.kind, "name": fleet.workload}
        spec["policy"]["observe"]["intervalSeconds"] = OBSERVE_S
        spec["policy"]["rollout"] = {
            "enabled": True,
            "settleSeconds": 2,
            "consumers": {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": 3000},
        }
        return body

    def workload_body(self, fleet: Fleet) -> dict[str, Any]:
        assert self.lab is not None
        body = (
            consumer_deployment(
                self.lab,
                fleet.name,
                fleet.replicas,
                session_ms=SESSION_MS,
                record_dir=fleet.records,
            )
            if fleet.kind == "Deployment"
            else self.statefulset_body(fleet)
        )
        if fleet.sidecar:
            add_sidecar(body, fleet.name, self.lab.bootstrap)
        return body

    def statefulset_body(self, fleet: Fleet) -> dict[str, Any]:
        assert self.lab is not None
        body = consumer_statefulset(
            self.lab, fleet.name, fleet.replicas, gated=True, record_dir=fleet.records
        )
        env = body["spec"]["template"]["spec"]["containers"][0]["env"]
        env[:] = [e for e in env if e["name"] != "KAFKA_SESSION_TIMEOUT_MS"]
        env.append({"name": "KAFKA_SESSION_TIMEOUT_MS", "value": str(SESSION_MS)})
        pod_name = {"fieldRef": {"fieldPath": "metadata.name"}}
        env.append({"name": "KAFKA_GROUP_INSTANCE_ID", "valueFrom": pod_name})
        return body

    def status(self, fleet: Fleet) -> dict[str, Any]:
        body = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", NS, "consumergroups", fleet.name
        )
        return dict(body.get("status") or {})

    def settled(self, fleet: Fleet) -> bool:
        status = self.status(fleet)
        group, rollout = status.get("group") or {}, status.get("rollout") or {}
        return (
            rollout.get("phase") == "Completed"
            and group.get("members") == fleet.replicas
            and group.get("state") == "Stable"
            and group.get("assignedPartitions") == 2 * self.args.fleet_size
        )

    def pods(self, fleet: Fleet) -> list[dict[str, Any]]:
        found = client.CoreV1Api(self.api).list_namespaced_pod(
            NS, label_selector=f"app={fleet.name}", _preload_content=False
        )
        return list(json.loads(found.data)["items"])

    def stop_all(self) -> None:
        for fleet in self.fleets:
            if fleet.producer is not None:
                fleet.producer.stop(grace=30)
        # Not while the supervisor starts one again (it holds the guard while it does).
        guard = self.busy["operator"]
        held = guard.acquire(timeout=30)
        try:
            for replica in self.replicas:
                replica.child.stop(grace=10)
        finally:
            if held:
                guard.release()
        if self.proxy is not None:
            self.proxy.__exit__(None, None, None)
        if self.kafka_cut is not None:
            self.kafka_cut.stop()
        if self.lab is not None:
            self.lab.stop()

    # -- sampling -----------------------------------------------------------------------------

    def sampler(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            for fleet in self.fleets:
                try:
                    self.sample(fleet)
                except Exception as error:  # an API outage costs samples, not the run
                    self.note_error(f"sample {fleet.name}", error)

    def sample(self, fleet: Fleet) -> None:
        status = self.status(fleet)
        pods = self.pods(fleet)
        now = time.time()
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        current = str(fleet.version)
        updated = len(live) == fleet.replicas and all(revision(p) == current for p in live)
        rollout = status.get("rollout") or {}
        self.record(
            "rollout",
            fleet.name,
            rolloutId=rollout.get("rolloutId"),
            phase=rollout.get("phase"),
            batch=rollout.get("batch"),
            batches=rollout.get("batches"),
            updated=updated,
        )
        seen = self.pods_seen.setdefault(fleet.name, {})
        uids = {p["metadata"]["uid"]: p for p in pods}
        for uid, pod in uids.items():
            if uid not in seen:
                seen[uid] = (pod["metadata"]["name"], revision(pod))
                self.record("pod_new", fleet.name, pod=seen[uid][0], uid=uid, revision=seen[uid][1])
            silent = gate_silence(pod, now)
            if silent is not None:
                self.record("gate", fleet.name, pod=seen[uid][0], uid=uid, silent=silent)
        for uid in [uid for uid in seen if uid not in uids]:
            name, rev = seen.pop(uid)
            self.record("pod_gone", fleet.name, pod=name, uid=uid, revision=rev)
        group = status.get("group") or {}
        observed = group.get("observedAt")
        fresh = isinstance(observed, str) and now - parse_rfc3339(observed) <= OBSERVE_S + 3
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        degraded = conditions.get("Degraded") or {}
        broker, sidecars = self.broker_view(fleet) if self.quiet else (None, None)
        self.record(
            "group",
            fleet.name,
            status=[group.get("members"), group.get("state")],
            broker=broker,
            fresh=fresh,
            generation=group.get("generation"),
            rebalances=group.get("rebalances"),
            degraded=degraded.get("status") == "True",
            reason=degraded.get("reason"),
            sidecars=[sidecars, fleet.replicas] if fleet.sidecar and sidecars is not None else None,
        )

    def broker_view(self, fleet: Fleet) -> tuple[list[Any] | None, int | None]:
        """(members, state) of the group as the broker says, and its sidecar members, asked
        only once the faults have stopped (a client that loses a broker mid-request can abort
        its process). Members are the application's: status.group counts no sidecar (client
        id <pod>-sidecar), though each is a member on the broker."""
        assert self.lab is not None and self.lab.broker is not None
        admin = AdminClient({**self.lab.broker.admin_settings(), "log_level": "0"})
        try:
            future = admin.describe_consumer_groups([fleet.name], request_timeout=5)[fleet.name]
            described = future.result(timeout=10)
        except Exception:
            return None, None
        finally:
            del admin
        name = described.state.name if described.state is not None else "UNKNOWN"
        sidecars = sum(1 for m in described.members if m.client_id.endswith("-sidecar"))
        # STABLE, PREPARING_REBALANCE, ...: as status.group writes them (Stable, ...).
        state = "".join(p.title() for p in name.split("_"))
        return [len(described.members) - sidecars, state], sidecars

    def supervisor(self) -> None:
        """Start again an operator replica that exited on its own, as the kubelet restarts its
        pod's container (after CrashLoopBackOff's first 10 s), and record the exit: kopf ends
        the process when its peering keep-alive meets an answer it does not retry, and without
        this the run would go on with no operator at all. A replica a fault is killing is left to
        the fault (the operator guard is held meanwhile)."""
        guard = self.busy["operator"]
        while not self.stop.wait(SUPERVISE_S):
            if not guard.acquire(blocking=False):
                continue
            try:
                for replica in self.replicas:
                    code = replica.exit_code()
                    if code is None:
                        continue
                    self.record("exit", replica=replica.label, code=code)
                    say(
                        f"t={self.now():.0f}s {replica.label} exited on its own ({code}): "
                        f"started again in {RESTART_BACKOFF_S:.0f} s"
                    )
                    if self.stop.wait(RESTART_BACKOFF_S):
                        return
                    replica.again()
            finally:
                guard.release()

    def proc_sampler(self) -> None:
        while not self.stop.wait(PROC_SAMPLE_S):
            for replica in self.replicas:
                pid = replica.pid
                if pid is None:
                    continue
                try:
                    rss = proc_rss(pid)
                    fds = len(os.listdir(f"/proc/{pid}/fd"))
                except OSError:
                    continue
                self.record("proc", replica=replica.label, pid=pid, rss=rss, fds=fds)

    def note_error(self, what: str, error: BaseException) -> None:
        text = f"{what}: {type(error).__name__}: {str(error)[:200]}"
        if text not in self.errors[-20:]:
            self.errors.append(text)

    # -- changes ------------------------------------------------------------------------------

    def change(self) -> None:
        fleet = self.rng.choice(self.fleets)
        kind = self.rng.choices(CHANGES, weights=(3, 2))[0]
        apps = client.AppsV1Api(self.api)
        if kind == "rollout":
            fleet.version += 1
            read = (
                apps.read_namespaced_stateful_set
                if fleet.kind == "StatefulSet"
                else apps.read_namespaced_deployment
            )
            body = json.loads(read(fleet.workload, NS, _preload_content=False).data)
            env = body["spec"]["template"]["spec"]["containers"][0]["env"]
            index = [e["name"] for e in env].index("APP_VERSION")
            path = f"/spec/template/spec/containers/0/env/{index}/value"
            patch = [{"op": "replace", "path": path, "value": str(fleet.version)}]
            self.record("change", fleet.name, change="rollout", revision=str(fleet.version))
            self.patch(fleet, patch)
            say(f"t={self.now():.0f}s change: {fleet.name} template -> version {fleet.version}")
            return
        size = self.args.fleet_size
        low, high = max(2, size // 2), size + size // 2
        step = self.rng.randint(1, max(1, size // 4)) * self.rng.choice((-1, 1))
        target = min(high, max(low, fleet.replicas + step))
        if target == fleet.replicas:
            target = fleet.replicas - step if low <= fleet.replicas - step <= high else target
        if target == fleet.replicas:
            return
        previous, fleet.replicas = fleet.replicas, target
        how = self.rng.choice(("subresource", "spec"))
        self.record("change", fleet.name, change="scale", replicas=target, previous=previous)
        patch = [{"op": "replace", "path": "/spec/replicas", "value": target}]
        self.patch(fleet, patch, scale=how == "subresource")
        say(f"t={self.now():.0f}s change: {fleet.name} scaled {previous} -> {target} ({how})")

    def patch(self, fleet: Fleet, patch: list[dict[str, Any]], scale: bool = False) -> None:
        apps = client.AppsV1Api(self.api)
        calls: dict[tuple[str, bool], Callable[..., Any]] = {
            ("StatefulSet", False): apps.patch_namespaced_stateful_set,
            ("StatefulSet", True): apps.patch_namespaced_stateful_set_scale,
            ("Deployment", False): apps.patch_namespaced_deployment,
            ("Deployment", True): apps.patch_namespaced_deployment_scale,
        }
        call = calls[(fleet.kind, scale)]
        deadline = time.monotonic() + 120
        while True:  # the API server may be restarting: the change is made once it answers
            try:
                call(fleet.workload, NS, patch)
                return
            except Exception as error:
                if time.monotonic() > deadline:
                    raise
                self.note_error(f"patch {fleet.name}", error)
                time.sleep(1)

    # -- faults -------------------------------------------------------------------------------

    def fault(self) -> None:
        kind, draws = draw_fault(self.rng, self.args.faults)
        self.fault_id += 1
        thread = threading.Thread(
            target=self.inject, args=(kind, draws, self.fault_id), daemon=True
        )
        thread.start()
        self.threads.append(thread)

    def inject(self, kind: str, draws: list[float], ident: int) -> None:
        lock = {
            "broker-kill": "broker",
            "broker-pause": "broker",
            "apiserver-restart": "plane",
            "etcd-pause": "plane",
            "operator-leader-kill": "operator",
            "operator-follower-kill": "operator",
            "operator-kafka-cut": "operator-kafka",
        }.get(kind)
        guard = self.busy[lock] if lock else None
        if guard is not None and not guard.acquire(blocking=False):
            return  # the same part is already down: one at a time (a quorum, a control plane)
        try:
            started = False

            def begin(what: str) -> None:
                nonlocal started
                started = True
                self.record("fault", fault=kind, phase="start", id=ident, what=what)
                say(f"t={self.now():.0f}s fault: {kind} {what}")

            try:
                getattr(self, "_" + kind.replace("-", "_"))(draws, begin)
            except Exception as error:
                self.note_error(kind, error)
                say(f"t={self.now():.0f}s fault {kind} failed: {error}")
            finally:
                if started:
                    self.record("fault", fault=kind, phase="end", id=ident)
        finally:
            if guard is not None:
                guard.release()

    def _operator_kill(
        self, leading: bool, draws: list[float], begin: Callable[[str], None]
    ) -> None:
        said = {r.label: r.leader() for r in self.replicas if r.pid is not None}
        picked = [r for r in self.replicas if said.get(r.label) == (1.0 if leading else 0.0)]
        if not picked:
            return
        replica = picked[0]
        begin(f"{replica.label} (pid {replica.pid})")
        replica.kill()
        time.sleep(2 + 18 * draws[0])
        replica.again()

    def _operator_leader_kill(self, draws: list[float], begin: Callable[[str], None]) -> None:
        self._operator_kill(True, draws, begin)

    def _operator_follower_kill(self, draws: list[float], begin: Callable[[str], None]) -> None:
        self._operator_kill(False, draws, begin)

    def _broker_kill(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.lab is not None and self.lab.broker is not None
        broker = self.lab.broker
        nodes = [node.node_id for node in broker.nodes]
        if draws[0] < 0.5:
            fleet = self.fleets[int(draws[1] * len(self.fleets))]
            node = broker.coordinator_of(fleet.name, timeout=20)
            what = f"node {node}, coordinator of {fleet.name}"
        else:
            node = nodes[int(draws[1] * len(nodes))]
            what = f"node {node}"
        begin(what)
        broker.kill_node(node)
        time.sleep(5 + 35 * draws[2])
        broker.start_node(node)

    def _broker_pause(self, draws: list[float], begin: Callable[[str], None]) -> None:
        """A broker that hangs (a long GC pause, a stalled disk): its connections stay open and
        nothing is answered, unlike a kill, whose connections are refused at once."""
        assert self.lab is not None and self.lab.broker is not None
        broker = self.lab.broker
        fleet = self.fleets[int(draws[0] * len(self.fleets))]
        node = broker.coordinator_of(fleet.name, timeout=20)
        pid = broker.node(node).pid
        if pid is None:
            return
        pause = 3 + 17 * draws[1]
        begin(f"node {node}, coordinator of {fleet.name}, {pause:.0f} s")
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            os.kill(pid, signal.SIGCONT)

    def _apiserver_restart(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.lab is not None and self.lab.plane is not None
        down = 1 + 9 * draws[0]
        begin(f"down {down:.0f} s")
        self.lab.plane.restart("kube-apiserver", down_seconds=down)

    def _etcd_pause(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.lab is not None and self.lab.plane is not None
        [etcd] = [child for child in self.lab.plane.children if child.name == "etcd"]
        pid = etcd.pid
        assert pid is not None
        pause = 3 + 12 * draws[0]
        begin(f"{pause:.0f} s")
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            os.kill(pid, signal.SIGCONT)

    def _watch_cut(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.proxy is not None
        begin("")
        cut = self.proxy.drop_watches()
        say(f"t={self.now():.0f}s   {cut} watches cut")

    def _api_errors(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.proxy is not None
        status = (409, 429, 500, 503)[int(draws[0] * 4)]
        times = 1 + int(draws[1] * 5)
        method = ("PATCH", "PUT", "GET")[int(draws[2] * 3)]
        begin(f"{times} x {status} to {method}")
        self.proxy.inject(status=status, method=method, path_regex="/apis/", times=times)
        time.sleep(10)
        self.proxy.clear()

    def _running_pod(self, fleet: Fleet, draw: float) -> str | None:
        """One of the fleet's Running pods, picked by the draw (None: none is running)."""
        running = sorted(
            p["metadata"]["name"]
            for p in self.pods(fleet)
            if (p.get("status") or {}).get("phase") == "Running"
        )
        return running[int(draw * len(running))] if running else None

    def _consumer_kill(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.lab is not None
        fleet = self.fleets[int(draws[0] * len(self.fleets))]
        pod = self._running_pod(fleet, draws[1])
        if pod is None:
            return
        pid = consumer_pid(self.lab, pod)
        if pid is None:
            return
        begin(f"{pod} (pid {pid})")
        os.kill(pid, signal.SIGKILL)

    def _operator_kafka_cut(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.kafka_cut is not None
        mode, seconds = cut_plan(draws)
        begin(f"{mode} {seconds:.0f} s")
        dropped = self.kafka_cut.cut(mode)
        say(f"t={self.now():.0f}s   {dropped} operator connections to Kafka dropped")
        try:
            time.sleep(seconds)
        finally:
            self.kafka_cut.heal()

    def _sidecar_kill(self, draws: list[float], begin: Callable[[str], None]) -> None:
        assert self.lab is not None
        fleets = [fleet for fleet in self.fleets if fleet.sidecar]
        fleet = fleets[int(draws[0] * len(fleets))]
        pod = self._running_pod(fleet, draws[1])
        if pod is None:
            return
        pid = consumer_pid(self.lab, pod, container=SIDECAR_CONTAINER)
        if pid is None:
            return
        begin(f"{pod} (pid {pid})")
        os.kill(pid, signal.SIGKILL)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        args = self.args
        started = time.time()
        try:
            self.start()
            self.t0 = time.time()
            for target in (self.sampler, self.proc_sampler, self.supervisor):
                threading.Thread(target=target, daemon=True).start()
            self.schedule(args.duration)
            self.calm_down()
        except Exception:
            traceback.print_exc()
            self.errors.append(traceback.format_exc(limit=3))
        finally:
            self.stop.set()
            ledgers = self.drain()
            self.stop_all()
        for name, ledger in ledgers.items():
            self.record("ledger", name, **ledger)
        with self.lock:
            self.checker.finish(self.now())
        return self.result(time.time() - started)

    def schedule(self, duration: float) -> None:
        args = self.args
        next_change = self.rng.expovariate(1 / args.change_every)
        next_fault = self.rng.expovariate(1 / args.fault_every)
        last_progress = 0.0
        while self.now() < duration:
            now = self.now()
            if now >= next_change:
                try:
                    self.change()
                except Exception as error:
                    self.note_error("change", error)
                next_change = now + self.rng.expovariate(1 / args.change_every)
            if now >= next_fault:
                self.fault()
                next_fault = now + self.rng.expovariate(1 / args.fault_every)
            if now - last_progress >= 30:
                last_progress = now
                self.progress()
            time.sleep(0.5)

    def progress(self) -> None:
        with self.lock:
            checker = self.checker
            pending = sum(len(f.pending) for f in checker.fleets.values())
            say(
                f"t={self.now():.0f}s faults {sum(checker.faults.values())} (active "
                f"{len(checker.active)}), changes {sum(checker.changes.values())}, rollouts "
                f"{len(checker.rollouts)} done {pending} pending, violations "
                f"{len(checker.violations)}"
            )

    def calm_down(self) -> None:
        """The faults end, then the rollouts, then status and broker must agree."""
        say(f"t={self.now():.0f}s no more faults or changes; waiting for the injected ones")
        for thread in self.threads:
            thread.join(180)
        self.quiet = True
        self.record("quiet")
        deadline = time.monotonic() + self.args.rollout_limit
        while time.monotonic() < deadline:
            with self.lock:
                pending = any(f.pending for f in self.checker.fleets.values())
            if not pending:
                break
            time.sleep(2)
        self.progress()
        say(f"t={self.now():.0f}s rollouts done; watching status against the broker")
        time.sleep(self.args.quiet)

    def drain(self) -> dict[str, dict[str, int]]:
        """The producers stopped; every delivered number processed (or the wait given up)."""
        ledgers: dict[str, dict[str, int]] = {}
        for fleet in self.fleets:
            producer = fleet.producer
            if producer is None:
                continue
            producer.stop(grace=60)
            said = delivered_so_far(producer)
            done, sent = said if said is not None else (0, 0)
            produced = set(range(done))
            files = lambda f=fleet: sorted(f.records.glob("*.tsv"))  # noqa: E731
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not produced <= set(recorded(files())):
                time.sleep(2)
            found = tally(produced, recorded(files()))
            ledgers[fleet.name] = {
                "produced": found.produced,
                "lost": len(found.lost),
                "unknown": len(found.unknown),
                "redeliveries": found.redeliveries,
                "failed_deliveries": sent - done,
            }
            if found.lost:
                say(f"{fleet.name}: lost {list(found.lost[:20])}")
        return ledgers

    def result(self, wall_s: float) -> dict[str, Any]:
        figures = self.checker.figures()
        return {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "commit": self.commit,
            "seed": self.seed,
            "duration_s": self.args.duration,
            "fleet_size": self.args.fleet_size,
            "wall_s": round(wall_s),
            "figures": figures,
            "violations": [v.__dict__ for v in self.checker.violations],
            "errors": self.errors[-20:],
            "events": len(self.events),
        }


# -- helpers ------------------------------------------------------------------------------------


def draw_fault(rng: random.Random, faults: Sequence[str]) -> tuple[str, list[float]]:
    """The next fault and its draws, taken now from the seeded generator so that a seed replays
    the same schedule whenever the fault's thread runs."""
    return rng.choice(list(faults)), [rng.random() for _ in range(4)]


def cut_plan(draws: Sequence[float]) -> tuple[str, float]:
    """How an operator-Kafka cut meets new connections (refused or blackholed) and how long."""
    mode = MODES[min(int(draws[0] * len(MODES)), len(MODES) - 1)]
    low, high = CUT_S
    return mode, low + (high - low) * draws[1]


def sidecar_secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SIDECAR_SECRET, "namespace": NS},
        "stringData": {"token": SIDECAR_TOKEN},
    }


def add_sidecar(workload: dict[str, Any], group_id: str, bootstrap: str) -> None:
    """The enforcement sidecar in the workload's pods, as the operator would inject it, but
    written in the manifest and bootstrapping straight at the brokers: injected, it would take
    the ConsumerGroup's bootstrap servers, the operator's proxies, and a cut between the
    operator and Kafka would cut the sidecars too."""
    spec = workload["spec"]["template"]["spec"]
    rendered = render_sidecar(
        spec["containers"][0],
        group_id=group_id,
        bootstrap_servers=bootstrap.split(","),
        policy=SidecarPolicy(token_secret=SIDECAR_SECRET),
    )
    spec["containers"].append(rendered.container)
    spec.setdefault("volumes", []).append(rendered.volume)


def wait_for(probe: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe():
                return
        except Exception:  # an object not there yet is "not yet"
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(1)


def create_topics(lab: Lab, topics: dict[str, int]) -> None:
    """Each topic on all three nodes, min.insync.replicas 2: one node down loses nothing."""
    admin = AdminClient({"bootstrap.servers": lab.bootstrap})
    config = {"min.insync.replicas": str(MIN_INSYNC)}
    futures = admin.create_topics(
        [NewTopic(topic, count, REPLICATION, config=config) for topic, count in topics.items()]
    )
    for future in futures.values():
        future.result(timeout=60)
    del admin


def revision(pod: dict[str, Any]) -> str:
    """The template version a pod runs (its consumer's APP_VERSION)."""
    for container in pod["spec"]["containers"]:
        for env in container.get("env") or []:
            if env["name"] == "APP_VERSION":
                return str(env.get("value"))
    return ""


def gate_silence(pod: dict[str, Any], now: float) -> float | None:
    """Seconds a pod held at its gate has gone without a sign of the operator (its hold
    refreshed), counted from the gate's start; None when the pod is not at its gate."""
    for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") != GATE_CONTAINER:
            continue
        running = (status.get("state") or {}).get("running")
        if not running or not running.get("startedAt"):
            return None
        since = parse_rfc3339(running["startedAt"])
        held = (pod["metadata"].get("annotations") or {}).get(GATE_HELD_ANNOTATION)
        try:
            since = max(since, float(held)) if held else since
        except ValueError:
            since = max(since, parse_rfc3339(held)) if held else since
        return max(0.0, now - since)
    return None


def proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip()


def plot(run: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checker = run.checker
    figure, axis = plt.subplots(figsize=(12, 4.5))
    rows = {name: index for index, name in enumerate([*FAULTS, *[f.name for f in run.fleets]])}
    end = max((event.t for event in run.events), default=1.0)
    for start, stop, kind in checker.fault_spans:
        span = max((stop if stop is not None else end) - start, 1.0)
        axis.broken_barh([(start / 60, span / 60)], (rows[kind] - 0.35, 0.7), color="tab:orange")
    for rollout in checker.rollouts:
        color = "tab:red" if rollout.faulted else "tab:green"
        axis.broken_barh(
            [(rollout.started / 60, rollout.took / 60)],
            (rows[rollout.fleet] - 0.35, 0.7),
            color=color,
            alpha=0.5,
        )
    for name, fleet in checker.fleets.items():
        for pending in fleet.pending:  # never rolled out
            axis.broken_barh(
                [(pending.at / 60, (end - pending.at) / 60)],
                (rows[name] - 0.35, 0.7),
                facecolor="none",
                edgecolor="tab:red",
                hatch="//",
            )
    for event in run.events:
        if event.kind == "change":
            marker = "v" if event.data["change"] == "rollout" else "s"
            axis.plot(event.t / 60, rows[event.fleet], marker, color="black", markersize=5)
    for violation in checker.violations:
        row = rows.get(violation.fleet, len(rows) - 1)
        axis.plot(violation.t / 60, row, "x", color="red", markersize=12, mew=2)
    axis.set_yticks(list(rows.values()), list(rows))
    axis.set_xlabel("minutes")
    axis.set_title(
        f"chaos, seed {run.seed}: faults (orange), rollouts (green; red when a fault overlapped),"
        " changes (v template, s scale), violations (x)",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def seeds_of(args: argparse.Namespace) -> list[int]:
    if args.seeds_file is None:
        return [args.seed]
    seeds = []
    for line in Path(args.seeds_file).read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            if not text.lstrip("-").isdigit():
                raise SystemExit(f"--seeds-file {args.seeds_file}: {text!r} is not a seed")
            seeds.append(int(text))
    if not seeds:
        raise SystemExit(f"--seeds-file {args.seeds_file}: no seed in it")
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    failed = 0
    for seed in seeds_of(args):
        state = Path(tempfile.mkdtemp(prefix=f"rebalancer-chaos-{seed}-"))
        run = Run(args, seed, state)
        result = run.run()
        print(table(result["figures"], run.checker.violations, seed), flush=True)
        if result["errors"]:
            print("errors (sampling or injection; not invariants):", *result["errors"], sep="\n  ")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as out:
            out.write(json.dumps(result, default=str) + "\n")
        (state / "events.jsonl").write_text(
            "".join(json.dumps(e.__dict__, default=str) + "\n" for e in run.events)
        )
        say(f"seed {seed}: result appended to {args.out}; events and logs in {state}")
        if args.png is not None:
            path = (
                args.png
                if len(seeds_of(args)) == 1
                else args.png.with_stem(f"{args.png.stem}-{seed}")
            )
            plot(run, path)
            say(f"timeline in {path}")
        failed += bool(run.checker.violations)
    return 1 if failed else 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3600, help="seconds of faults, changes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds-file", type=Path, help="seeds to replay, one a line")
    parser.add_argument("--fleet-size", type=int, default=12, help="pods of each fleet")
    parser.add_argument("--rate", type=float, default=20.0, help="messages a second, each fleet")
    parser.add_argument("--change-every", type=float, default=60.0, help="mean seconds")
    parser.add_argument("--fault-every", type=float, default=40.0, help="mean seconds")
    parser.add_argument("--rollout-limit", type=float, default=900.0, help="seconds")
    parser.add_argument("--quiet", type=float, default=30.0, help="seconds checked after")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "chaos-results.jsonl")
    parser.add_argument("--png", type=Path, help="the timeline plot")
    parser.add_argument(
        "--faults", default=",".join(FAULTS), help=f"comma-separated, of: {', '.join(FAULTS)}"
    )
    args = parser.parse_args(argv)
    args.faults = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = sorted(set(args.faults) - set(FAULTS))
    if unknown or not args.faults:
        parser.error(f"--faults: unknown {unknown or 'none given'}; known: {', '.join(FAULTS)}")
    if args.fleet_size < 2:
        parser.error("--fleet-size must be at least 2")
    if args.duration <= 0:
        parser.error("--duration must be positive")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
