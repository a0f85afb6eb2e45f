"""Kafka consumer-group rollouts three ways on one lab: Kubernetes' defaults, the best hand
configuration, and the operator; measured, repeated, and replayed on the coordinator simulator.

    .venv/bin/python bench/rollouts.py --pods 12,24 --assignors range,cooperative-sticky \\
        --scenarios cold-start,statefulset-update,deployment-update,scale-up,scale-down \\
        --jitters 'uniform(0,6)','uniform(0,20)' --repeat 3
    .venv/bin/python bench/rollouts.py --summarise     # tables and plots of the results file

On the lab (Apache Kafka; Kubernetes' own control plane, whose kube-controller-manager runs the
StatefulSet, Deployment and ReplicaSet controllers and whose kube-scheduler binds the pods; the
lab's kubelet, which runs each pod as local processes; the operator process), real
`python -m rebalancer_lab.consumer` pods run every cell of a matrix.

A cell is (scenario, N = --pods, partitions, assignor, jitter). Each cell runs every strategy;
`--repeat K` runs the whole matrix K times, interleaved (repeat 1 of every cell, then repeat 2;
within a cell its strategies back to back), so drifts in the machine's load hit the strategies
alike. Every run is appended as one JSON line to the results file (`--out`), with the date, the
command line, the git commit and the cell's keys, so a matrix too big for one sitting is run in
parts and summarised together (`--summarise`, bench/rollouts_summary.py).

Scenarios (P partitions of one topic, 2N unless --partitions says otherwise; a fresh group and
workload per run):
- cold-start: a StatefulSet of N pods from nothing; t0 = its creation;
- statefulset-update: a rolling update (a template change) of a StatefulSet of N; t0 = the patch;
- deployment-update: a rolling update of a Deployment of N;
- scale-up: a StatefulSet of N scaled to 2N; t0 = the replicas patch;
- scale-down: a StatefulSet of 2N scaled to N.
Each pod waits the cell's start jitter (the lab kubelet draws it per pod, from the
lab.rebalancer.dev/start-jitter annotation of the template) before its first container:
`--jitters` for the scenarios in `--jittered` (cold-start by default), `--jitter` for the others.
Pods that are only set-up (the N of an update before its patch, the 2N before a scale-down)
start without jitter, and the update's patch brings the jitter in with the new template: only
what t0 starts is spread. A scale-down starts nothing, so its cells have no jitter.
The strategies of one repeat of a cell draw the same delays (lab.rebalancer.dev/start-jitter-seed,
one seed per cell and repeat): side by side they meet the same spread of starts, so a draw with
a gap longer than Kafka's initial delay splits every strategy's group, not one of them.

Strategies:
- naive: Kubernetes' and the client's defaults, no operator: a StatefulSet's podManagementPolicy
  OrderedReady, a Deployment's RollingUpdate with 25 % / 25 % and no minReadySeconds; dynamic
  members with session.timeout.ms 45000 and heartbeat.interval.ms 3000 (the Kafka client's
  defaults) and the cell's partition.assignment.strategy;
- tuned: no operator; what a careful user sets by hand for the scenario (below);
- managed: tuned's consumer settings (static members where tuned has them) on a Parallel
  StatefulSet (the operator refuses OrderedReady, whose controller would wait for each gated pod
  before creating the next), the join gate in the template and a ConsumerGroup whose
  spec.policy.rollout is enabled (settleSeconds 2, everything else default). A Deployment's
  consumers take their group.instance.id from the identity slot the operator writes on each pod
  when it opens its gate (rebalancer.dev/instance-id, through the downward API), with the static
  session below; its strategy is tuned's maxSurge 100 %, maxUnavailable 0 without
  minReadySeconds, so every new pod waits at its gate at once and the operator swaps them in,
  a batch at a time, each for an old pod it deletes in the same step, whose slot it takes over
  (planning/identity_slots.py). The operator does not pace scale-downs (its planner sees no
  rollout when replicas fall and only parks the StatefulSet's partition at the new count), so a
  managed scale-down is the StatefulSet controller's own, Parallel: it differs from tuned only
  by the gate in the template and the observing operator.
Every run has a ConsumerGroup (observe-only unless managed), so every run has the operator's own
rebalance count beside the bench's.

What tuned sets, and why it is the best hand configuration known here:
- cold-start: podManagementPolicy Parallel. All N pods start within the jitter, and Kafka's
  group.initial.rebalance.delay.ms (3 s, extended by each new JoinGroup up to the rebalance
  timeout, KIP-134) takes every member that joins within 3 s of the previous one into the first
  generation. OrderedReady starts a pod only once the one before it is Ready, so joins come a
  jitter apart and split into generations. The delay itself is broker-wide and static on Apache
  Kafka (docs/apache-kafka.md), not something a group's owner sets.
- statefulset-update: static membership, group.instance.id = pod name (KIP-345), with a
  session.timeout.ms that covers a restart: at least Kafka's 45 s default, more when the jitter
  plus RESTART_OVERHEAD_S plus one heartbeat needs it; Parallel; and
  updateStrategy.rollingUpdate.maxUnavailable 25 % (MaxUnavailableStatefulSet, on by default
  since Kubernetes 1.37). A static member back within its session gets its old assignment without
  a rebalance, several at once too, so replacing a quarter at a time (Kubernetes' default
  unavailability for Deployments, and the operator's default batch) shortens the rollout at no
  rebalance; a restarting pod's partitions wait for it whatever the pace.
- deployment-update: RollingUpdate with maxSurge 100 %, maxUnavailable 0 and minReadySeconds =
  the jitter's bound + 5 s. All new pods are created at once, so their joins fall into as few
  rebalances as their spread allows; no old pod goes before a replacement is available, and
  minReadySeconds (the spread, Kafka's 3 s join window and about 2 s to start and be assigned)
  keeps the old pods' LeaveGroups out of the new pods' joining, where each would restart the
  rebalance. Static membership is no option: a Deployment's pods get new names.
- scale-up: Parallel: the N added pods start together within the jitter, where OrderedReady adds
  them one by one at a rebalance (two with cooperative-sticky) each.
- scale-down: Parallel: the N removed pods get SIGTERM together and their LeaveGroups fall into
  one rebalance, where OrderedReady removes them one at a time, each gone before the next. The
  members stay dynamic: a static member sends no LeaveGroup, so its partitions would wait a whole
  session.
Heartbeat and session keep their defaults elsewhere: a shorter heartbeat makes the existing
members rejoin sooner, which ends a rebalance sooner for late joiners, who then start another;
a shorter session only matters for crashes, and no scenario has one.

Measured from the consumers' own member reports (each carries the member's whole assignment and
the time of the event; the bench sits between the consumers and the operator and keeps a copy):
rebalances (new generations the members saw after t0), time to Stable (t0 to the last change of
ownership or generation, the group then unchanged for QUIET_S; also counted from the moment the
last pod of the final set had its consumer running, "after the last pod is ready"),
stop-the-world partition-seconds (partitions no member owned, integrated over time, after the
partition had first been owned) and unowned partition-seconds from t0 (the same plus a cold
start's wait for its first assignment). A run that does not settle within its timeout is
measured as it stands and marked. Then the coordinator simulator (rebalancer.simulation, Apache
Kafka profile, 3 s initial delay, the run's session, heartbeat, static membership and eager or
cooperative protocol) replays the pod timeline the bench saw (when each consumer started and
when each pod was deleted), so the model's prediction stands beside the broker's measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client

import rollouts_summary
from bench_labs import bench_lab, stop_on_sigterm
from rebalancer.planning.gate_templates import (
    GateOptions,
    gate_container,
    join_gate_env,
    join_gate_mount,
    join_gate_volume,
)
from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    MemberPlan,
    Scenario,
    SimulationResult,
    simulate,
)
from rebalancer.simulation.kip848_groups import run_kip848
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import (
    GATE_ANNOTATION,
    GATE_CONTAINER,
    GATE_OPEN,
    GATE_OPEN_AT_ANNOTATION,
    INSTANCE_ID_ANNOTATION,
    INSTANCE_ID_FIELD_PATH,
    GateHold,
)
from rebalancer_lab.kubelet import JITTER_ANNOTATION, JITTER_SEED_ANNOTATION
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab
from rollouts_summary import SCENARIOS, STRATEGIES

NS = "default"
REPO = Path(__file__).resolve().parent.parent
SHORT = {
    "cold-start": "cs",
    "statefulset-update": "sts",
    "deployment-update": "dep",
    "scale-up": "up",
    "scale-down": "down",
}
# "consumer": a KIP-848 group (group.protocol=consumer), whose assignor is the broker's (uniform).
ASSIGNORS = ("range", "cooperative-sticky", "consumer")
KIP848 = "consumer"
# The simulator has no range assignor; round-robin runs the same eager protocol (every member
# revokes everything on each rebalance), which is what the counts and unowned time depend on.
SIMULATED_ASSIGNOR = {"range": "round-robin", "cooperative-sticky": "cooperative-sticky"}
NO_JITTER = "0"
KAFKA_SESSION_MS = 45000  # the Kafka client's default (3.0+)
KAFKA_HEARTBEAT_MS = 3000  # the Kafka client's default
KAFKA_DELAY_MS = 3000  # group.initial.rebalance.delay.ms, the lab broker's (Kafka's default)
# The replay's gap between a member learning of a rebalance and its JoinGroup (the simulator's
# processing_ms): the lab consumer serves librdkafka's rebalance callbacks inside consume(),
# which returns as soon as one is queued, and handles its records in microseconds, so it rejoins
# at once. The simulator's default (500 ms, an application busy between polls) counted 2 fewer
# rebalances than Kafka for naive cold starts and scale-ups, whose joins come every ~3 s.
LAB_POLL_GAP_MS = 0.0
# From SIGTERM to a re-created consumer's JoinGroup, besides the jitter: the consumer's close,
# the controller re-creating the pod, the consumer starting (2 to 4 s on this 2-core machine with
# a dozen pods busy).
RESTART_OVERHEAD_S = 4.0
# Seconds from a new pod's start to its consumer's first assignment besides the join window.
JOIN_OVERHEAD_S = 2.0
# The group is taken as Stable once nothing changed for this long (three initial delays).
QUIET_S = 9.0
# Headroom per pod a controller starts one at a time (OrderedReady, a StatefulSet's rolling
# update): its jitter plus about this much to stop, start and be Ready.
SEQUENTIAL_POD_S = 3.0
PROGRESS_EVERY_S = 60.0
STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f}s] {text}", flush=True)


# -- the matrix ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    scenario: str
    pods: int  # N
    partitions: int
    assignor: str
    jitter: str  # the start jitter of the pods t0 starts
    # tuned's and managed's heartbeat.interval.ms (--heartbeat-ms); None: the client's default
    heartbeat_ms: int | None = None

    @property
    def label(self) -> str:
        jitter = "" if self.jitter == NO_JITTER else f" jitter {self.jitter}"
        beat = "" if self.heartbeat_ms is None else f" heartbeat {self.heartbeat_ms} ms"
        return f"{self.scenario} N={self.pods} P={self.partitions} {self.assignor}{beat}{jitter}"

    @property
    def replicas(self) -> tuple[int, int]:
        """The workload's replicas before t0 and after."""
        if self.scenario == "scale-up":
            return self.pods, 2 * self.pods
        if self.scenario == "scale-down":
            return 2 * self.pods, self.pods
        return self.pods, self.pods


