"""Naive Kubernetes rollouts against rollouts managed by the operator, side by side in one run.

    .venv/bin/python bench/rollouts.py --pods 12 --partitions 24 --jitter 'uniform(0,6)'

On the lab (Apache Kafka; Kubernetes' own control plane, whose kube-controller-manager runs the
StatefulSet, Deployment and ReplicaSet controllers and whose kube-scheduler binds the pods; the
lab's kubelet, which runs each pod as local processes; the operator process), real
`python -m rebalancer.lab.consumer` pods run each scenario twice:

- naive: a plain StatefulSet or Deployment, no gate, no rollout policy: what Kubernetes does;
- managed: the same workload with the join gate in its template and a ConsumerGroup whose
  spec.policy.rollout is enabled, so the operator batches the pods' joins.

Scenarios: cold-start (a StatefulSet of N pods from nothing), statefulset-update (a rolling
update of a StatefulSet whose consumers are static members, group.instance.id = pod name) and
deployment-update (a rolling update of a Deployment of dynamic members) and scale-up (a
StatefulSet of N dynamic members scaled to 2N). Pods start after the kubelet's jitter,
re-created and added pods too.

Measured from the consumers' own member reports (each carries the member's whole assignment and
the time of the event; the bench sits between the consumers and the operator and keeps a copy):
rebalances (new generations the members saw), stop-the-world partition-seconds (partitions no
member owned, integrated over time, after the partition had first been owned: a cold start's
wait for its first assignment is shown apart), and time to Stable (until the last change of
ownership or generation). Then the coordinator simulator replays the same pod timeline (when
each consumer started and when each pod was deleted, as the bench saw them) on the coordinator
model, so the model's prediction stands beside the broker's measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import signal
import socket
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client

from rebalancer.lab.producer import ensure_topic
from rebalancer.lab.running import Lab, LabConfig
from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.simulation import (
    ConsumerSettings,
    CoordinatorSettings,
    Departure,
    MemberPlan,
    Scenario,
    SimulationResult,
    simulate,
)
from rebalancer.structs.brokers import BrokerProfile

NS = "default"
TOPIC = "rollouts"
SCENARIOS = ("cold-start", "statefulset-update", "deployment-update", "scale-up")
STRATEGIES = ("naive", "managed")
SESSION_MS = 6000  # dynamic members: Kafka's group.min.session.timeout.ms
# From SIGTERM to a re-created consumer's JoinGroup, besides the jitter: the consumer's close,
# the controller re-creating the pod, the interpreter and confluent-kafka starting (measured
# 2 to 4 s on this 2-core machine with a dozen pods busy).
RESTART_OVERHEAD_S = 4.0
# The group is taken as Stable once nothing changed for this long (three initial delays).
QUIET_S = 9.0
KAFKA_SESSION_MS = 45000  # Kafka 3.0+ default
KAFKA_DELAY_MS = 3000  # group.initial.rebalance.delay.ms default
STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {text}", flush=True)


# -- the consumers' reports, kept on their way to the operator --------------------------------


@dataclass
class Report:
    at: float  # the member's own clock (the report's timestamp)
    host: str
    event: str
    generation: int
    partitions: frozenset[int]


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
                status = tee.keep_and_forward(raw, dict(self.headers))
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

    def keep_and_forward(self, raw: bytes, headers: dict[str, str]) -> int:
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


# -- the pods' timeline, as the API shows it --------------------------------------------------


@dataclass
class PodLife:
    name: str
    uid: str
    first_container_at: float | None = None  # the gate if it has one: the pod "started"
    consumer_at: float | None = None  # the consumer's container running
    deleted_at: float | None = None  # deletionTimestamp seen or the pod gone


class PodWatcher:
    """Polls the pods of one workload a few times a second and notes when each started and went."""

    def __init__(self, api: client.CoreV1Api, selector: str) -> None:
        self.api = api
        self.selector = selector
        self.pods: dict[str, PodLife] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> PodWatcher:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)

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
            seen = set()
            for item in items:
                meta = item["metadata"]
                uid = meta["uid"]
                seen.add(uid)
                life = self.pods.setdefault(uid, PodLife(meta["name"], uid))
                status = item.get("status") or {}
                inits = status.get("initContainerStatuses") or []
                mains = status.get("containerStatuses") or []
                if life.first_container_at is None and any(_started(c) for c in inits + mains):
                    life.first_container_at = now
                if life.consumer_at is None and any(_running(c) for c in mains):
                    life.consumer_at = now
                if life.deleted_at is None and meta.get("deletionTimestamp"):
                    life.deleted_at = now
            for uid, life in self.pods.items():
                if uid not in seen and life.deleted_at is None:
                    life.deleted_at = now


def _started(container: dict[str, Any]) -> bool:
    state = container.get("state") or {}
    return "running" in state or "terminated" in state


def _running(container: dict[str, Any]) -> bool:
    return "running" in (container.get("state") or {})


# -- workloads --------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def consumer_env(
    lab: Lab, name: str, group: str, session_ms: int, static: bool, report_url: str
) -> list[dict[str, Any]]:
    pod_name = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    env: list[dict[str, Any]] = [{"name": "POD_NAME", **pod_name}]
    if static:
        env.append({"name": "KAFKA_GROUP_INSTANCE_ID", **pod_name})
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": lab.bootstrap,
        "KAFKA_GROUP_ID": group,
        "KAFKA_TOPICS": TOPIC,
        "KAFKA_SESSION_TIMEOUT_MS": str(session_ms),
        "KAFKA_HEARTBEAT_INTERVAL_MS": str(min(session_ms // 3, 3000)),
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
        "REBALANCER_NAMESPACE": NS,
        # The ConsumerGroup resource: the operator drops reports that name another one.
        "REBALANCER_CONSUMER_GROUP": name,
        "REBALANCER_REPORT_URL": report_url,
        "REBALANCER_REPORT_INTERVAL_S": "5",
        "APP_VERSION": "1",
    }
    return env + [{"name": key, "value": value} for key, value in values.items()]


def workload(
    kind: str, name: str, env: list[dict[str, Any]], replicas: int, gated: bool
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 10,
        "containers": [
            {
                "name": "consumer",
                "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
                "command": ["python", "-m", "rebalancer.lab.consumer"],
                "env": env,
            }
        ],
    }
    if gated:
        spec["initContainers"] = [gate_container(GateOptions(timeout_seconds=600))]
    labels = {"app": name}
    body: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": spec},
    }
    if kind == "StatefulSet":
        body["serviceName"] = name
        body["podManagementPolicy"] = "Parallel"
        body["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": body,
    }


def consumer_group(
    lab: Lab,
    name: str,
    group: str,
    kind: str,
    managed: bool,
    session_ms: int,
) -> dict[str, Any]:
    policy: dict[str, Any] = {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 30}}
    if managed:
        policy["rollout"] = {
            "enabled": True,
            "settleSeconds": 2,
            "consumers": {
                "sessionTimeoutMs": session_ms,
                "heartbeatIntervalMs": min(session_ms // 3, 3000),
            },
        }

    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupId": group,
            "kafka": {"bootstrapServers": [lab.bootstrap], "profile": "apache-kafka"},
            "subscription": {"topics": [TOPIC]},
            "workload": {"kind": kind, "name": name},
            "policy": policy,
        },
    }


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Measured:
    scenario: str
    strategy: str
    pods: int
    partitions: int
    rebalances: int
    stop_the_world_ps: float  # after each partition was first owned
    first_owned_ps: float  # before it: a cold start's wait for its first assignment
    time_to_stable_s: float
    slowest_start_s: float | None  # cold start: the slowest pod's first container, from t0
    join_window_s: float
    operator_rebalances: int | None
    rollout: dict[str, Any]
    settled: bool
    lives: list[PodLife] = field(default_factory=list)
    t0: float = 0.0
    setup_t0: float = 0.0
    kafka: dict[str, float | int | None] = field(default_factory=dict)
    reports: list[Report] = field(default_factory=list)

    @property
    def unowned_ps(self) -> float:
        return self.stop_the_world_ps + self.first_owned_ps


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


def settled(reports: Sequence[Report], partitions: int, members: int, since: float) -> float | None:
    """When the group last changed, if every partition is owned by `members` hosts and nothing
    changed for QUIET_S; else None."""
    owned: dict[str, frozenset[int]] = {}
    last = since
    for report in reports:
        before = owned.get(report.host)
        owned[report.host] = report.partitions
        if report.at >= since and (before != report.partitions or report.event != "heartbeat"):
            last = max(last, report.at)
    holders = [host for host, parts in owned.items() if parts]
    held = set().union(*owned.values()) if owned else set()
    if len(held) != partitions or len(holders) != members:
        return None
    return last if time.time() - last >= QUIET_S else None


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

    def status(self, name: str) -> dict[str, Any]:
        body = self.custom.get_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", NS, "consumergroups", name
        )
        return dict(body.get("status") or {})

    def wait_settled(
        self,
        group: str,
        name: str,
        since: float,
        members: int,
        done: Callable[[], bool] = lambda: True,
    ) -> float:
        timeout = self.args.settle_timeout
        deadline = time.time() + timeout
        shown = 0.0
        while time.time() < deadline:
            reports = self.tee.of(group)
            at = settled(reports, self.args.partitions, members, since)
            if at is not None and done():
                return at
            if time.time() - shown > 10:
                shown = time.time()
                rollout = self.status(name).get("rollout") or {}
                phase = rollout.get("phase", "-")
                batch = f"{rollout.get('batch', '-')}/{rollout.get('batches', '-')}"
                say(f"  ... {name}: {len(reports)} reports so far, rollout {phase} {batch}")
            time.sleep(0.5)
        say(f"  {name} did not settle within {timeout:.0f} s: measured as it stands")
        self.unsettled = True
        return time.time()

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
        for _ in range(120):
            raw = self.core.list_namespaced_pod(NS, label_selector=selector, _preload_content=False)
            if not json.loads(raw.data)["items"]:
                return
            time.sleep(0.5)

    def run(self, scenario: str, strategy: str) -> Measured:
        args = self.args
        managed = strategy == "managed"
        kind = "Deployment" if scenario == "deployment-update" else "StatefulSet"
        static = scenario == "statefulset-update"
        session_ms = args.static_session_ms if static else SESSION_MS
        short = {
            "cold-start": "cs",
            "statefulset-update": "sts",
            "deployment-update": "dep",
            "scale-up": "up",
        }
        name = f"{short[scenario]}-{strategy}"
        group = f"{name}-{uuid.uuid4().hex[:6]}"  # a fresh group per run
        selector = f"app={name}"
        env = consumer_env(self.lab, name, group, session_ms, static, self.tee.url)
        body = workload(kind, name, env, args.pods, gated=managed)
        watcher = PodWatcher(self.core, selector).start()
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        say(
            f"{scenario} / {strategy}: {kind} {name}, {args.pods} pods, group {group} "
            f"(load average {load})"
        )
        self.unsettled = False
        setup_t0 = time.time()
        self.create(consumer_group(self.lab, name, group, kind, managed, session_ms))
        self.create(body)

        def completed(previous: str | None = None) -> Callable[[], bool]:
            def check() -> bool:
                if not managed:
                    return True
                rollout = self.status(name).get("rollout") or {}
                fresh = rollout.get("rolloutId") != previous
                return fresh and rollout.get("phase") == "Completed"

            return check

        first_end = self.wait_settled(group, name, setup_t0, args.pods, completed())
        t0 = setup_t0
        members = args.pods
        if scenario == "scale-up":
            say(f"  {name}: {args.pods} members own all {args.partitions} partitions; scaling")
            time.sleep(2)
            previous = (self.status(name).get("rollout") or {}).get("rolloutId")
            members = 2 * args.pods
            t0 = time.time()
            self.apps.patch_namespaced_stateful_set(name, NS, {"spec": {"replicas": members}})

            def scaled() -> bool:
                lives = [life for life in watcher.pods.values() if life.deleted_at is None]
                running = [life for life in lives if life.consumer_at is not None]
                return len(running) == members == len(lives) and completed(previous)()

            end_at = self.wait_settled(group, name, t0, members, scaled)
        elif scenario != "cold-start":
            say(f"  {name}: {args.pods} members own all {args.partitions} partitions; updating")
            time.sleep(2)
            if managed and args.update_batch_size is not None:
                rollout = {"rollout": {"maxBatchSize": args.update_batch_size}}
                self.custom.patch_namespaced_custom_object(
                    "rebalancer.dev", "v1alpha1", NS, "consumergroups", name,
                    {"spec": {"policy": rollout}},
                )  # fmt: skip
                time.sleep(2)
            previous = (self.status(name).get("rollout") or {}).get("rolloutId")
            t0 = time.time()
            patch = {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "consumer", "env": [{"name": "APP_VERSION", "value": "2"}]}
                            ]
                        }
                    }
                }
            }
            if kind == "StatefulSet":
                self.apps.patch_namespaced_stateful_set(name, NS, patch)
            else:
                self.apps.patch_namespaced_deployment(name, NS, patch)

            def updated() -> bool:
                lives = [life for life in watcher.pods.values() if life.deleted_at is None]
                fresh = [
                    life
                    for life in lives
                    if life.first_container_at and life.first_container_at > t0
                ]
                return len(fresh) == args.pods == len(lives) and completed(previous)()

            end_at = self.wait_settled(group, name, t0, args.pods, updated)
        else:
            end_at = first_end
        end = end_at + 0.001
        status = self.status(name)
        reports = self.tee.of(group)
        rebalances, stw, wait, stable = measure(reports, t0, end, args.partitions)
        lives = list(watcher.pods.values())
        slowest = None
        if scenario == "cold-start":
            starts = [life.first_container_at for life in lives if life.first_container_at]
            slowest = max(starts) - t0 if starts else None
        window = KAFKA_DELAY_MS / 1000.0
        operator_count = (status.get("group") or {}).get("rebalances")
        measured = Measured(
            scenario=scenario,
            strategy=strategy,
            pods=members,
            partitions=args.partitions,
            rebalances=rebalances,
            stop_the_world_ps=stw,
            first_owned_ps=wait,
            time_to_stable_s=stable,
            slowest_start_s=slowest,
            join_window_s=window,
            operator_rebalances=operator_count if isinstance(operator_count, int) else None,
            rollout=dict(status.get("rollout") or {}),
            settled=not self.unsettled,
            t0=t0,
            setup_t0=setup_t0,
        )
        watcher.stop()
        measured.lives = lives
        measured.reports = reports
        say(
            f"  {name}: {rebalances} rebalances, stop-the-world {stw:.1f} partition-s, "
            f"Stable after {stable:.1f} s"
            + (f" (slowest pod started at {slowest:.1f} s)" if slowest is not None else "")
        )
        self.remove(name, kind, selector)
        return measured


# -- Apache Kafka, simulated on the same pod timeline ---------------------------------------


def kafka_figures(run: Measured) -> dict[str, float | int | None]:
    """Kafka's coordinator model (3 s initial delay, 45 s sessions, cooperative-sticky) given the
    pods' timeline the lab measured: each consumer starts when its container did, each old pod
    leaves when it was deleted (static members come back under their own instance id)."""
    base = run.setup_t0
    static = run.scenario == "statefulset-update"
    by_name: dict[str, list[PodLife]] = {}
    for life in sorted(run.lives, key=lambda item: item.consumer_at or math.inf):
        if life.consumer_at is not None:
            by_name.setdefault(life.name, []).append(life)
    settings = ConsumerSettings(
        session_timeout_ms=KAFKA_SESSION_MS,
        heartbeat_interval_ms=3000,
        assignor="cooperative-sticky",
    )

    def ms(moment: float) -> float:
        return max((moment - base) * 1000.0, 0.0)

    plans: list[MemberPlan] = []
    baseline: list[MemberPlan] = []
    for name, lives in sorted(by_name.items()):
        if static:
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

    def scenario(members: list[MemberPlan]) -> SimulationResult:
        return simulate(
            Scenario(
                members=tuple(members),
                profile=BrokerProfile.APACHE_KAFKA,
                coordinator=CoordinatorSettings(initial_rebalance_delay_ms=KAFKA_DELAY_MS),
                consumer=settings,
                partitions=run.partitions,
            )
        )

    result = scenario(plans)
    # The simulator counts from the first member's start; the lab from t0.
    first_s = min((plan.start_ms or 0.0 for plan in plans), default=0.0) / 1000.0
    offset = run.t0 - base
    stable = result.time_to_stable_s
    stable_from_t0 = None if stable is None else max(first_s + stable - offset, 0.0)
    if run.scenario == "cold-start":
        return {
            "rebalances": result.rebalance_count,
            "unowned_ps": first_s * run.partitions + result.stop_the_world_partition_s,
            "time_to_stable_s": stable_from_t0,
        }
    before = scenario(baseline)
    after = [r for r in result.rebalances if r.start_s + first_s >= offset]
    return {
        "rebalances": len(after),
        "unowned_ps": max(
            result.stop_the_world_partition_s - before.stop_the_world_partition_s, 0.0
        ),
        "time_to_stable_s": stable_from_t0,
    }


# -- report -----------------------------------------------------------------------------------


def _number(figures: dict[str, float | int | None], key: str) -> float:
    return float(figures.get(key) or 0)


def ratio(managed: float, naive: float) -> str:
    if naive == 0:
        return "n/a" if managed == 0 else "inf"
    return f"{managed / naive:.2f}"


def table(runs: Sequence[Measured]) -> str:
    lines = [
        "| scenario | strategy | rebalances (generations) | operator's count | stop-the-world "
        "partition-s | unowned partition-s from t0 | time to Stable (s) | "
        "Kafka sim: rebalances | Kafka sim: unowned partition-s from t0 | "
        "Kafka sim: time to Stable (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        kafka = run.kafka
        stable = kafka.get("time_to_stable_s")
        lines.append(
            f"| {run.scenario} | {run.strategy} | {run.rebalances} | "
            f"{'-' if run.operator_rebalances is None else run.operator_rebalances} | "
            f"{run.stop_the_world_ps:.1f} | {run.stop_the_world_ps + run.first_owned_ps:.1f} | "
            f"{run.time_to_stable_s:.1f}{'' if run.settled else ' (did not settle)'} | "
            f"{kafka.get('rebalances', '-')} | "
            f"{_number(kafka, 'unowned_ps'):.1f} | "
            f"{'-' if stable is None else f'{float(stable):.1f}'} |"
        )
    return "\n".join(lines)


def ratios(runs: Sequence[Measured]) -> str:
    lines = [
        "| scenario | rebalances managed/naive | stop-the-world managed/naive | unowned from t0 "
        "managed/naive | time to Stable managed/naive | Kafka sim: rebalances | Kafka sim: "
        "unowned from t0 |",
        "|---|---|---|---|---|---|---|",
    ]
    by = {(run.scenario, run.strategy): run for run in runs}
    for scenario in SCENARIOS:
        naive, managed = by.get((scenario, "naive")), by.get((scenario, "managed"))
        if naive is None or managed is None:
            continue
        kn, km = naive.kafka, managed.kafka
        lines.append(
            f"| {scenario} | {managed.rebalances}/{naive.rebalances} | "
            f"{ratio(managed.stop_the_world_ps, naive.stop_the_world_ps)} | "
            f"{ratio(managed.unowned_ps, naive.unowned_ps)} | "
            f"{ratio(managed.time_to_stable_s, naive.time_to_stable_s)} | "
            f"{km.get('rebalances')}/{kn.get('rebalances')} | "
            f"{ratio(_number(km, 'unowned_ps'), _number(kn, 'unowned_ps'))} |"
        )
    return "\n".join(lines)


def targets(runs: Sequence[Measured]) -> list[str]:
    by = {(run.scenario, run.strategy): run for run in runs}
    out: list[str] = []

    def verdict(ok: bool, *runs_: Measured) -> str:
        if any(not run.settled for run in runs_):
            return "NOT met (did not settle)"
        return "met" if ok else "NOT met"

    cold = by.get(("cold-start", "managed"))
    if cold is not None:
        out.append(
            f"cold start, managed: {cold.rebalances} rebalance(s), target exactly 1: "
            f"{verdict(cold.rebalances == 1, cold)}"
        )
        if cold.slowest_start_s is not None:
            bound = cold.slowest_start_s + cold.join_window_s + 1.0
            out.append(
                f"cold start, managed: Stable after {cold.time_to_stable_s:.1f} s; slowest pod "
                f"started at {cold.slowest_start_s:.1f} s, + {cold.join_window_s:.1f} s join "
                f"window + 1 s = {bound:.1f} s: {verdict(cold.time_to_stable_s <= bound, cold)}"
            )
    sts = by.get(("statefulset-update", "managed"))
    if sts is not None:
        out.append(
            f"static StatefulSet update, managed: {sts.rebalances} rebalance(s), target 0: "
            f"{verdict(sts.rebalances == 0, sts)}"
        )
    dep = by.get(("deployment-update", "managed"))
    if dep is not None:
        batches = int(dep.rollout.get("batches") or 0)
        ok = batches > 0 and dep.rebalances <= batches
        out.append(
            f"Deployment update, managed: {dep.rebalances} rebalance(s) in {batches} batches, "
            f"target at most one per batch: {verdict(ok, dep)}"
        )
    up = by.get(("scale-up", "managed"))
    if up is not None:
        batches = int(up.rollout.get("batches") or 0)
        ok = batches > 0 and up.rebalances <= batches
        out.append(
            f"scale-up to {up.pods}, managed: {up.rebalances} rebalance(s) in {batches} "
            f"batch(es), at most one per batch: {verdict(ok, up)}"
        )
    for scenario in SCENARIOS:
        naive, managed = by.get((scenario, "naive")), by.get((scenario, "managed"))
        if naive is None or managed is None:
            continue
        bound = naive.stop_the_world_ps / 10
        out.append(
            f"{scenario}: managed stop-the-world {managed.stop_the_world_ps:.1f} partition-s "
            f"against naive {naive.stop_the_world_ps:.1f}, target at most a tenth "
            f"({bound:.1f}): {verdict(managed.stop_the_world_ps <= bound, naive, managed)}"
        )
    return out


def plot(runs: Sequence[Measured], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib is not installed: no plot")
        return
    scenarios = [s for s in SCENARIOS if any(run.scenario == s for run in runs)]
    by = {(run.scenario, run.strategy): run for run in runs}
    metrics: list[tuple[str, Callable[[Measured], float], Callable[[Measured], float] | None]] = [
        ("rebalances (generations)", lambda r: r.rebalances,
         lambda r: _number(r.kafka, "rebalances")),
        ("stop-the-world partition-s (measured)", lambda r: r.stop_the_world_ps, None),
        ("unowned partition-s from t0", lambda r: r.unowned_ps,
         lambda r: _number(r.kafka, "unowned_ps")),
        ("time to Stable (s)", lambda r: r.time_to_stable_s,
         lambda r: _number(r.kafka, "time_to_stable_s")),
    ]  # fmt: skip
    figure, axes = plt.subplots(1, len(metrics), figsize=(19, 4.8))
    width = 0.2
    series = [
        ("Kafka, naive", "naive", 0, "#d62728", ""),
        ("Kafka, managed", "managed", 0, "#2ca02c", ""),
        ("Kafka sim, naive", "naive", 1, "#ff9896", "//"),
        ("Kafka sim, managed", "managed", 1, "#98df8a", "//"),
    ]
    for axis, (title, measured, kafka) in zip(axes, metrics, strict=True):
        for offset, (label, strategy, simulated, colour, hatch) in enumerate(series):
            pick = kafka if simulated else measured
            if pick is None:
                continue
            values = []
            for scenario in scenarios:
                run = by.get((scenario, strategy))
                values.append(0.0 if run is None else pick(run))
            xs = [index + (offset - 1.5) * width for index in range(len(scenarios))]
            axis.bar(xs, values, width, label=label, color=colour, hatch=hatch)
        axis.set_xticks(range(len(scenarios)), scenarios, fontsize=8)
        axis.set_title(title)
    axes[0].legend(fontsize=8)
    pods = runs[0].pods if runs else 0
    figure.suptitle(f"Rollouts of {pods} consumer pods: naive Kubernetes against the operator")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    say(f"plot written to {path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--jitter", default="uniform(0,6)", help="pod start-up delay (lab kubelet)")
    parser.add_argument(
        "--static-session-ms",
        type=int,
        default=None,
        help="session timeout of the static members (default: one that covers a restart)",
    )
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=300.0,
        help="seconds a run may take to settle before it is measured as it stands",
    )
    parser.add_argument(
        "--update-batch-size",
        type=int,
        default=None,
        help="maxBatchSize of managed rolling updates (default: the operator's)",
    )
    parser.add_argument("--png", type=Path, default=Path(__file__).with_name("rollouts.png"))
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in scenarios if s not in SCENARIOS] + [
        s for s in strategies if s not in STRATEGIES
    ]
    if unknown:
        parser.error(f"unknown scenario or strategy: {', '.join(unknown)}")
    jitter_max = jitter_bound(args.jitter)
    if args.static_session_ms is None:
        # Kafka keeps a static member's place while its session lasts: the restart gap plus
        # one heartbeat (3 s) must fit, rounded up to 5 s.
        gap = jitter_max + RESTART_OVERHEAD_S
        args.static_session_ms = max(int(math.ceil((gap + 3.0) / 5) * 5 * 1000), 6000)
    say(
        f"{args.pods} pods, {args.partitions} partitions, jitter {args.jitter}; static members' "
        f"session {args.static_session_ms / 1000:g} s (>= restart gap <= "
        f"{jitter_max + RESTART_OVERHEAD_S:g} s + one heartbeat), dynamic {SESSION_MS / 1000:g} s"
    )
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="rebalancer-bench-rollouts-"))
    config = LabConfig(
        state_dir=state,
        broker_port=free_port(),
        api_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
    )
    lab = Lab(config)

    def interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # A bench stopped from outside must not leave its lab's processes behind.
    signal.signal(signal.SIGTERM, interrupted)
    tee = ReportTee(lab.report_url)
    tee.start()
    runs: list[Measured] = []
    try:
        lab.start(fleet=False, pods=True, jitter=args.jitter)
        asyncio.run(ensure_topic(lab.bootstrap, TOPIC, args.partitions))
        say(f"lab up in {state}: Apache Kafka at {lab.bootstrap}, operator reports via {tee.url}")
        bench = Bench(lab, tee, args)
        for scenario in scenarios:
            for strategy in strategies:
                run = bench.run(scenario, strategy)
                run.kafka = kafka_figures(run)
                runs.append(run)
    finally:
        lab.stop()
        tee.stop()
    print()
    print(table(runs))
    print()
    print(ratios(runs))
    print()
    for line in targets(runs):
        print(f"- {line}")
    plot(runs, args.png)
    raw = state / "rollouts-data.json"
    raw.write_text(json.dumps([asdict(run) for run in runs], default=list, indent=1))
    say(f"raw figures, reports and pod timelines in {raw}")
    return 0


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
    return 0.0


if __name__ == "__main__":
    raise SystemExit(main())
