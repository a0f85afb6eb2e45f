"""Scale: many ConsumerGroups against the lab's Kubernetes control plane and broker, then a soak.

    .venv/bin/python bench/scale.py [--groups 1000] [--namespaces 1] [--soak 300] [--interval 30]
        [--png PATH] [--status-refresh 600] [--quiet-factor 4]
        [--churn PERCENT_PER_MINUTE --churn-seconds 180] [--busy GROUPS --busy-every 20]
        [--replicas R [--shards 12] [--kill-after SECONDS] [--takeover-wait 90]]

The lab's real pieces: Kubernetes' own control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler), an Apache Kafka broker, and `rebalancer operator` as
its own process. The groups have no consumers (each names a topic that exists on the broker), so
every reconcile is the operator's full path: parse, describe the group and its topic on the
broker, write status; with --busy, that many of them have two consumers each, restarted one at a
time through the soak (bench/scale_busy.py). Measured:

1. Time from creating all groups to every one having status written (status.group.observedAt),
   from the first creation and from the last, and per group the latency from its creation to
   its first status (p50, p90, p99, max), as one watch opened before the first creation sees
   the writes arrive (bench/scale_watch.py); the take-over's times come from the same watch.
2. API requests the operator makes per reconcile, by method and kind. The operator talks to
   kube-apiserver through a counting proxy with no faults (rebalancer_lab.api_faults), which
   sees its requests and no one else's: the bench's own creates and lists go to the API server
   directly. kube-apiserver's own count (apiserver_request_total on its /metrics, by verb and
   resource) over the same windows is reported beside it; it counts every client (the bench,
   the controller manager, the scheduler) and is the check on the proxy's count: only the operator
   writes status, so both must agree on PATCH consumergroups/status.
3. Operator RSS, threads and open files after the reconcile, and over a soak of SOAK seconds
   (sampled every 10 s): growth in the second half of the soak, where nothing changes, is what
   an unbounded leak would look like.
4. Kafka requests the operator sent, by Kafka API, from its own rebalancer_kafka_requests_total
   (librdkafka's statistics, every 10 s), and the status writes by reason
   (rebalancer_status_writes_total), during the reconcile and the soak.
5. With --churn P, before the soak: CHURN_SECONDS in which P % of the groups a minute have their
   spec changed (observe.reportTtlSeconds, one second either way), spread evenly and each
   group once before any twice, as users editing their groups would: the same requests and
   writes as in the soak, per second and per change.

--namespaces N deals the groups round-robin over N namespaces (scale-000, ...), created first.

With --replicas R over 1, R `rebalancer operator --shards SHARDS` processes share the groups in
place of the lab's one operator (docs/sharding.md), each behind a counting proxy of its own; the
figures are their sums, and per replica: RSS, CPU share, shards held (rebalancer_shards_held),
groups served (status.servedBy), API and Kafka requests. --kill-after SECONDS SIGKILLs the
replica serving the most groups that far into the soak and lists the groups (every 0.5 s plus
the list's own time) until each it served names a live replica in status.servedBy, up to
--takeover-wait seconds: per group the time from the kill, p50 and max, and the groups that did
not move. The soak's figures at rest are then those before the kill (all replicas), and after
the take-over (the live ones) apart. The targets are printed beside the figures (see
bench/scale_figures.py): they scale with the groups and the interval.

The operator runs with the chart's defaults for what sets the steady cost:
--status-refresh-seconds (--status-refresh) and --quiet-observe-factor (--quiet-factor).

Prints progress lines while it runs and a summary at the end; writes JSON next to the PNG and a
PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.operator.e2e.support import free_port  # noqa: E402

from rebalancer_lab.api_faults import Fault, FaultyApi  # noqa: E402
from rebalancer_lab.controlplane import ControlPlane  # noqa: E402
from rebalancer_lab.processes import ChildProcess, stop_all  # noqa: E402
from rebalancer_lab.producer import ensure_topic  # noqa: E402
from rebalancer_lab.running import Lab, LabConfig  # noqa: E402
from scale_busy import BusyGroups  # noqa: E402
from scale_figures import (  # noqa: E402
    Owners,
    churn_schedule,
    namespace_of,
    percentile,
    rss_growth,
    takeover_summary,
    takeover_times,
    target_rows,
)
from scale_watch import GroupWatch  # noqa: E402

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"
# A loaded kube-apiserver answers 429 (priority and fairness), 500/503 or 504 (a write it gave up
# waiting for): the bench sends the create again, as a client would, and counts it.
RETRIED_STATUSES = (429, 500, 503, 504)
CREATE_ATTEMPTS = 6
# How often the reconcile's progress is printed (the watch times the groups).
STATUS_REPORT_SECONDS = 30
TOPIC = "scale"


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


class CountingProxy(FaultyApi):
    """A FaultyApi with no faults that counts every request it passes on, by method and kind."""

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane)
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        # The proxy asks its fault list about every request before passing it on: the one
        # place that sees each request once, watches included.
        with self._count_lock:
            self.counts[f"{method} {_kind(path)}"] += 1
        return super()._take_fault(method, path)

    def snapshot(self) -> Counter[str]:
        with self._count_lock:
            return Counter(self.counts)


_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def apiserver_requests(plane: ControlPlane) -> Counter[str]:
    """The requests kube-apiserver has served since it started, all clients together, by verb
    and resource (apiserver_request_total on its /metrics, read as the admin)."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    context.load_cert_chain(str(plane.pki / "admin.crt"), str(plane.pki / "admin.key"))
    with urllib.request.urlopen(f"{plane.server}/metrics", context=context, timeout=30) as reply:
        text = reply.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        # Non-resource paths (/healthz, /version, discovery) have an empty resource.
        resource = labels.get("resource") or "(non-resource)"
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[f"{labels.get('verb', '?')} {resource}"] += round(float(sample["value"]))
    return counts