@dataclass(frozen=True)
class Setup:
    """What one strategy sets for one cell: the workload, the consumers and the operator."""

    kind: str  # StatefulSet or Deployment
    pod_management: str  # a StatefulSet's podManagementPolicy
    static: bool  # group.instance.id = the pod's name
    session_ms: int
    heartbeat_ms: int
    managed: bool  # the join gate in the template and spec.policy.rollout enabled
    max_surge: str | None = None  # a Deployment's rollingUpdate; None: Kubernetes' 25 %
    max_unavailable: str | None = None  # a Deployment's or StatefulSet's rollingUpdate
    min_ready_seconds: int = 0
    # group.instance.id = the identity slot the operator writes on each pod when it opens its
    # gate (a managed Deployment: each new pod takes over a leaving pod's slot)
    slots: bool = False
    # What the managed pods' gate holds (GateHold): the pod (an init container) or only the
    # join (a native sidecar; the consumers start at once and wait for its file)
    gate_holds: str = "Pod"


def setup_for(
    cell: Cell, strategy: str, static_session_ms: int | None, gate_holds: str = "Pod"
) -> Setup:
    """The module docstring says what each strategy sets and why."""
    kind = "Deployment" if cell.scenario == "deployment-update" else "StatefulSet"
    naive = Setup(kind, "OrderedReady", False, KAFKA_SESSION_MS, KAFKA_HEARTBEAT_MS, False)
    if strategy == "naive":
        return naive
    static = cell.scenario == "statefulset-update"
    session = static_session(cell.jitter, static_session_ms) if static else KAFKA_SESSION_MS
    careful = replace(naive, pod_management="Parallel", static=static, session_ms=session)
    if cell.heartbeat_ms is not None:
        careful = replace(careful, heartbeat_ms=cell.heartbeat_ms)
    if strategy == "managed" and kind == "Deployment":
        # Identity slots: each new pod takes over the group.instance.id of an old pod the
        # operator retires in the same step. maxUnavailable 0 leaves every old pod to the
        # operator's swaps; maxSurge 100 % has every new pod waiting at its gate at once.
        slotted = static_session(cell.jitter, static_session_ms)
        return replace(
            careful,
            managed=True,
            gate_holds=gate_holds,
            slots=True,
            session_ms=slotted,
            max_surge="100%",
            max_unavailable="0",
        )
    if strategy == "managed":
        return replace(careful, managed=True, gate_holds=gate_holds)
    if kind == "Deployment":
        settle = math.ceil(jitter_bound(cell.jitter) + KAFKA_DELAY_MS / 1000 + JOIN_OVERHEAD_S)
        return replace(careful, max_surge="100%", max_unavailable="0", min_ready_seconds=settle)
    if static:
        return replace(careful, max_unavailable="25%")
    return careful


def static_session(jitter: str, override: int | None) -> int:
    """A session that keeps a restarting static member's place: the restart gap (the jitter and
    RESTART_OVERHEAD_S) plus one heartbeat, rounded up to 5 s, and never below Kafka's default."""
    if override is not None:
        return override
    gap = jitter_bound(jitter) + RESTART_OVERHEAD_S + KAFKA_HEARTBEAT_MS / 1000
    return max(math.ceil(gap / 5) * 5 * 1000, KAFKA_SESSION_MS)


