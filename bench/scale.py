"""Scale: many ConsumerGroups against the lab's Kubernetes control plane and broker, then a soak.

    .venv/bin/python bench/scale.py [--groups 1000] [--soak 300] [--interval 30] [--png PATH]
        [--status-refresh 600] [--quiet-factor 4]

The lab's real pieces: Kubernetes' own control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler), an Apache Kafka broker, and `rebalancer operator` as
its own process. The groups have no consumers (each names a topic that exists on the broker), so
every reconcile is the operator's full path: parse, describe the group and its topic on the
broker, write status. Measured:

1. Time from creating all groups to every one having status written (status.group.observedAt),
   and per group the latency from its creation to its first status (p50, p90, p99).
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
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.operator.e2e.support import free_port  # noqa: E402

from rebalancer_lab.api_faults import Fault, FaultyApi  # noqa: E402
from rebalancer_lab.controlplane import ControlPlane  # noqa: E402
from rebalancer_lab.producer import ensure_topic  # noqa: E402
from rebalancer_lab.running import Lab, LabConfig  # noqa: E402

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"
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
    r"^(?P<name>rebalancer_(?:kafka_requests|status_writes|kubernetes_requests)_total)"
    r"\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)


def operator_counts(url: str) -> Counter[str]:
    """The operator's own request and write counters from its /metrics: Kafka requests by API
    ("kafka DescribeGroups"), status writes by reason ("status changed"), its Kubernetes
    client's requests ("kube PATCH consumergroups/status")."""
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


def body(index: int, bootstrap: str, interval: int) -> dict[str, Any]:
    name = f"scale-{index:04d}"
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


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
        assert lab.plane is not None and lab.operator is not None
        with CountingProxy(lab.plane) as proxy:
            # The lab's operator again, through the proxy: from here on every request it makes
            # is counted, and nothing else is.
            lab.operator.stop(grace=15)
            lab.start_operator(proxy.write_kubeconfig(state / "operator-kubeconfig"))
            try:
                return measure(lab, lab.plane, proxy, args)
            finally:
                # Before the proxy it talks through goes, not after it with the lab.
                lab.operator.stop(grace=15)
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