_OPERATOR_SAMPLE = re.compile(
    r"^(?P<name>rebalancer_(?:kafka_requests|status_writes|kubernetes_requests|shard_moves)"
    r"_total)"
    r"\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)


def operator_counts(url: str) -> Counter[str]:
    """The operator's own request and write counters from its /metrics: Kafka requests by API
    ("kafka DescribeGroups"), status writes by reason ("status changed"), its Kubernetes
    client's requests ("kube PATCH consumergroups/status"), shard moves ("shard lost")."""
    with urllib.request.urlopen(url, timeout=30) as reply:
        text = reply.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        sample = _OPERATOR_SAMPLE.match(line)
        if sample is None:
            continue
        labels = dict(_LABEL.findall(sample["labels"]))
        if sample["name"] == "rebalancer_kafka_requests_total":
            key = f"kafka {labels.get('request')}"
        elif sample["name"] == "rebalancer_status_writes_total":
            key = f"status {labels.get('reason')}"
        elif sample["name"] == "rebalancer_shard_moves_total":
            key = f"shard {labels.get('move')}"
        else:
            key = f"kube {labels.get('verb')} {labels.get('resource')}"
        counts[key] += round(float(sample["value"]))
    return counts


def _only(counts: Counter[str], prefix: str) -> dict[str, int]:
    return {k.removeprefix(prefix): v for k, v in sorted(counts.items()) if k.startswith(prefix)}


def _kind(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    if "consumergroups" in parts:
        return "consumergroups/status" if parts[-1] == "status" else "consumergroups"
    for kind in ("events", "secrets", "statefulsets", "deployments", "configmaps", "leases"):
        if kind in parts:
            return kind
    return parts[-1] if parts else "/"


def process_sample(pid: int) -> dict[str, float]:
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                fields[key] = float(value.split()[0])
    fields["fds"] = float(len(os.listdir(f"/proc/{pid}/fd")))
    with open(f"/proc/{pid}/stat") as handle:
        stat = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    fields["cpu_s"] = (int(stat[11]) + int(stat[12])) / ticks
    return {"rss_mb": fields["VmRSS"] / 1024, "threads": fields["Threads"], **fields}


def body(index: int, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    name = f"scale-{index:05d}"
    interval = args.interval
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": namespace_of(index, args.namespaces)},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [bootstrap]},
            "subscription": {"topics": [TOPIC]},
            "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
            "policy": {
                "observe": {"intervalSeconds": interval, "reportTtlSeconds": max(60, interval)},
                "history": {"enabled": False},
            },
        },
    }


@dataclass
class Replica:
    """One `rebalancer operator` process, behind a counting proxy of its own (its API requests,
    kopf's included, and no one else's), with its /metrics and its log."""

    name: str
    child: ChildProcess
    proxy: CountingProxy
    url: str  # http://host:port of its reports, /healthz and /metrics
    samples: list[dict[str, float]] = field(default_factory=list)
    killed_at: float | None = None  # seconds into the soak
    _counts: Counter[str] = field(default_factory=Counter)

    @property
    def pid(self) -> int:
        assert self.child.process is not None
        return self.child.process.pid

    @property
    def alive(self) -> bool:
        return self.child.running

    def sample(self) -> dict[str, float] | None:
        try:
            return process_sample(self.pid) if self.alive else None
        except OSError:
            return None

    def counts(self) -> Counter[str]:
        """Its /metrics counters; a killed replica's as last read before it died."""
        if self.alive:
            self._counts = operator_counts(f"{self.url}/metrics")
        return Counter(self._counts)

    def gauge(self, name: str) -> float | None:
        if not self.alive:
            return None
        try:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as reply:
                text = reply.read().decode()
        except OSError:
            return None
        values = [line.split()[-1] for line in text.splitlines() if line.startswith(f"{name} ")]
        return float(values[0]) if values else None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2):
                return True
        except OSError:
            return False


def start_replicas(lab: Lab, stack: ExitStack, args: argparse.Namespace) -> list[Replica]:
    """The lab's operator again, behind a counting proxy (--replicas 1); or, in its place,
    REPLICAS `rebalancer operator --shards SHARDS` processes, each behind its own proxy, on
    ports of their own, named host/pid as outside a pod (docs/sharding.md)."""
    assert lab.plane is not None and lab.operator is not None
    state, host = lab.config.state_dir, lab.config.host
    lab.operator.stop(grace=15)
    if args.replicas == 1:
        proxy = CountingProxy(lab.plane)
        stack.enter_context(proxy)
        lab.start_operator(proxy.write_kubeconfig(state / "operator-kubeconfig"))
        url = f"http://{host}:{lab.config.reports_port}"
        return [Replica("operator", lab.operator, proxy, url)]
    replicas = []
    for index in range(args.replicas):
        name, port = f"operator-{index}", free_port()
        proxy = CountingProxy(lab.plane)
        stack.enter_context(proxy)
        child = lab.operator_process(
            proxy.write_kubeconfig(state / f"{name}-kubeconfig"),
            name=name,
            reports_port=port,
            flags=("--shards", str(args.shards), "--shard-namespace", lab.config.namespace),
        )
        # Outside a pod: no pod to label, the replica is named host/pid.
        child.env = {"POD_NAME": "", "POD_NAMESPACE": "", "POD_IP": ""}
        child.start()
        replicas.append(Replica(name, child, proxy, f"http://{host}:{port}"))
    return replicas