def jitter_bound(text: str) -> float:
    """The longest start-up delay the jitter gives (a high quantile for unbounded ones)."""
    match = re.match(r"^\s*([a-z]*)\s*\(?([^)]*)\)?\s*$", text)
    if not match:
        return 0.0
    kind, params = match.group(1) or "fixed", [float(p) for p in match.group(2).split(",") if p]
    if kind in ("fixed", ""):
        return params[0] if params else 0.0
    if kind == "uniform":
        return params[1]
    if kind == "exponential":
        return 3 * params[0]
    if kind == "normal":
        return params[0] + 3 * params[1]
    if kind == "cycle":
        return max(params, default=0.0)
    return 0.0


def split_list(text: str) -> list[str]:
    """Comma-separated items; commas inside parentheses (uniform(0,6)) do not split."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    items.append(current.strip())
    return [item for item in items if item]


def cells_of(args: argparse.Namespace) -> list[Cell]:
    cells = []
    for scenario in args.scenarios:
        if scenario == "scale-down":
            jitters = [NO_JITTER]
        elif scenario in args.jittered:
            jitters = args.jitters
        else:
            jitters = [args.jitter]
        for pods in args.pods:
            partitions = args.partitions or 2 * pods
            for assignor in args.assignors:
                cells += [
                    Cell(scenario, pods, partitions, assignor, j, args.heartbeat_ms)
                    for j in jitters
                ]
    return cells


# -- the consumers' reports, kept on their way to the operator --------------------------------


@dataclass
class Report:
    at: float  # the member's own clock (the report's timestamp)
    host: str
    event: str
    generation: int
    partitions: frozenset[int]


# A pod gone from the API owns nothing, whatever its consumer last reported: a consumer killed
# before its last report got out would otherwise hold its partitions in the bench's view.
GONE = "gone"


def with_departures(reports: Sequence[Report], lives: Sequence[PodLife]) -> list[Report]:
    """The reports, and a GONE report for each pod when it left the API."""
    gone = [
        Report(life.gone_at, life.name, GONE, -1, frozenset())
        for life in lives
        if life.gone_at is not None
    ]
    return sorted([*reports, *gone], key=lambda report: report.at)


class ReportTee:
    """An HTTP endpoint the consumers report to: it keeps each report and passes it on."""

    def __init__(self, forward_to: str) -> None:
        self.forward_to = forward_to
        self.reports: dict[str, list[Report]] = {}
        self.lock = threading.Lock()
        tee = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = tee.keep_and_forward(raw)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/reports"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def keep_and_forward(self, raw: bytes) -> int:
        try:
            body = json.loads(raw)
            report = Report(
                at=float(body["timestamp"]),
                host=str(body["member"]["host"]),
                event=str(body["event"]),
                generation=int(body["generation"]),
                partitions=frozenset(int(p["partition"]) for p in body["partitions"]),
            )
            with self.lock:
                self.reports.setdefault(str(body["groupId"]), []).append(report)
        except (ValueError, KeyError, TypeError):
            pass
        request = urllib.request.Request(
            self.forward_to,
            data=raw,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=3) as answer:
                return int(answer.status)
        except Exception:
            return 202  # the operator may be busy; the copy is kept either way

    def of(self, group: str) -> list[Report]:
        with self.lock:
            return sorted(self.reports.get(group, []), key=lambda r: r.at)

    def forget(self, group: str) -> None:
        """A finished run's reports: a long matrix would otherwise keep every one."""
        with self.lock:
            self.reports.pop(group, None)


# -- the pods' timeline, as the API shows it --------------------------------------------------


@dataclass
class PodLife:
    name: str
    uid: str
    first_container_at: float | None = None  # the gate if it has one: the pod "started"
    # The consumer's container running: the pod is Ready. Behind a gate that holds only the
    # join, the moment its gate lets it join (the open seen, or the batch's release moment).
    consumer_at: float | None = None
    running_at: float | None = None  # the consumer's container running, whatever its gate
    deleted_at: float | None = None  # deletionTimestamp seen or the pod gone
    gone_at: float | None = None  # the pod gone from the API: its processes are no more
    slot: str | None = None  # the identity slot the operator gave it (rebalancer.dev/instance-id)


class PodWatcher:
    """Polls the pods of one workload a few times a second and notes when each started and went."""

    def __init__(self, api: client.CoreV1Api, workload: str) -> None:
        self.api = api
        self.workload = workload
        self.selector = f"app={workload}"
        self.pods: dict[str, PodLife] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> PodWatcher:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)

    def live(self) -> list[PodLife]:
        return [life for life in list(self.pods.values()) if life.deleted_at is None]

    def run(self) -> None:
        while not self.stopping.wait(0.25):
            try:
                raw = self.api.list_namespaced_pod(
                    NS, label_selector=self.selector, _preload_content=False
                )
                items = json.loads(raw.data)["items"]
            except Exception:
                continue
            now = time.time()
            seen = {self.note(item, now) for item in items}
            for uid, life in self.pods.items():
                if uid not in seen and life.gone_at is None:
                    life.gone_at = now
                    life.deleted_at = life.deleted_at or now

    def note(self, item: dict[str, Any], now: float) -> str:
        meta = item["metadata"]
        uid = str(meta["uid"])
        life = self.pods.setdefault(uid, PodLife(meta["name"], uid))
        status = item.get("status") or {}
        inits = status.get("initContainerStatuses") or []
        mains = status.get("containerStatuses") or []
        if life.first_container_at is None and any(_started(c) for c in inits + mains):
            life.first_container_at = now
        if life.running_at is None and any(_running(c) for c in mains):
            life.running_at = now
        annotations = meta.get("annotations") or {}
        if life.consumer_at is None and life.running_at is not None:
            if not holds_join(item):
                life.consumer_at = life.running_at
            elif annotations.get(GATE_ANNOTATION) == GATE_OPEN:
                release = _float(annotations.get(GATE_OPEN_AT_ANNOTATION)) or now
                life.consumer_at = max(life.running_at, min(release, now + 10.0), now - 0.25)
        if life.deleted_at is None and meta.get("deletionTimestamp"):
            life.deleted_at = now
        if life.slot is None:
            life.slot = (meta.get("annotations") or {}).get(INSTANCE_ID_ANNOTATION)
        return uid


def _started(container: dict[str, Any]) -> bool:
    state = container.get("state") or {}
    return "running" in state or "terminated" in state


def holds_join(pod: dict[str, Any]) -> bool:
    """The pod's gate is a native sidecar that holds only its consumer's join."""
    inits = (pod.get("spec") or {}).get("initContainers") or []
    return any(
        c.get("name") == GATE_CONTAINER and c.get("restartPolicy") == "Always" for c in inits
    )