def measure(
    lab: Lab, plane: ControlPlane, counter: CountingProxy, args: argparse.Namespace
) -> dict[str, Any]:
    assert lab.api_client is not None and lab.operator is not None
    assert lab.operator.process is not None
    pid = lab.operator.process.pid
    api = client.CustomObjectsApi(lab.api_client)
    asyncio.run(ensure_topic(lab.bootstrap, TOPIC, 4))
    # Idle means started: the operator answers /healthz once kopf and its handlers are loaded.
    health = f"http://{lab.config.host}:{lab.config.reports_port}/healthz"
    for _ in range(120):
        try:
            with urllib.request.urlopen(health, timeout=2):
                break
        except OSError:
            time.sleep(0.5)
    time.sleep(2)
    idle = process_sample(pid)
    say(f"operator pid {pid} idle: RSS {idle['rss_mb']:.1f} MB, {idle['threads']:.0f} threads")

    metrics_url = f"http://{lab.config.host}:{lab.config.reports_port}/metrics"
    created: dict[str, float] = {}
    own_before = operator_counts(metrics_url)
    operator_log = lab.config.state_dir / "logs" / "operator.log"
    runs_before = kopf_runs(operator_log)
    before = counter.snapshot()
    server_before = apiserver_requests(plane)
    started = time.monotonic()

    def create(index: int) -> None:
        doc = body(index, lab.bootstrap, args.interval)
        api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, doc)
        created[doc["metadata"]["name"]] = time.monotonic()

    with ThreadPoolExecutor(8) as pool:
        for done, _ in enumerate(pool.map(create, range(args.groups)), 1):
            if done % 200 == 0:
                say(f"created {done}/{args.groups}")
    created_in = time.monotonic() - started
    say(f"created {args.groups} ConsumerGroups in {created_in:.1f} s")

    first_status: dict[str, float] = {}
    polls = 0
    deadline = started + args.timeout
    while len(first_status) < args.groups and time.monotonic() < deadline:
        listing = api.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
        polls += 1
        now = time.monotonic()
        for item in listing["items"]:
            name = item["metadata"]["name"]
            group = (item.get("status") or {}).get("group") or {}
            if name in created and name not in first_status and group.get("observedAt"):
                first_status[name] = now
        say(
            f"status written for {len(first_status)}/{args.groups}; "
            f"RSS {process_sample(pid)['rss_mb']:.0f} MB"
        )
        time.sleep(1.0)
    reconciled_in = time.monotonic() - started
    # librdkafka reports its counts every 10 s: the reconcile's last requests are counted then.
    time.sleep(11)
    own_reconcile = operator_counts(metrics_url) - own_before
    runs_reconcile = kopf_runs(operator_log) - runs_before
    operator_requests = counter.snapshot() - before
    server_requests = apiserver_requests(plane) - server_before
    total_operator = sum(operator_requests.values())
    latencies = [first_status[name] - created[name] for name in first_status]
    loaded = process_sample(pid)
    say(
        f"{len(first_status)}/{args.groups} reconciled in {reconciled_in:.1f} s; "
        f"p50 {percentile(latencies, 50):.1f} s, p99 {percentile(latencies, 99):.1f} s; "
        f"{total_operator / max(1, len(first_status)):.1f} API requests per reconcile"
    )
    say(
        f"PATCH consumergroups/status: {operator_requests['PATCH consumergroups/status']} "
        f"through the proxy, {server_requests['PATCH consumergroups/status']} at kube-apiserver; "
        f"kube-apiserver served {sum(server_requests.values())} requests in all "
        f"(every client: the bench's {args.groups} creates and {polls} lists among them)"
    )

    # Soak: nothing changes; the operator keeps observing every group every interval.
    samples: list[dict[str, float]] = []
    soak_start = time.monotonic()
    soak_before = counter.snapshot()
    own_soak_before = operator_counts(metrics_url)
    runs_soak_before = kopf_runs(operator_log)
    server_soak_before = apiserver_requests(plane)
    while time.monotonic() - soak_start < args.soak:
        time.sleep(10)
        sample = {"t": time.monotonic() - soak_start, **process_sample(pid)}
        samples.append(sample)
        say(
            f"soak {sample['t']:.0f}/{args.soak} s: RSS {sample['rss_mb']:.1f} MB, "
            f"{sample['threads']:.0f} threads, {sample['fds']:.0f} fds, "
            f"CPU {sample['cpu_s']:.0f} s"
        )
    soak_requests = counter.snapshot() - soak_before
    own_soak = operator_counts(metrics_url) - own_soak_before
    runs_soak = kopf_runs(operator_log) - runs_soak_before
    server_soak_requests = apiserver_requests(plane) - server_soak_before
    soak_seconds = max(1e-9, time.monotonic() - soak_start)
    kafka_soak = _only(own_soak, "kafka ")
    kafka_soak_total = sum(kafka_soak.values())
    soak_total = sum(soak_requests.values())
    half = [s for s in samples if s["t"] >= args.soak / 2] or samples
    growth = (half[-1]["rss_mb"] - half[0]["rss_mb"]) if half else 0.0
    span_min = max(1e-9, (half[-1]["t"] - half[0]["t"]) / 60) if half else 1.0
    result = {
        "groups": args.groups,
        "interval_seconds": args.interval,
        "created_in_s": round(created_in, 1),
        "reconciled": len(first_status),
        "reconciled_in_s": round(reconciled_in, 1),
        "latency_s": {q: round(percentile(latencies, q), 2) for q in (50, 90, 99) if latencies}
        | ({"max": round(max(latencies), 2)} if latencies else {}),
        "operator_requests_during_reconcile": dict(
            sorted((k, v) for k, v in operator_requests.items() if v > 0)
        ),
        "requests_per_reconcile": round(total_operator / max(1, len(first_status)), 2),
        "apiserver_requests_during_reconcile_all_clients": dict(sorted(server_requests.items())),
        "rss_mb": {"idle": round(idle["rss_mb"], 1), "after_reconcile": round(loaded["rss_mb"], 1)},
        "soak_s": args.soak,
        "soak_requests_per_s": round(soak_total / soak_seconds, 1),
        "soak_requests_per_group_per_interval": round(
            soak_total / soak_seconds * args.interval / max(1, args.groups), 2
        ),
        "soak_requests": dict(sorted(soak_requests.items())),
        "apiserver_soak_requests_per_s_all_clients": round(
            sum(server_soak_requests.values()) / soak_seconds, 1
        ),
        "kafka_requests_during_reconcile": _only(own_reconcile, "kafka "),
        "kafka_requests_per_reconcile": round(
            sum(_only(own_reconcile, "kafka ").values()) / max(1, len(first_status)), 2
        ),
        "status_writes_during_reconcile": _only(own_reconcile, "status "),
        # What held the operator's event loop: kopf's runs per handler, timer and daemon.
        "kopf_runs_during_reconcile": dict(sorted(runs_reconcile.items())),
        "kopf_runs_during_soak": dict(sorted(runs_soak.items())),
        "soak_kafka_requests": kafka_soak,
        "soak_kafka_requests_per_s": round(kafka_soak_total / soak_seconds, 2),
        "soak_kafka_requests_per_interval": round(
            kafka_soak_total / soak_seconds * args.interval, 1
        ),
        "soak_status_writes": _only(own_soak, "status "),
        # The freshness stamps not yet due in a soak shorter than --status-refresh: at rest,
        # one PATCH per group per refresh interval on top of what the soak measured.
        "status_refresh_seconds": args.status_refresh,
        "quiet_observe_factor": args.quiet_factor,
        "status_refresh_requests_per_s_at_rest": round(args.groups / args.status_refresh, 2),
        "soak_rss_growth_second_half_mb": round(growth, 1),
        "soak_rss_growth_mb_per_min": round(growth / span_min, 2),
        "soak_threads": [int(s["threads"]) for s in samples],
        "soak_fds": [int(s["fds"]) for s in samples],
        "soak_cpu_share": round((samples[-1]["cpu_s"] - loaded["cpu_s"]) / samples[-1]["t"], 3)
        if samples
        else None,
        "samples": samples,
        "latencies": sorted(round(v, 3) for v in latencies),
    }
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib not installed: no PNG")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    latencies = result["latencies"]
    left.plot(latencies, [100 * (i + 1) / len(latencies) for i in range(len(latencies))])
    left.set_xlabel("creation to first status (s)")
    left.set_ylabel("% of ConsumerGroups")
    left.set_title(f"{result['groups']} ConsumerGroups: time to status")
    samples = result["samples"]
    right.plot([s["t"] for s in samples], [s["rss_mb"] for s in samples], label="RSS (MB)")
    right.plot([s["t"] for s in samples], [s["threads"] for s in samples], label="threads")
    right.plot([s["t"] for s in samples], [s["fds"] for s in samples], label="open files")
    right.set_xlabel("soak time (s)")
    right.set_title("operator during the soak")
    right.set_ylim(bottom=0)
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    say(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
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
    args = parser.parse_args()
    result = run(args)
    png = Path(args.png)
    png.with_suffix(".json").write_text(
        json.dumps({k: v for k, v in result.items() if k not in ("samples",)}, indent=1) + "\n"
    )
    summary = {k: v for k, v in result.items() if k not in ("samples", "latencies")}
    print(json.dumps(summary, indent=1))
    plot(result, png)
    return 0 if result["reconciled"] == args.groups else 1


if __name__ == "__main__":
    sys.exit(main())