def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="rebalancer-scale-"))
    config = LabConfig(
        state_dir=state,
        broker_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
        # After the lab's own flags: these win.
        operator_flags=(
            "--status-refresh-seconds",
            str(args.status_refresh),
            "--quiet-observe-factor",
            str(args.quiet_factor),
        ),
    )
    lab = Lab(config)
    try:
        lab.start(fleet=False)
        say(f"lab state and logs in {state}")
        with ExitStack() as stack:
            replicas = start_replicas(lab, stack, args)
            try:
                return measure(lab, replicas, args)
            finally:
                # Before the proxies they talk through go, not after them with the lab.
                stop_all([replica.child for replica in replicas], grace=15)
    finally:
        lab.stop()


_KOPF_RUN = re.compile(r"kopf\.objects: (Timer|Handler|Daemon) '([^']+)' (?:succeeded|failed)")


def kopf_runs(log: Path) -> Counter[str]:
    """kopf's handler, timer and daemon runs so far, by kind and name, from the operator's log
    (kopf logs each run's end at INFO)."""
    found: Counter[str] = Counter()
    with log.open(errors="replace") as lines:
        for line in lines:
            run = _KOPF_RUN.search(line)
            if run is not None:
                found[f"{run[1].lower()} {run[2]}"] += 1
    return found


@dataclass
class Snapshot:
    """Every counter at one moment: per replica its proxy's and its /metrics', kopf's runs in
    all the replicas' logs, and kube-apiserver's own (all clients)."""

    at: float
    proxy: dict[str, Counter[str]]
    own: dict[str, Counter[str]]
    runs: Counter[str]
    server: Counter[str]

    @classmethod
    def take(cls, plane: ControlPlane, replicas: list[Replica]) -> Snapshot:
        runs: Counter[str] = Counter()
        for replica in replicas:
            runs += kopf_runs(replica.child.log_path)
        return cls(
            time.monotonic(),
            {r.name: r.proxy.snapshot() for r in replicas},
            {r.name: r.counts() for r in replicas},
            runs,
            apiserver_requests(plane),
        )


def window(before: Snapshot, after: Snapshot, interval: int) -> dict[str, Any]:
    """What the replicas did between two snapshots: API requests (their proxies), Kafka
    requests and status writes (their /metrics), kopf's runs, and kube-apiserver's count."""
    seconds = max(1e-9, after.at - before.at)
    api: Counter[str] = Counter()
    own: Counter[str] = Counter()
    per_replica = {}
    for name in after.proxy:
        mine = after.proxy[name] - before.proxy[name]
        theirs = after.own[name] - before.own[name]
        api += mine
        own += theirs
        per_replica[name] = {
            "api_requests": sum(mine.values()),
            "kafka_requests": sum(_only(theirs, "kafka ").values()),
        }
    kafka = _only(own, "kafka ")
    return {
        "seconds": round(seconds, 1),
        "api": api,
        "requests_per_s": round(sum(api.values()) / seconds, 2),
        "kafka": kafka,
        "kafka_per_s": round(sum(kafka.values()) / seconds, 2),
        "kafka_per_interval": round(sum(kafka.values()) / seconds * interval, 1),
        "status_writes": _only(own, "status "),
        # Shards taken, given back and lost by all replicas: at rest, none.
        "shard_moves": _only(own, "shard "),
        "kopf_runs": dict(sorted((after.runs - before.runs).items())),
        "server": after.server - before.server,
        "per_replica": per_replica,
    }