def _float(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def _running(container: dict[str, Any]) -> bool:
    return "running" in (container.get("state") or {})


# -- workloads --------------------------------------------------------------------------------


def topic_of(cell: Cell) -> str:
    return f"rollouts-p{cell.partitions}"


def consumer_env(
    lab: Lab, cell: Cell, setup: Setup, name: str, report_url: str
) -> list[dict[str, Any]]:
    pod_name = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    env: list[dict[str, Any]] = [{"name": "POD_NAME", **pod_name}]
    if setup.static:
        env.append({"name": "KAFKA_GROUP_INSTANCE_ID", **pod_name})
    if setup.slots:
        slot = {"valueFrom": {"fieldRef": {"fieldPath": INSTANCE_ID_FIELD_PATH}}}
        env.append({"name": "KAFKA_GROUP_INSTANCE_ID", **slot})
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": lab.bootstrap,
        "KAFKA_GROUP_ID": name,  # a fresh group per run: the names are unique
        "KAFKA_TOPICS": topic_of(cell),
        "KAFKA_SESSION_TIMEOUT_MS": str(setup.session_ms),
        "KAFKA_HEARTBEAT_INTERVAL_MS": str(setup.heartbeat_ms),
        "REBALANCER_NAMESPACE": NS,
        # The ConsumerGroup resource: the operator drops reports that name another one.
        "REBALANCER_CONSUMER_GROUP": name,
        "REBALANCER_REPORT_URL": report_url,
        "REBALANCER_REPORT_INTERVAL_S": "5",
        "APP_VERSION": "1",
    }
    if cell.assignor == KIP848:
        # The broker owns session, heartbeat and assignor of a KIP-848 group; the consumer
        # drops the client's values of them (structs/kafka_properties.py).
        values["KAFKA_GROUP_PROTOCOL"] = KIP848
    else:
        values["KAFKA_PARTITION_ASSIGNMENT_STRATEGY"] = cell.assignor
    return env + [{"name": key, "value": value} for key, value in values.items()]


def workload(
    setup: Setup,
    name: str,
    env: list[dict[str, Any]],
    replicas: int,
    jitter: str,
    draw_seed: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 10,
        "containers": [
            {
                "name": "consumer",
                "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
                "command": ["python", "-m", "rebalancer_lab.consumer"],
                "env": env,
            }
        ],
    }
    if setup.managed:
        hold = GateHold(setup.gate_holds)
        spec["initContainers"] = [gate_container(GateOptions(timeout_seconds=600, hold=hold))]
        if hold is GateHold.JOIN:
            spec["volumes"] = [join_gate_volume()]
            spec["containers"][0]["volumeMounts"] = [join_gate_mount()]
            spec["containers"][0]["env"] = [*env, join_gate_env()]
    labels = {"app": name}
    annotations = jitter_annotations(jitter, draw_seed)
    template = {"metadata": {"labels": labels, "annotations": annotations}}
    body: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {**template, "spec": spec},
        "minReadySeconds": setup.min_ready_seconds,
    }
    rolling: dict[str, Any] = {"partition": 0} if setup.kind == "StatefulSet" else {}
    if setup.max_unavailable is not None:
        rolling["maxUnavailable"] = _int_or_percent(setup.max_unavailable)
    if setup.kind == "StatefulSet":
        body["serviceName"] = name
        body["podManagementPolicy"] = setup.pod_management
        body["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    else:
        if setup.max_surge is not None:
            rolling["maxSurge"] = _int_or_percent(setup.max_surge)
        body["strategy"] = {"type": "RollingUpdate"}
        if rolling:
            body["strategy"]["rollingUpdate"] = rolling
    return {
        "apiVersion": "apps/v1",
        "kind": setup.kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


def _int_or_percent(value: str) -> int | str:
    return value if value.endswith("%") else int(value)


def consumer_group(lab: Lab, cell: Cell, setup: Setup, name: str) -> dict[str, Any]:
    policy: dict[str, Any] = {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 30}}
    if setup.managed:
        policy["rollout"] = {
            "enabled": True,
            "settleSeconds": 2,
            "consumers": {
                "sessionTimeoutMs": setup.session_ms,
                "heartbeatIntervalMs": setup.heartbeat_ms,
            },
        }
    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap], "profile": "apache-kafka"},
            "subscription": {"topics": [topic_of(cell)]},
            "workload": {"kind": setup.kind, "name": name},
            "policy": policy,
        },
    }


def jitter_annotations(jitter: str, draw_seed: int | None) -> dict[str, str]:
    """The pods' start jitter; with a seed, the strategies of one repeat of a cell draw the
    same delays (the lab's kubelet seeds a generator per owner with it)."""
    annotations = {JITTER_ANNOTATION: jitter}
    if draw_seed is not None:
        annotations[JITTER_SEED_ANNOTATION] = str(draw_seed)
    return annotations


def draw_seed_of(cell: Cell, repeat: int) -> int:
    """One seed per cell and repeat, the same for every strategy of it and in every sitting,
    and for the cell run with another heartbeat, so that heartbeats compare on the same starts."""
    return zlib.crc32(f"{replace(cell, heartbeat_ms=None).label}|{repeat}".encode())


def update_patch(jitter: str, draw_seed: int | None = None) -> dict[str, Any]:
    """The rolling update: a new APP_VERSION, and the cell's jitter for the new pods."""
    container = {"name": "consumer", "env": [{"name": "APP_VERSION", "value": "2"}]}
    template = {"metadata": {"annotations": jitter_annotations(jitter, draw_seed)}}
    return {"spec": {"template": {**template, "spec": {"containers": [container]}}}}


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Run:
    cell: Cell
    strategy: str
    repeat: int
    setup: Setup
    rebalances: int
    stop_the_world_ps: float  # after each partition was first owned
    first_owned_ps: float  # before it: a cold start's wait for its first assignment
    time_to_stable_s: float  # from t0
    last_ready_s: float  # the final set's last consumer running, from t0 (0 if none started)
    slowest_start_s: float | None  # cold start: the slowest pod's first container, from t0
    operator_rebalances: int | None
    rollout: dict[str, Any]
    settled: bool
    lives: list[PodLife] = field(default_factory=list)
    t0: float = 0.0
    setup_t0: float = 0.0
    simulated: dict[str, float | int | None] = field(default_factory=dict)
    reports: list[Report] = field(default_factory=list)
    partitions_moved: int = 0
    first_start_s: float | None = None  # cold start: the first pod's first container, from t0

    @property
    def unowned_ps(self) -> float:
        return self.stop_the_world_ps + self.first_owned_ps

    @property
    def stable_after_ready_s(self) -> float:
        # The watcher sees a pod Ready up to a poll late, so a static member back in its place
        # at once can look Stable a fraction of a second before it was Ready.
        return max(self.time_to_stable_s - self.last_ready_s, 0.0)


def ownership(reports: Sequence[Report], t0: float) -> tuple[dict[str, frozenset[int]], int]:
    """Each host's partitions and the highest generation, as of t0."""
    owned: dict[str, frozenset[int]] = {}
    generation = -1
    for report in reports:
        if report.at >= t0:
            break
        owned[report.host] = report.partitions
        if report.event in ("assigned", "revoked", "lost"):
            generation = max(generation, report.generation)
    return owned, generation


def measure(
    reports: Sequence[Report], t0: float, end: float, partitions: int
) -> tuple[int, float, float, float]:
    """(rebalances, stop-the-world p.s, first-owned wait p.s, time to Stable) in [t0, end]."""
    owned, baseline = ownership(reports, t0)
    ever = set().union(*owned.values()) if owned else set()
    generations: set[int] = set()
    stw = wait = 0.0
    last_change = t0
    clock = t0

    def account(until: float) -> None:
        nonlocal stw, wait
        held = set().union(*owned.values()) if owned else set()
        span = max(until - clock, 0.0)
        for partition in range(partitions):
            if partition in held:
                continue
            if partition in ever:
                stw += span
            else:
                wait += span

    for report in reports:
        if report.at < t0 or report.at > end:
            continue
        account(report.at)
        clock = report.at
        before = owned.get(report.host)
        owned[report.host] = report.partitions
        ever |= report.partitions
        if report.event == GONE:
            continue  # the group changed when the consumer stopped or the others took over
        if report.event in ("assigned", "revoked", "lost") and report.generation > baseline:
            if report.generation not in generations:
                last_change = report.at
            generations.add(report.generation)
        if before != report.partitions and report.event != "stopped":
            last_change = report.at
        if report.event == "stopped" and before:
            last_change = report.at
    account(end)
    return len(generations), stw, wait, last_change - t0