def wait_ready(replicas: list[Replica], args: argparse.Namespace) -> None:
    """Idle means started: each replica answers /healthz once kopf and its handlers are loaded,
    and with shards, every shard is held."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(r.ready() for r in replicas):
        time.sleep(0.5)
    while args.replicas > 1 and time.monotonic() < deadline:
        held = [r.gauge("rebalancer_shards_held") or 0 for r in replicas]
        if sum(held) == args.shards and all(held):
            say(f"shards held: {dict(zip((r.name for r in replicas), held, strict=True))}")
            break
        time.sleep(1)
    time.sleep(2)


def create_groups(
    api: client.CustomObjectsApi, bootstrap: str, args: argparse.Namespace
) -> dict[str, float]:
    """Creates the groups with 8 clients at once, straight to the API server; when each was."""
    created: dict[str, float] = {}
    retried: Counter[int] = Counter()
    retried_lock = threading.Lock()
    started = time.monotonic()

    def create(index: int) -> None:
        doc = body(index, bootstrap, args)
        namespace = doc["metadata"]["namespace"]
        for attempt in range(CREATE_ATTEMPTS):
            try:
                api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, doc)
            except ApiException as error:
                # A create the API server timed out on may have been stored all the same.
                if error.status == 409 and attempt > 0:
                    break
                if error.status not in RETRIED_STATUSES or attempt == CREATE_ATTEMPTS - 1:
                    raise
                with retried_lock:
                    retried[error.status] += 1
                time.sleep(2**attempt)
            else:
                break
        created[doc["metadata"]["name"]] = time.monotonic()

    pool = ThreadPoolExecutor(8)
    try:
        for done, _ in enumerate(pool.map(create, range(args.groups)), 1):
            if done % 500 == 0:
                say(f"created {done}/{args.groups} ({done / (time.monotonic() - started):.1f}/s)")
    finally:
        # Stopped (Ctrl-C, SIGTERM): the creates not yet begun are dropped, not waited for.
        pool.shutdown(wait=True, cancel_futures=True)
    if retried:
        say(f"creates the API server refused or timed out on, sent again: {dict(retried)}")
    return created


def create_namespaces(api_client: client.ApiClient, namespaces: int) -> None:
    """The namespaces the groups are dealt over (none to make with one: "default")."""
    if namespaces == 1:
        return
    core = client.CoreV1Api(api_client)
    for index in range(namespaces):
        name = namespace_of(index, namespaces)
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise
    say(f"created {namespaces} namespaces")


def change_groups(
    api: client.CustomObjectsApi, created: dict[str, float], args: argparse.Namespace
) -> int:
    """For --churn-seconds, --churn percent of the groups a minute get a spec change, each on
    its turn of churn_schedule; how many changes were made."""
    schedule = churn_schedule(len(created), args.churn, args.churn_seconds)
    base = max(60, args.interval)
    made = 0
    made_lock = threading.Lock()

    def change(turn: int, index: int) -> None:
        nonlocal made
        ttl = base + 1 if turn // len(created) % 2 == 0 else base
        patch = {"spec": {"policy": {"observe": {"reportTtlSeconds": ttl}}}}
        namespace = namespace_of(index, args.namespaces)
        api.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, f"scale-{index:05d}", patch
        )
        with made_lock:
            made += 1

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        futures = []
        for turn, (offset, index) in enumerate(schedule):
            time.sleep(max(0.0, started + offset - time.monotonic()))
            futures.append(pool.submit(change, turn, index))
            if (turn + 1) % 100 == 0:
                say(f"churn: {turn + 1}/{len(schedule)} changes sent")
        for future in futures:
            future.result()
    time.sleep(max(0.0, started + args.churn_seconds - time.monotonic()))
    return made


def churn_phase(
    lab: Lab,
    api: client.CustomObjectsApi,
    replicas: list[Replica],
    args: argparse.Namespace,
    created: dict[str, float],
    marks: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Groups changing at --churn percent a minute: what the replicas send meanwhile, in all and
    per change."""
    assert lab.plane is not None
    say(f"churn: {args.churn} % of the groups a minute for {args.churn_seconds:.0f} s")
    before = Snapshot.take(lab.plane, replicas)
    changes = change_groups(api, created, args)
    # librdkafka reports its counts every 10 s: the window's last requests are counted then.
    time.sleep(11)
    figures = window(before, Snapshot.take(lab.plane, replicas), args.interval)
    for r in replicas:
        marks[r.name]["api"]["churn"] = figures["per_replica"][r.name]["api_requests"]
        marks[r.name]["kafka"]["churn"] = figures["per_replica"][r.name]["kafka_requests"]
    churn = compact(figures) | {
        "percent_per_minute": args.churn,
        "changes": changes,
        # The shard Leases' rounds go on whatever changes: left out of the cost of a change.
        "api_requests_per_change": round(
            sum(n for kind, n in figures["api"].items() if not kind.endswith(" leases"))
            / max(1, changes),
            2,
        ),
        "kopf_runs": figures["kopf_runs"],
    }
    say(
        f"churn: {changes} changes, {churn['requests_per_s']} API requests/s, "
        f"{churn['api_requests_per_change']} per change, "
        f"{churn['kafka_per_interval']} Kafka requests per interval"
    )
    return churn


def rss_line(replicas: list[Replica]) -> str:
    parts = []
    for replica in replicas:
        sample = replica.sample()
        if sample is not None:
            parts.append(f"{replica.name} {sample['rss_mb']:.0f}")
    return "RSS MB " + ", ".join(parts)


def wait_status(
    groups: GroupWatch,
    replicas: list[Replica],
    created: dict[str, float],
    deadline: float,
) -> dict[str, float]:
    """Waits until each group has its first status (status.group.observedAt), as the watch
    saw it arrive (since before the first creation); when each did."""
    first_status = groups.with_status(created)
    report = time.monotonic()
    while len(first_status) < len(created) and time.monotonic() < deadline:
        if time.monotonic() >= report:
            served = groups.served_counts()
            serving = ", ".join(f"{r.name} {served[r.pid]}" for r in replicas if served[r.pid])
            say(
                f"status written for {len(first_status)}/{len(created)}; {rss_line(replicas)}"
                + (f"; servedBy {serving}" if serving else "")
            )
            report += STATUS_REPORT_SECONDS
        time.sleep(0.5)
        first_status = groups.with_status(created)
    return first_status


class Takeover:
    """SIGKILLs the replica serving the most groups, then looks at the watched servedBy every
    0.2 s until each group it served names a live replica, or `cap` seconds."""

    def __init__(self, groups: GroupWatch, replicas: list[Replica], cap: float) -> None:
        self.groups, self.cap = groups, cap
        served = groups.owners()
        counts = Counter(served.values())
        self.victim = max(replicas, key=lambda replica: counts[replica.pid])
        self.live = {r.pid for r in replicas if r is not self.victim}
        self.moving = {name for name, pid in served.items() if pid == self.victim.pid}
        self.samples: list[Owners] = []
        self.killed = 0.0
        self.done = threading.Event()

    def kill(self, soak_seconds: float) -> None:
        self.victim.child.kill()
        self.killed = time.monotonic()
        self.victim.killed_at = soak_seconds
        say(f"SIGKILLed {self.victim.name} (pid {self.victim.pid}), serving {len(self.moving)}")
        threading.Thread(target=self._poll, name="takeover", daemon=True).start()

    def _poll(self) -> None:
        try:
            while time.monotonic() - self.killed < self.cap:
                now = self.groups.owners()
                self.samples.append(
                    (time.monotonic() - self.killed, {n: now.get(n) for n in self.moving})
                )
                if all(now.get(name) in self.live for name in self.moving):
                    break
                time.sleep(0.2)
        finally:
            self.done.set()

    def figures(self) -> dict[str, Any]:
        times = takeover_times(self.moving, self.samples, self.live)
        return {
            "killed": self.victim.name,
            "killed_at_soak_s": round(self.victim.killed_at or 0.0, 1),
            **takeover_summary(times, self.moving),
            "wait_cap_s": self.cap,
            "times": sorted(round(v, 2) for v in times.values()),
        }


def sample_all(replicas: list[Replica], seconds: float, takeover: Takeover | None) -> None:
    parts = []
    for replica in replicas:
        sample = replica.sample()
        if sample is None:
            continue
        replica.samples.append({"t": seconds, **sample})
        parts.append(
            f"{replica.name} RSS {sample['rss_mb']:.1f} MB, {sample['threads']:.0f} threads, "
            f"{sample['fds']:.0f} fds, CPU {sample['cpu_s']:.0f} s"
        )
    if takeover is not None and not takeover.done.is_set() and takeover.samples:
        last = takeover.samples[-1][1]
        moved = sum(1 for pid in last.values() if pid in takeover.live)
        parts.append(f"take-over {moved}/{len(takeover.moving)} moved")
    say(f"soak {seconds:.0f} s: " + "; ".join(parts))


def run_soak(
    plane: ControlPlane,
    groups: GroupWatch,
    replicas: list[Replica],
    args: Any,
    busy: BusyGroups | None = None,
) -> tuple[dict[str, Snapshot], Takeover | None]:
    """Nothing changes but the busy groups' consumers (--busy): the replicas keep observing
    every group every interval. Samples each replica every 10 s; KILL_AFTER seconds in, kills
    one. Counters at the start, just before the kill, once the take-over is over, and at the
    end."""
    start = time.monotonic()
    snapshots = {"start": Snapshot.take(plane, replicas)}
    takeover: Takeover | None = None
    next_sample = 10.0
    while (now := time.monotonic() - start) < args.soak:
        if args.kill_after is not None and takeover is None and now >= args.kill_after:
            takeover = Takeover(groups, replicas, args.takeover_wait)
            snapshots["kill"] = Snapshot.take(plane, replicas)
            takeover.kill(time.monotonic() - start)
        if takeover is not None and takeover.done.is_set() and "takeover" not in snapshots:
            snapshots["takeover"] = Snapshot.take(plane, replicas)
            say(f"take-over over: {takeover.figures() | {'times': '...'}}")
        if now >= next_sample:
            sample_all(replicas, now, takeover)
            next_sample += 10
        if busy is not None:
            busy.tick(now)
        time.sleep(0.5)
    if takeover is not None:
        takeover.done.wait(takeover.cap)
    sample_all(replicas, time.monotonic() - start, None)
    snapshots["end"] = Snapshot.take(plane, replicas)
    return snapshots, takeover


def soak_windows(snapshots: dict[str, Snapshot]) -> dict[str, tuple[float, float]]:
    """The soak's windows in soak seconds: all of it; with a kill, before it and from the end of
    the take-over on (the live replicas at rest again)."""
    zero = snapshots["start"].at
    end = snapshots["end"].at - zero
    if "kill" not in snapshots:
        return {"soak": (0.0, end)}
    found = {"before_kill": (0.0, snapshots["kill"].at - zero)}
    if "takeover" in snapshots and end - (snapshots["takeover"].at - zero) >= 30:
        found["after_takeover"] = (snapshots["takeover"].at - zero, end)
    return found


def replica_figures(
    replica: Replica, marks: dict[str, Any], windows: dict[str, tuple[float, float]]
) -> dict[str, Any]:
    """One replica: RSS idle, after the reconcile and over the soak, its growth over the second
    half of each soak window it lived through, CPU share, shards held, groups served."""
    samples = replica.samples
    idle, loaded = marks["idle"], marks["loaded"]
    growth = {
        name: rss_growth(samples, start, end)
        for name, (start, end) in windows.items()
        if replica.killed_at is None or end <= replica.killed_at
    }
    soak_cpu = (
        round((samples[-1]["cpu_s"] - loaded["cpu_s"]) / samples[-1]["t"], 3) if samples else None
    )
    return {
        "pid": replica.pid,
        "rss_mb": {
            "idle": round(idle["rss_mb"], 1),
            "after_reconcile": round(loaded["rss_mb"], 1),
            "soak_max": round(max(s["rss_mb"] for s in samples), 1) if samples else None,
            "soak_last": round(samples[-1]["rss_mb"], 1) if samples else None,
        },
        "rss_growth_second_half_mb": growth,
        "cpu_share_reconcile": round(
            (loaded["cpu_s"] - idle["cpu_s"]) / max(1e-9, marks["reconcile_s"]), 3
        ),
        "cpu_share_soak": soak_cpu,
        "shards_held": {"after_reconcile": marks["shards"], "end": marks.get("shards_end")},
        "groups_served": {"after_reconcile": marks["served"], "end": marks.get("served_end")},
        "api_requests": marks["api"],
        "kafka_requests": marks["kafka"],
        "killed_at_soak_s": None if replica.killed_at is None else round(replica.killed_at, 1),
        "samples": [{k: round(v, 2) for k, v in s.items()} for s in samples],
    }