def moved(reports: Sequence[Report], t0: float, end: float) -> int:
    """Partitions that changed hands in [t0, end]: taken by another member than the one that
    held them last. A first assignment moves nothing, and neither does an eager revoke that gives a
    member its own partitions back (its cost is in the stop-the-world partition-seconds)."""
    holder: dict[int, str] = {}
    count = 0
    for report in reports:
        if report.at > end:
            break
        for partition in report.partitions:
            last = holder.get(partition)
            if report.at >= t0 and last is not None and last != report.host:
                count += 1
            holder[partition] = report.host
    return count


def settled(reports: Sequence[Report], partitions: int, members: int, since: float) -> float | None:
    """When the group last changed, if every partition is owned by `members` hosts and nothing
    changed for QUIET_S; else None."""
    owned: dict[str, frozenset[int]] = {}
    last = since
    for report in reports:
        before = owned.get(report.host)
        owned[report.host] = report.partitions
        changed = before != report.partitions or report.event != "heartbeat"
        if report.at >= since and changed and report.event != GONE:
            last = max(last, report.at)
    holders = [host for host, parts in owned.items() if parts]
    held = set().union(*owned.values()) if owned else set()
    if len(held) != partitions or len(holders) != members:
        return None
    return last if time.time() - last >= QUIET_S else None


def last_ready(lives: Sequence[PodLife], t0: float) -> float:
    """When the last pod of the final set had its consumer running, from t0 (0: none since)."""
    ready = [life.consumer_at for life in lives if life.deleted_at is None and life.consumer_at]
    return max(max(ready, default=t0) - t0, 0.0)


# -- progress -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    repeat: int
    cell: Cell
    strategy: str


class Progress:
    """Which cell and run is going, how long the matrix has taken, and how long it will take
    (each remaining run estimated from finished runs of its scenario, N and strategy, else of
    its scenario and N, else of any)."""

    def __init__(self, plan: Sequence[Planned], cells: Sequence[Cell], repeats: int) -> None:
        self.plan = list(plan)
        self.cells = list(cells)
        self.repeats = repeats
        self.index = 0
        self.took: list[tuple[Planned, float]] = []
        self.started = time.monotonic()
        self.shown = 0.0

    def begin(self, index: int) -> None:
        self.index = index
        self.show()

    def finish(self, seconds: float) -> None:
        self.took.append((self.plan[self.index], seconds))

    def show(self) -> None:
        self.shown = time.monotonic()
        current = self.plan[self.index]
        cell = self.cells.index(current.cell) + 1
        elapsed = time.monotonic() - self.started
        say(
            f"[progress] cell {cell}/{len(self.cells)} {current.cell.label}, {current.strategy}, "
            f"run {current.repeat} of {self.repeats} (run {self.index + 1} of {len(self.plan)} "
            f"in all); elapsed {_clock(elapsed)}, ETA {self.eta()}"
        )

    def tick(self) -> None:
        if time.monotonic() - self.shown >= PROGRESS_EVERY_S:
            self.show()

    def eta(self) -> str:
        if not self.took:
            return "after the first run"
        remaining = self.plan[len(self.took) :]
        # Runs not yet finished, the current one included, less what it has taken so far.
        current = time.monotonic() - self.started - sum(seconds for _, seconds in self.took)
        total = sum(self.estimate(planned) for planned in remaining) - current
        return _clock(max(total, 0.0))

    def estimate(self, planned: Planned) -> float:
        keys: list[Callable[[Planned], tuple[Any, ...]]] = [
            lambda p: (p.cell.scenario, p.cell.pods, p.strategy),
            lambda p: (p.cell.scenario, p.cell.pods),
            lambda p: (),
        ]
        for key in keys:
            alike = [seconds for done, seconds in self.took if key(done) == key(planned)]
            if alike:
                return sum(alike) / len(alike)
        return 0.0


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s"


# -- one run -----------------------------------------------------------------------------------