def reconcile_figures(
    args: argparse.Namespace,
    created: dict[str, float],
    first_status: dict[str, float],
    reconcile: dict[str, Any],
) -> dict[str, Any]:
    """The reconcile: creation to first status per group, and what it cost."""
    latencies = [first_status[name] - created[name] for name in first_status]
    done = len(first_status)
    last_created = max(created.values())
    kafka = reconcile["kafka"]
    return {
        "reconciled": done,
        "all_status_after_last_s": round(max(first_status.values()) - last_created, 1)
        if done == len(created)
        else None,
        "latency_s": {q: round(percentile(latencies, q), 2) for q in (50, 90, 99) if latencies}
        | ({"max": round(max(latencies), 2)} if latencies else {}),
        "operator_requests_during_reconcile": dict(
            sorted((k, v) for k, v in reconcile["api"].items() if v > 0)
        ),
        "requests_per_reconcile": round(sum(reconcile["api"].values()) / max(1, done), 2),
        "apiserver_requests_during_reconcile_all_clients": dict(
            sorted(reconcile["server"].items())
        ),
        "kafka_requests_during_reconcile": kafka,
        "kafka_requests_per_reconcile": round(sum(kafka.values()) / max(1, done), 2),
        "status_writes_during_reconcile": reconcile["status_writes"],
        "shard_moves_during_reconcile": reconcile["shard_moves"],
        # What held the operators' event loops: kopf's runs per handler, timer and daemon.
        "kopf_runs_during_reconcile": reconcile["kopf_runs"],
        "latencies": sorted(round(v, 3) for v in latencies),
    }


def soak_figures(args: argparse.Namespace, soak: dict[str, Any]) -> dict[str, Any]:
    """The soak at rest (before the kill, when there is one): requests per second and per
    interval, API and Kafka, against what --status-refresh adds later."""
    seconds = soak["seconds"]
    total = sum(soak["api"].values())
    return {
        "soak_s": args.soak,
        "soak_window_s": seconds,
        "soak_requests_per_s": soak["requests_per_s"],
        "soak_requests_per_group_per_interval": round(
            total / seconds * args.interval / max(1, args.groups), 3
        ),
        "soak_requests": dict(sorted(soak["api"].items())),
        "apiserver_soak_requests_per_s_all_clients": round(
            sum(soak["server"].values()) / seconds, 1
        ),
        "kopf_runs_during_soak": soak["kopf_runs"],
        "soak_kafka_requests": soak["kafka"],
        "soak_kafka_requests_per_s": soak["kafka_per_s"],
        "soak_kafka_requests_per_interval": soak["kafka_per_interval"],
        "soak_status_writes": soak["status_writes"],
        "soak_shard_moves": soak["shard_moves"],
        # The freshness stamps not yet due in a soak shorter than --status-refresh: at rest,
        # one PATCH per group per refresh interval on top of what the soak measured.
        "status_refresh_seconds": args.status_refresh,
        "quiet_observe_factor": args.quiet_factor,
        "status_refresh_requests_per_s_at_rest": round(args.groups / args.status_refresh, 2),
    }


def reconcile_phase(
    lab: Lab,
    api: client.CustomObjectsApi,
    groups: GroupWatch,
    replicas: list[Replica],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, float]]:
    """Creates the groups and waits for every status; the figures, and per replica what was
    seen of it (RSS idle and after, shards held, groups served, its requests)."""
    assert lab.plane is not None
    asyncio.run(ensure_topic(lab.bootstrap, TOPIC, 4))
    wait_ready(replicas, args)
    marks: dict[str, dict[str, Any]] = {r.name: {"idle": r.sample()} for r in replicas}
    say("idle: " + rss_line(replicas) + "; pids " + ", ".join(str(r.pid) for r in replicas))
    assert lab.api_client is not None
    create_namespaces(lab.api_client, args.namespaces)
    before = Snapshot.take(lab.plane, replicas)
    started = time.monotonic()
    created = create_groups(api, lab.bootstrap, args)
    created_in = time.monotonic() - started
    say(f"created {args.groups} in {created_in:.1f} s ({args.groups / created_in:.0f}/s)")
    first_status = wait_status(groups, replicas, created, started + args.timeout)
    done = len(first_status) == len(created)
    reconciled_in = (max(first_status.values()) if done else time.monotonic()) - started
    # librdkafka reports its counts every 10 s: the reconcile's last requests are counted then.
    time.sleep(11)
    reconcile = window(before, Snapshot.take(lab.plane, replicas), args.interval)
    served = groups.served_counts()
    for r in replicas:
        mine = reconcile["per_replica"][r.name]
        marks[r.name] |= {
            "loaded": r.sample(),
            "reconcile_s": time.monotonic() - started,
            "shards": r.gauge("rebalancer_shards_held"),
            # Without shards the one replica serves every group and writes no servedBy.
            "served": served[r.pid] if args.replicas > 1 else len(first_status),
            "api": {"reconcile": mine["api_requests"]},
            "kafka": {"reconcile": mine["kafka_requests"]},
        }
    result = {
        "groups": args.groups,
        "namespaces": args.namespaces,
        "replicas": args.replicas,
        "shards": args.shards if args.replicas > 1 else None,
        "interval_seconds": args.interval,
        "created_in_s": round(created_in, 1),
        "reconciled_in_s": round(reconciled_in, 1),
    } | reconcile_figures(args, created, first_status, reconcile)
    say(
        f"{result['reconciled']}/{args.groups} with status {reconciled_in:.1f} s after the first "
        f"creation, {result['all_status_after_last_s']} s after the last; latency "
        f"{result['latency_s']}; {result['requests_per_reconcile']} API requests per reconcile"
    )
    return result, marks, created


def compact(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "seconds": figures["seconds"],
        "requests_per_s": figures["requests_per_s"],
        "requests": dict(sorted((k, v) for k, v in figures["api"].items() if v > 0)),
        "kafka_per_interval": figures["kafka_per_interval"],
        "kafka": figures["kafka"],
        "status_writes": figures["status_writes"],
        "shard_moves": figures["shard_moves"],
    }


def soak_phase(
    lab: Lab,
    groups: GroupWatch,
    replicas: list[Replica],
    args: argparse.Namespace,
    marks: dict[str, dict[str, Any]],
    busy: BusyGroups | None = None,
) -> tuple[dict[str, Any], dict[str, tuple[float, float]]]:
    """The soak, and the kill with it: the figures at rest (before the kill when there is
    one), after the take-over, and of the take-over itself."""
    assert lab.plane is not None
    snapshots, takeover = run_soak(lab.plane, groups, replicas, args, busy)
    windows = soak_windows(snapshots)
    pairs = {
        "soak": ("start", "end"),
        "before_kill": ("start", "kill"),
        "after_takeover": ("takeover", "end"),
    }
    figures = {
        name: window(snapshots[pairs[name][0]], snapshots[pairs[name][1]], args.interval)
        for name in windows
    }
    result = soak_figures(args, figures.get("soak") or figures["before_kill"])
    result["soak_window"] = "soak" if "soak" in figures else "before_kill"
    if "after_takeover" in figures:
        result["after_takeover"] = compact(figures["after_takeover"])
    if takeover is not None:
        moved = takeover.figures()
        result["takeover"] = moved
        result["takeover_max_s"] = moved["max_s"] if moved["not_moved"] == 0 else takeover.cap
        if "takeover" in snapshots:
            over = window(snapshots["kill"], snapshots["takeover"], args.interval)
            result["during_takeover"] = compact(over)
    served = groups.served_counts()
    for r in replicas:
        marks[r.name]["shards_end"] = r.gauge("rebalancer_shards_held")
        marks[r.name]["served_end"] = served[r.pid] if args.replicas > 1 else args.groups
        for name, figure in figures.items():
            marks[r.name]["api"][name] = figure["per_replica"][r.name]["api_requests"]
            marks[r.name]["kafka"][name] = figure["per_replica"][r.name]["kafka_requests"]
    return result, windows


def start_busy(
    lab: Lab, api: client.CustomObjectsApi, args: argparse.Namespace
) -> BusyGroups | None:
    """The first --busy groups with consumers of their own, both members seen in status."""
    if args.busy < 1:
        return None
    groups = [(namespace_of(i, args.namespaces), f"scale-{i:05d}") for i in range(args.busy)]
    # The last restarts leave two observe intervals for the status to count them.
    until = max(0.0, args.soak - 2 * args.interval)
    busy = BusyGroups(lab, api, groups, TOPIC, args.busy_every, until)
    say(f"busy groups: starting {len(groups) * 2} consumers")
    busy.start()
    return busy