class Bench:
    def __init__(self, lab: Lab, tee: ReportTee, args: argparse.Namespace) -> None:
        self.lab = lab
        self.tee = tee
        self.args = args
        assert lab.api_client is not None
        self.core = client.CoreV1Api(lab.api_client)
        self.apps = client.AppsV1Api(lab.api_client)
        self.custom = client.CustomObjectsApi(lab.api_client)
        self.progress: Progress | None = None
        self.draw_seed: int | None = None
        self.unsettled = False

    def create(self, body: dict[str, Any]) -> None:
        kind = body["kind"]
        if kind == "StatefulSet":
            self.apps.create_namespaced_stateful_set(NS, body, _preload_content=False)
        elif kind == "Deployment":
            self.apps.create_namespaced_deployment(NS, body, _preload_content=False)
        else:
            self.custom.create_namespaced_custom_object(
                "rebalancer.dev", "v1alpha1", NS, "consumergroups", body
            )

    def patch(self, kind: str, name: str, body: dict[str, Any]) -> None:
        if kind == "StatefulSet":
            self.apps.patch_namespaced_stateful_set(name, NS, body)
        else:
            self.apps.patch_namespaced_deployment(name, NS, body)

    def status(self, name: str) -> dict[str, Any]:
        body = self.custom.get_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", NS, "consumergroups", name
        )
        return dict(body.get("status") or {})

    def rollout_id(self, name: str) -> str | None:
        return (self.status(name).get("rollout") or {}).get("rolloutId")

    def completed(self, name: str, managed: bool, previous: str | None) -> Callable[[], bool]:
        """Whether the operator finished a rollout after `previous` (always, unmanaged)."""

        def check() -> bool:
            if not managed:
                return True
            rollout = self.status(name).get("rollout") or {}
            return rollout.get("rolloutId") != previous and rollout.get("phase") == "Completed"

        return check

    def wait_settled(
        self,
        watcher: PodWatcher,
        goal: tuple[int, int],
        since: float,
        done: Callable[[], bool],
        timeout: float,
    ) -> float:
        """When the group settled with `goal` = (members, partitions) and `done()` held."""
        members, partitions = goal
        name = watcher.workload
        deadline = time.time() + timeout
        shown = 0.0
        while time.time() < deadline:
            reports = with_departures(self.tee.of(name), list(watcher.pods.values()))
            at = settled(reports, partitions, members, since)
            if at is not None and done():
                return at
            if time.time() - shown > 10:
                shown = time.time()
                rollout = self.status(name).get("rollout") or {}
                phase = rollout.get("phase", "-")
                batch = f"{rollout.get('batch', '-')}/{rollout.get('batches', '-')}"
                say(f"  ... {name}: {len(reports)} reports so far, rollout {phase} {batch}")
            if self.progress is not None:
                self.progress.tick()
            time.sleep(0.5)
        say(f"  {name} did not settle within {timeout:.0f} s: measured as it stands")
        self.unsettled = True
        return time.time()

    def timeout(self, setup: Setup, started: int, jitter: str) -> float:
        """--settle-timeout, plus headroom for pods a controller starts one at a time."""
        base = float(self.args.settle_timeout)
        if setup.kind != "StatefulSet" or setup.pod_management != "OrderedReady":
            return base
        return base + started * (jitter_bound(jitter) + SEQUENTIAL_POD_S)

    def remove(self, name: str, kind: str, selector: str) -> None:
        with contextlib.suppress(client.ApiException):
            self.custom.delete_namespaced_custom_object(
                "rebalancer.dev", "v1alpha1", NS, "consumergroups", name
            )
        time.sleep(1)  # the operator hands the workload back before it goes
        try:
            if kind == "StatefulSet":
                self.apps.delete_namespaced_stateful_set(name, NS)
            else:
                self.apps.delete_namespaced_deployment(name, NS)
        except client.ApiException:
            pass
        for _ in range(240):
            raw = self.core.list_namespaced_pod(NS, label_selector=selector, _preload_content=False)
            if not json.loads(raw.data)["items"]:
                return
            time.sleep(0.5)
        say(f"  {name}: pods still there after 120 s; going on")

    def run(self, planned: Planned) -> Run:
        cell, strategy = planned.cell, planned.strategy
        setup = setup_for(cell, strategy, self.args.static_session_ms, self.args.gate_holds)
        # A fresh workload, ConsumerGroup and Kafka group per run, all of this name.
        name = f"{SHORT[cell.scenario]}-{strategy}-{uuid.uuid4().hex[:5]}"
        watcher = PodWatcher(self.core, name).start()
        self.draw_seed = draw_seed_of(cell, planned.repeat)
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        say(f"{cell.label} / {strategy}: {setup.kind} {name} (load average {load})")
        self.unsettled = False
        try:
            moments = self.act(cell, setup, watcher)
            return self.measured(planned, setup, watcher, moments)
        finally:
            watcher.stop()
            self.remove(name, setup.kind, watcher.selector)
            self.tee.forget(name)

    def act(self, cell: Cell, setup: Setup, watcher: PodWatcher) -> tuple[float, float, float]:
        """Set the workload up, settle it, and do what the scenario does: (t0, end, set-up t0)."""
        setup_t0 = time.time()
        first_end = self.set_up(cell, setup, watcher)
        if cell.scenario == "cold-start":
            return setup_t0, first_end, setup_t0
        t0, end = self.change(cell, setup, watcher)
        return t0, end, setup_t0

    def set_up(self, cell: Cell, setup: Setup, watcher: PodWatcher) -> float:
        """Creates the ConsumerGroup and the workload; returns when the group settled."""
        name = watcher.workload
        before = cell.replicas[0]
        spread_from_start = cell.scenario in ("cold-start", "scale-up")
        jitter = cell.jitter if spread_from_start else NO_JITTER
        env = consumer_env(self.lab, cell, setup, name, self.tee.url)
        since = time.time()
        self.create(consumer_group(self.lab, cell, setup, name))
        self.create(workload(setup, name, env, before, jitter, self.draw_seed))
        timeout = self.timeout(setup, before, jitter)
        finished = self.completed(name, setup.managed, None)
        return self.wait_settled(watcher, (before, cell.partitions), since, finished, timeout)

    def change(self, cell: Cell, setup: Setup, watcher: PodWatcher) -> tuple[float, float]:
        """The scenario's change to a settled workload: (t0, when the group settled again)."""
        name = watcher.workload
        before, after = cell.replicas
        say(f"  {name}: {before} members own all {cell.partitions} partitions; {cell.scenario}")
        time.sleep(2)
        if setup.managed and self.args.update_batch_size is not None:
            rollout = {"rollout": {"maxBatchSize": self.args.update_batch_size}}
            self.custom.patch_namespaced_custom_object(
                "rebalancer.dev", "v1alpha1", NS, "consumergroups", name,
                {"spec": {"policy": rollout}},
            )  # fmt: skip
            time.sleep(2)
        previous = self.rollout_id(name)
        update = cell.scenario.endswith("-update")
        t0 = time.time()
        if update:
            self.patch(setup.kind, name, update_patch(cell.jitter, self.draw_seed))
        else:
            self.patch(setup.kind, name, {"spec": {"replicas": after}})
        # The operator runs no rollout for a scale-down (see the module docstring).
        finished = self.completed(name, setup.managed and cell.scenario != "scale-down", previous)

        def done() -> bool:
            lives = watcher.live()
            ready = [life for life in lives if life.consumer_at is not None]
            if update:
                ready = [life for life in ready if (life.first_container_at or 0) > t0]
            return len(ready) == after == len(lives) and finished()

        timeout = self.timeout(setup, after if update else max(after - before, 0), cell.jitter)
        return t0, self.wait_settled(watcher, (after, cell.partitions), t0, done, timeout)

    def measured(
        self,
        planned: Planned,
        setup: Setup,
        watcher: PodWatcher,
        moments: tuple[float, float, float],
    ) -> Run:
        cell, name = planned.cell, watcher.workload
        t0, end, setup_t0 = moments
        status = self.status(name)
        lives = list(watcher.pods.values())
        reports = with_departures(self.tee.of(name), lives)
        rebalances, stw, wait, stable = measure(reports, t0, end + 0.001, cell.partitions)
        slowest = first = None
        if cell.scenario == "cold-start":
            starts = [life.first_container_at for life in lives if life.first_container_at]
            slowest = max(starts) - t0 if starts else None
            first = min(starts) - t0 if starts else None
        count = (status.get("group") or {}).get("rebalances")
        run = Run(
            cell=cell,
            strategy=planned.strategy,
            repeat=planned.repeat,
            setup=setup,
            rebalances=rebalances,
            stop_the_world_ps=stw,
            first_owned_ps=wait,
            time_to_stable_s=stable,
            last_ready_s=last_ready(lives, t0),
            slowest_start_s=slowest,
            first_start_s=first,
            operator_rebalances=count if isinstance(count, int) else None,
            rollout=dict(status.get("rollout") or {}),
            settled=not self.unsettled,
            lives=lives,
            t0=t0,
            setup_t0=setup_t0,
            reports=reports,
            partitions_moved=moved(reports, t0, end + 0.001),
        )
        say(
            f"  {name}: {rebalances} rebalances, {run.partitions_moved} partitions moved, "
            f"stop-the-world {stw:.1f} partition-s, "
            f"Stable after {stable:.1f} s ({run.stable_after_ready_s:.1f} s after the last pod "
            "was ready)"
        )
        return run


# -- Apache Kafka, simulated on the same pod timeline ---------------------------------------


def simulated(run: Run) -> dict[str, float | int | None]:
    """Kafka's coordinator model given the pods' timeline the lab measured and the run's consumer
    settings: each consumer starts when its container did, each old pod leaves when it was
    deleted (static members come back under their own instance id)."""
    settings = ConsumerSettings(
        session_timeout_ms=run.setup.session_ms,
        heartbeat_interval_ms=run.setup.heartbeat_ms,
        assignor=SIMULATED_ASSIGNOR[run.cell.assignor],  # type: ignore[arg-type]
        processing_ms=LAB_POLL_GAP_MS,
    )
    plans, baseline = member_plans(run, settings)

    def replay(members: list[MemberPlan]) -> SimulationResult:
        return simulate(
            Scenario(
                members=tuple(members),
                profile=BrokerProfile.APACHE_KAFKA,
                coordinator=CoordinatorSettings(initial_rebalance_delay_ms=KAFKA_DELAY_MS),
                consumer=settings,
                partitions=run.cell.partitions,
            )
        )

    result = replay(plans)
    # The simulator counts from the first member's start; the lab from t0.
    first_s = min((plan.start_ms or 0.0 for plan in plans), default=0.0) / 1000.0
    offset = run.t0 - run.setup_t0
    stable = result.time_to_stable_s
    stable_from_t0 = None if stable is None else max(first_s + stable - offset, 0.0)
    if run.cell.scenario == "cold-start":
        return {
            "rebalances": result.rebalance_count,
            "unowned_ps": first_s * run.cell.partitions + result.stop_the_world_partition_s,
            "time_to_stable_s": stable_from_t0,
        }
    before = replay(baseline)
    after = [r for r in result.rebalances if r.start_s + first_s >= offset]
    return {
        "rebalances": len(after),
        "unowned_ps": max(
            result.stop_the_world_partition_s - before.stop_the_world_partition_s, 0.0
        ),
        "time_to_stable_s": stable_from_t0,
    }