def measure(lab: Lab, replicas: list[Replica], args: argparse.Namespace) -> dict[str, Any]:
    assert lab.api_client is not None
    api = client.CustomObjectsApi(lab.api_client)
    groups = GroupWatch(api).start()
    result, marks, created = reconcile_phase(lab, api, groups, replicas, args)
    if args.churn > 0:
        result["churn"] = churn_phase(lab, api, replicas, args, created, marks)
    busy = start_busy(lab, api, args)
    try:
        soak, windows = soak_phase(lab, groups, replicas, args, marks, busy)
        if busy is not None:
            soak["busy"] = busy.figures()
            say(f"busy groups: {soak['busy']}")
    finally:
        if busy is not None:
            busy.stop()
        groups.stop()
    result |= soak
    each = {r.name: replica_figures(r, marks[r.name], windows) for r in replicas}
    rss = [r["rss_mb"] for r in each.values()]
    growths = [g for r in each.values() for g in r["rss_growth_second_half_mb"].values()]
    shares = [r["cpu_share_soak"] for r in each.values() if r["cpu_share_soak"] is not None]
    result |= {
        "rss_mb": {
            "idle": round(sum(r["idle"] for r in rss), 1),
            "after_reconcile": round(sum(r["after_reconcile"] for r in rss), 1),
        },
        "rss_mb_largest_replica": max(max(r["after_reconcile"], r["soak_max"] or 0.0) for r in rss),
        # The worst replica's, over the second half of each soak window it lived through.
        "soak_rss_growth_second_half_mb": max((g for g in growths if g is not None), default=None),
        "soak_cpu_share": round(sum(shares), 3) if shares else None,
        "replicas_detail": each,
    }
    result["targets"] = target_rows(result, lab.config.brokers)
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib not installed: no PNG")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    latencies = result["latencies"]
    left.plot(latencies, [100 * (i + 1) / len(latencies) for i in range(len(latencies))])
    left.set_xlabel("creation to first status (s)")
    left.set_ylabel("% of ConsumerGroups")
    left.set_title(
        f"{result['groups']} ConsumerGroups on {result['replicas']} replica(s): time to status"
    )
    for name, replica in result["replicas_detail"].items():
        samples = replica["samples"]
        rss = [s["rss_mb"] for s in samples]
        right.plot([s["t"] for s in samples], rss, marker="o", markersize=3, label=name)
    takeover = result.get("takeover")
    if takeover is not None:
        killed = takeover["killed_at_soak_s"]
        right.axvline(killed, color="red", linestyle="--", label=f"{takeover['killed']} killed")
        if takeover["max_s"] is not None:
            right.axvspan(killed, killed + takeover["max_s"], color="red", alpha=0.1)
    right.set_xlabel("soak time (s)")
    right.set_ylabel("RSS (MB)")
    right.set_title("RSS per replica during the soak")
    right.set_ylim(bottom=0)
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    say(f"wrote {path}")


def print_targets(rows: list[dict[str, Any]]) -> None:
    print("\nfigure                                              value      target   met")
    for row in rows:
        print(
            f"{row['figure']:<50} {row['value']!s:>9} {row['target']!s:>11}   "
            f"{'yes' if row['met'] else 'NO'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument(
        "--namespaces", type=int, default=1, help="dealt round-robin; 1 puts all in default"
    )
    parser.add_argument("--soak", type=float, default=300.0, help="seconds")
    parser.add_argument("--interval", type=int, default=30, help="observe.intervalSeconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="for the reconcile phase")
    parser.add_argument("--png", default="bench/scale.png")
    parser.add_argument(
        "--status-refresh", type=float, default=600.0, help="--status-refresh-seconds (chart's)"
    )
    parser.add_argument(
        "--quiet-factor", type=float, default=4.0, help="--quiet-observe-factor (chart's)"
    )
    parser.add_argument("--replicas", type=int, default=1, help="operator processes")
    parser.add_argument("--shards", type=int, default=12, help="--shards, with --replicas over 1")
    parser.add_argument(
        "--kill-after", type=float, default=None, help="SIGKILL a replica this far into the soak"
    )
    parser.add_argument(
        "--takeover-wait", type=float, default=90.0, help="seconds to wait for its groups"
    )
    parser.add_argument(
        "--churn",
        type=float,
        default=0.0,
        help="percent of the groups changed a minute, before the soak (0: none)",
    )
    parser.add_argument("--churn-seconds", type=float, default=180.0, help="how long they change")
    parser.add_argument(
        "--busy", type=int, default=0, help="groups with two consumers restarted in the soak"
    )
    parser.add_argument(
        "--busy-every", type=float, default=20.0, help="seconds between two consumer restarts"
    )
    args = parser.parse_args()
    # SIGTERM stops the bench as Ctrl-C does: the lab's processes are stopped on the way out
    # (a background job started from a script ignores SIGINT).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    problem = argument_problem(args)
    if problem is not None:
        parser.error(problem)
    result = run(args)
    png = Path(args.png)
    png.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    summary = {k: v for k, v in result.items() if k not in ("latencies", "replicas_detail")}
    if "takeover" in summary:
        summary["takeover"] = {k: v for k, v in summary["takeover"].items() if k != "times"}
    summary["replicas_detail"] = {
        name: {k: v for k, v in one.items() if k != "samples"}
        for name, one in result["replicas_detail"].items()
    }
    print(json.dumps(summary, indent=1))
    print_targets(result["targets"])
    plot(result, png)
    return 0 if result["reconciled"] == args.groups else 1


def argument_problem(args: argparse.Namespace) -> str | None:
    if args.replicas < 1:
        return f"--replicas {args.replicas}: at least 1"
    if not 1 <= args.namespaces <= 1000:
        return f"--namespaces {args.namespaces}: from 1 to 1000 (scale-000 to scale-999)"
    if args.churn < 0 or (args.churn > 0 and args.churn_seconds <= 0):
        return f"--churn {args.churn} for --churn-seconds {args.churn_seconds}: both positive"
    if args.replicas > 1 and args.shards < args.replicas:
        return f"--shards {args.shards} under --replicas {args.replicas}: some would hold none"
    if args.kill_after is not None and args.replicas < 2:
        return "--kill-after needs --replicas 2 or more: a live replica must take the share"
    if args.kill_after is not None and not 0 <= args.kill_after < args.soak:
        return f"--kill-after {args.kill_after}: within the soak (0 to --soak {args.soak})"
    if not 0 <= args.busy <= args.groups:
        return f"--busy {args.busy}: from 0 to --groups {args.groups}"
    if args.busy and args.busy_every <= 0:
        return f"--busy-every {args.busy_every}: positive seconds"
    return None


if __name__ == "__main__":
    sys.exit(main())