def member_plans(run: Run, settings: ConsumerSettings) -> tuple[list[MemberPlan], list[MemberPlan]]:
    """The members of the whole run, and of the set-up alone (for what t0 added)."""
    base = run.setup_t0
    by_name: dict[str, list[PodLife]] = {}
    for life in sorted(run.lives, key=lambda item: item.consumer_at or math.inf):
        if life.consumer_at is not None:
            by_name.setdefault(life.name, []).append(life)

    def ms(moment: float) -> float:
        return max((moment - base) * 1000.0, 0.0)

    plans: list[MemberPlan] = []
    baseline: list[MemberPlan] = []
    if run.setup.slots:
        # A slot is one static member, whichever pods carried it in turn.
        by_name = {}
        for life in sorted(run.lives, key=lambda item: item.consumer_at or math.inf):
            if life.consumer_at is not None:
                by_name.setdefault(life.slot or life.name, []).append(life)
    for name, lives in sorted(by_name.items()):
        if run.setup.static or run.setup.slots:
            first, *later = lives
            departures: list[Departure] = []
            if later and first.deleted_at is not None and later[0].consumer_at is not None:
                gap = max(later[0].consumer_at - first.deleted_at, 0.0) * 1000.0
                departures.append(Departure(ms(first.deleted_at), "leave", gap))
            plan = MemberPlan(name, ms(first.consumer_at or base), name, settings)
            plans.append(MemberPlan(name, plan.start_ms, name, settings, (*departures,)))
            baseline.append(plan)
            continue
        for index, life in enumerate(lives):
            member = f"{name}#{index}"
            start = ms(life.consumer_at or base)
            gone = life.deleted_at
            leaving = (Departure(ms(gone), "leave"),) if gone is not None else ()
            plans.append(MemberPlan(member, start, None, settings, leaving))
            if (life.consumer_at or 0) < run.t0:
                baseline.append(MemberPlan(member, start, None, settings))
    return plans, baseline


# -- the results file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    command: str
    commit: str
    dirty: bool  # uncommitted changes under operator/ or bench/ when the run started


def provenance() -> Provenance:
    def git(*words: str) -> str:
        try:
            done = subprocess.run(
                ["git", *words], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip()

    return Provenance(
        command=shlex.join([Path(sys.executable).name, *sys.argv]),
        commit=git("rev-parse", "HEAD") or "unknown",
        dirty=bool(git("status", "--porcelain", "--", "operator", "bench")),
    )


def record(run: Run, origin: Provenance, wall_s: float, raw: Path | None) -> dict[str, Any]:
    """One run as one line of the results file."""
    return {
        "date": datetime.fromtimestamp(run.t0, UTC).isoformat(timespec="seconds"),
        **asdict(origin),
        "cell": asdict(run.cell),
        "strategy": run.strategy,
        "repeat": run.repeat,
        "setup": asdict(run.setup),
        "measured": {
            "rebalances": run.rebalances,
            "time_to_stable_s": round(run.time_to_stable_s, 3),
            "stable_after_ready_s": round(run.stable_after_ready_s, 3),
            "last_ready_s": round(run.last_ready_s, 3),
            "stop_the_world_ps": round(run.stop_the_world_ps, 2),
            "unowned_ps": round(run.unowned_ps, 2),
            "partitions_moved": run.partitions_moved,
            "settled": run.settled,
            "operator_rebalances": run.operator_rebalances,
            "slowest_start_s": _rounded(run.slowest_start_s),
            "first_start_s": _rounded(run.first_start_s),
            "plan": run.rollout.get("plan"),
            "plan_cost": run.rollout.get("planCost"),
            "runner_up": run.rollout.get("runnerUp"),
            "runner_up_cost": run.rollout.get("runnerUpCost"),
            "join_window_s": KAFKA_DELAY_MS / 1000.0,
            "batches": run.rollout.get("batches"),
            "rollout_phase": run.rollout.get("phase"),
        },
        "simulated": {
            key: round(value, 3) if isinstance(value, float) else value
            for key, value in run.simulated.items()
        },
        "wall_s": round(wall_s, 1),
        "load": [round(value, 2) for value in os.getloadavg()],
        "raw": None if raw is None else str(raw),
        "model_poll_gap_ms": LAB_POLL_GAP_MS,
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def append_line(path: Path, line: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())


def keep_raw(run: Run, state: Path) -> Path:
    """The run's reports and pod timeline, for a closer look (the results file stays small)."""
    folder = state / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SHORT[run.cell.scenario]}-{run.cell.pods}-{run.strategy}-{run.t0:.0f}.json"
    path.write_text(json.dumps(asdict(run), default=list))
    return path


# -- the matrix, run --------------------------------------------------------------------------


def plan_of(cells: Sequence[Cell], strategies: Sequence[str], repeats: int) -> list[Planned]:
    """Interleaved: each repeat goes through every cell, each cell's strategies back to back."""
    return [
        Planned(repeat, cell, strategy)
        for repeat in range(1, repeats + 1)
        for cell in cells
        for strategy in strategies
    ]


def run_matrix(bench: Bench, plan: Sequence[Planned], progress: Progress, state: Path) -> int:
    """Runs the plan, appending each run to the results file; returns how many runs failed."""
    origin = provenance()
    failed = 0
    for index, planned in enumerate(plan):
        progress.begin(index)
        began = time.monotonic()
        try:
            run = bench.run(planned)
            run.simulated = replayed(run)
        except Exception as exc:
            # One broken run must not cost the rest of a long matrix; it leaves no line.
            failed += 1
            say(f"  run failed: {exc!r}\n{traceback.format_exc()}")
            progress.finish(time.monotonic() - began)
            continue
        wall = time.monotonic() - began
        progress.finish(wall)
        append_line(bench.args.out, record(run, origin, wall, keep_raw(run, state)))
    return failed


# KIP-848's broker default group.consumer.heartbeat.interval.ms: the lab broker keeps it.
KIP848_HEARTBEAT_MS = 5000.0
# Scenarios whose KIP-848 runs the model replays: it takes members joining, not leaving.
KIP848_REPLAYED = ("cold-start", "scale-up")


def simulated_kip848(run: Run) -> dict[str, float | int | None]:
    """The KIP-848 group model given the pods' timeline: the set-up's members in the group at
    t0, each later consumer joining when its container started."""
    started = [life.consumer_at for life in run.lives if life.consumer_at is not None]
    members = sum(1 for moment in started if moment < run.t0)
    joins = sorted((moment - run.t0) * 1000.0 for moment in started if moment >= run.t0)
    runs = [
        run_kip848(
            members=members,
            joins_ms=joins,
            partitions=run.cell.partitions,
            heartbeat_ms=KIP848_HEARTBEAT_MS,
            seed=seed,
        )
        for seed in (1, 2, 3)
    ]
    return {
        "rebalances": round(statistics.median(r.rebalances for r in runs)),
        "unowned_ps": statistics.fmean(r.unowned_ps for r in runs),
        "time_to_stable_s": statistics.fmean(r.stable_s for r in runs),
    }


def replayed(run: Run) -> dict[str, float | int | None]:
    if run.cell.assignor == KIP848:
        if run.cell.scenario not in KIP848_REPLAYED:
            return {}  # the KIP-848 model takes joins only
        return simulated_kip848(run)
    try:
        return simulated(run)
    except ValueError as exc:  # a timeline the simulator refuses: the measurement still counts
        say(f"  simulator replay refused the timeline: {exc}")
        return {}


def load_raw(path: Path) -> Run:
    """A run as keep_raw wrote it."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    fields = {key: raw[key] for key in raw if key in {f.name for f in dataclass_fields(Run)}}
    fields["cell"] = Cell(**raw["cell"])
    fields["setup"] = Setup(**raw["setup"])
    fields["lives"] = [PodLife(**life) for life in raw.get("lives") or ()]
    fields["reports"] = [
        Report(r["at"], r["host"], r["event"], r["generation"], frozenset(r["partitions"]))
        for r in raw.get("reports") or ()
    ]
    return Run(**fields)


def replay_file(path: Path) -> int:
    """Recompute the model's replay of every line of a results file from its raw run, in place
    (lines whose raw file is gone keep what they had); the measurements are not touched."""
    lines = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text]
    replayed_count = 0
    for line in lines:
        raw = line.get("raw")
        if not raw or not Path(raw).exists():
            continue
        run = load_raw(Path(raw))
        line["simulated"] = {
            key: round(value, 3) if isinstance(value, float) else value
            for key, value in replayed(run).items()
        }
        line["model_poll_gap_ms"] = LAB_POLL_GAP_MS
        replayed_count += 1
    path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    say(f"{replayed_count} of {len(lines)} line(s) of {path} replayed on the model again")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.summarise is not None:
        return rollouts_summary.summarise(args.summarise or [args.out], args.plots)
    if args.replay:
        return replay_file(args.out)
    cells = cells_of(args)
    plan = plan_of(cells, args.strategies, args.repeat)
    say(
        f"{len(cells)} cell(s) x {len(args.strategies)} strateg(ies) x {args.repeat} repeat(s) "
        f"= {len(plan)} runs; results appended to {args.out}"
    )
    lab = bench_lab(args.state_dir, "rebalancer-bench-rollouts-", KAFKA_DELAY_MS)
    state = lab.config.state_dir
    stop_on_sigterm()
    tee = ReportTee(lab.report_url)
    tee.start()
    try:
        # Each workload's template names its own jitter; pods without one start at once.
        lab.start(fleet=False, pods=True, jitter=NO_JITTER)
        for partitions in sorted({cell.partitions for cell in cells}):
            asyncio.run(ensure_topic(lab.bootstrap, f"rollouts-p{partitions}", partitions))
        say(f"lab up in {state}: Apache Kafka at {lab.bootstrap}, operator reports via {tee.url}")
        bench = Bench(lab, tee, args)
        bench.progress = Progress(plan, cells, args.repeat)
        failed = run_matrix(bench, plan, bench.progress, state)
    finally:
        lab.stop()
        tee.stop()
    say(f"{len(plan) - failed} run(s) appended to {args.out}; {failed} failed; raw data in {state}")
    rollouts_summary.summarise([args.out], args.plots)
    return 1 if failed else 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    listed = parser.add_argument
    listed("--pods", default="12", help="N, comma-separated for several (e.g. 12,24)")
    listed("--partitions", type=int, default=None, help="partitions of the topic (default 2N)")
    listed("--scenarios", default=",".join(SCENARIOS), help=f"any of {', '.join(SCENARIOS)}")
    listed("--strategies", default=",".join(STRATEGIES), help=f"any of {', '.join(STRATEGIES)}")
    listed("--assignors", default="cooperative-sticky", help=f"any of {', '.join(ASSIGNORS)}")
    listed(
        "--jitters",
        default=None,
        help="pod start jitters of the --jittered scenarios, one cell each, comma-separated "
        "(e.g. 'uniform(0,6)','uniform(0,20)'; default: --jitter)",
    )
    listed("--jittered", default="cold-start", help="scenarios that take every --jitters value")
    listed("--jitter", default="uniform(0,6)", help="pod start jitter of the other scenarios")
    listed("--repeat", type=int, default=1, help="runs per cell and strategy, interleaved")
    listed("--out", type=Path, default=Path(__file__).with_name("rollouts-results.jsonl"))
    listed(
        "--summarise",
        nargs="*",
        type=Path,
        default=None,
        metavar="RESULTS",
        help="run nothing: summarise these results files (default: --out) and write the plots",
    )
    listed(
        "--plots",
        default=str(Path(__file__).with_name("rollouts")),
        help="plot path prefix: PREFIX-rebalances.png, PREFIX-stable.png, PREFIX-wall.png, "
        "PREFIX-partition-seconds.png ('' for none)",
    )
    listed(
        "--static-session-ms",
        type=int,
        default=None,
        help="session timeout of tuned and managed static members (default: one that covers a "
        "restart, at least 45000)",
    )
    listed(
        "--settle-timeout",
        type=float,
        default=300.0,
        help="seconds a phase may take to settle before it is measured as it stands (plus "
        "headroom for pods started one at a time)",
    )
    listed(
        "--update-batch-size",
        type=int,
        default=None,
        help="maxBatchSize of managed rollouts (default: the operator's)",
    )
    listed(
        "--gate-holds",
        choices=[hold.value for hold in GateHold],
        default=GateHold.POD.value,
        help="what the managed pods' gate holds: the pod (an init container) or only the join "
        "(a native sidecar; the consumers start at once and wait for its file)",
    )
    listed(
        "--heartbeat-ms",
        type=int,
        default=None,
        help="heartbeat.interval.ms of tuned's and managed's classic consumers, a cell of its own "
        "(default: the client's, 3000; naive keeps it; a KIP-848 group's is the broker's)",
    )
    listed("--state-dir", type=Path, default=None, help="the lab's state and logs (default: tmp)")
    listed(
        "--replay",
        action="store_true",
        help="run nothing: replay each run of --out on the coordinator model again, from the raw "
        "run files the lines name, and rewrite the model's figures in place",
    )
    args = parser.parse_args(argv)
    args.pods = [int(pods) for pods in split_list(args.pods)]
    args.plots = Path(args.plots) if args.plots else None
    args.jitters = split_list(args.jitters) if args.jitters is not None else [args.jitter]
    for option, allowed in (
        ("scenarios", SCENARIOS),
        ("strategies", STRATEGIES),
        ("assignors", ASSIGNORS),
        ("jittered", SCENARIOS),
    ):
        values = split_list(getattr(args, option))
        unknown = [value for value in values if value not in allowed]
        if unknown:
            parser.error(f"--{option}: unknown {', '.join(unknown)}; use any of {allowed}")
        setattr(args, option, values)
    if args.repeat < 1 or any(pods < 1 for pods in args.pods):
        parser.error("--repeat and --pods must be at least 1")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
