"""Enforced rebalances in the lab: latency, cost per enforcement, and topic creation.

    .venv/bin/python bench/enforce.py [--rounds 10] [--members 12] [--no-mock] [--png PATH]
        [--client librdkafka|kafkajs|all]

Everything is real: an Apache Kafka broker (classic groups eager and cooperative, and KIP-848
groups; librdkafka's mock cluster for a second opinion), `python -m rebalancer_lab.consumer`
processes as the application, reporting every rebalance (docs/member-reports.md), and
`rebalancer sidecar` processes doing the enforcing.

1. Latency from the POST to the new generation held by every application member (the group is
   Stable again), cooperative-sticky: median and p95.
2. Per enforcement, eager (range) against cooperative-sticky: new generations the application
   members see, and partitions revoked from them.
3. A topic matching N pattern-subscribed members appears: rebalances until every member consumes
   it, managed (the sidecar enforces once at creation) against unmanaged (each member finds it at
   its own metadata refresh, refresh intervals staggered).

4. `--client kafkajs`: the same enforcements of a fleet of kafkajs consumers
   (tests/clients/kafka/kafkajs,
   `node consumer.js`; protocol `RoundRobinAssigner`, and an application-named assignor), which
   the sidecar visits (docs/enforcing.md, "Client libraries"); with partition-seconds held by
   the sidecars (application partitions that no application member held in a generation).

Figures describe these brokers on this machine. Prints progress while it runs and a table at
the end; writes a PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "lab")]

from confluent_kafka.admin import AdminClient  # noqa: E402

from rebalancer.structs.enforcement import control_topic, flip_topic  # noqa: E402
from rebalancer_lab.broker import KafkaBroker  # noqa: E402
from rebalancer_lab.mock_cluster import MockCluster  # noqa: E402
from rebalancer_lab.producer import ensure_topic  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "clients" / "kafka"))
from kafkajs_support import KafkajsConsumer  # noqa: E402

SESSION_MS = 6000
QUIET_S = 4.0  # a little more than one initial rebalance delay (3 s)
REPORT_TOKEN = "bench-report"
SIDECAR_TOKEN = "bench-sidecar"


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Collector:
    """Member reports, received on a thread of its own."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop: Any = None
        threading.Thread(target=self._serve, daemon=True).start()
        self._ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/reports"

    def _serve(self) -> None:
        from aiohttp import web

        async def receive(request: web.Request) -> web.Response:
            body = json.loads(await request.read())
            with self._lock:
                self.bodies.append(body)
            return web.json_response({}, status=202)

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/reports", receive)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            stop = asyncio.Event()
            self._stop = (asyncio.get_running_loop(), stop)
            self._ready.set()
            await stop.wait()
            await runner.cleanup()

        asyncio.run(main())

    def close(self) -> None:
        if self._stop is not None:
            loop, stop = self._stop
            loop.call_soon_threadsafe(stop.set)

    def reports(self, host: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for body in self.bodies if body["member"]["host"] == host]


def owned(report: dict[str, Any] | None) -> frozenset[tuple[str, int]]:
    if report is None:
        return frozenset()
    return frozenset((entry["topic"], entry["partition"]) for entry in report["partitions"])


class Lab:
    """Processes of one scenario; everything is killed at the end."""

    def __init__(self, bootstrap: str, logs: Path) -> None:
        self.bootstrap = bootstrap
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []
        self.collector = Collector()

    def _env(self, pod: str, group_id: str, extra: dict[str, str]) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(ROOT / "lab")]),
            "PYTHONUNBUFFERED": "1",
            "POD_NAME": pod,
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "KAFKA_GROUP_ID": group_id,
            "REBALANCER_REPORT_URL": self.collector.url,
            "REBALANCER_REPORT_TOKEN": REPORT_TOKEN,
            "REBALANCER_REPORT_INTERVAL_S": "1",
            **extra,
        }

    def _spawn(self, command: list[str], env: dict[str, str], log: str) -> None:
        with (self.logs / log).open("wb") as sink:
            self.processes.append(
                subprocess.Popen(
                    command, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink
                )
            )

    def consumer(self, pod: str, group_id: str, extra: dict[str, str]) -> None:
        command = [sys.executable, "-m", "rebalancer_lab.consumer"]
        self._spawn(command, self._env(pod, group_id, extra), f"{pod}.log")

    def sidecar(self, pod: str, group_id: str, extra: dict[str, str]) -> str:
        token = self.logs / "sidecar.token"
        token.write_text(SIDECAR_TOKEN)
        port = free_port()
        command = [sys.executable, "-m", "rebalancer", "sidecar", "--token-file", str(token)]
        command += ["--listen", f"127.0.0.1:{port}", "--rate-per-minute", "600", "--burst", "50"]
        self._spawn(command, self._env(pod, group_id, extra), f"{pod}-sidecar.log")
        return f"http://127.0.0.1:{port}"

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        for process in self.processes:
            process.wait()
        self.collector.close()


def call(url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {SIDECAR_TOKEN}", "Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
    except OSError:
        return 0, {}


def joined(url: str) -> bool:
    return int(call(url + "/v1/group")[1].get("generation", -1)) >= 0


def wait_for(probe: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value is not None and value is not False:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout:g} s")


def settled(
    lab: Lab, hosts: list[str], everything: frozenset[tuple[str, int]], *, shared: bool = True
) -> int | None:
    """The generation every host reports once their partitions split `everything`. Under
    KIP-848 (`shared=False`) member epochs differ: the highest is returned."""
    latest = [(lab.collector.reports(host) or [None])[-1] for host in hosts]
    if any(report is None or report["event"] not in ("assigned", "heartbeat") for report in latest):
        return None
    parts = [owned(report) for report in latest]
    generations = {report["generation"] for report in latest if report is not None}
    if (shared and len(generations) != 1) or frozenset().union(*parts) != everything:
        return None
    if sum(len(part) for part in parts) != len(everything):
        return None
    return max(generations)


def broker_stable(admin: AdminClient, group_id: str) -> bool:
    """A KIP-848 group the coordinator calls Stable: every member at its target assignment.
    Its members report no callback when nothing moves, so the broker is the only witness."""
    future = admin.describe_consumer_groups([group_id], request_timeout=10)[group_id]
    try:
        return str(future.result(timeout=15).state.name) == "STABLE"
    except Exception:  # not known yet: not Stable
        return False


def settled_once(
    lab: Lab, hosts: list[str], everything: frozenset[tuple[str, int]], *, shared: bool = True
) -> tuple[int] | None:
    # Generation 0 is falsy: wait for a tuple.
    generation = settled(lab, hosts, everything, shared=shared)
    return None if generation is None else (generation,)


def window_costs(lab: Lab, hosts: list[str], since: float) -> tuple[int, int, float | None]:
    """(new generations seen, partitions revoked from the application, time by which every host
    held a new generation) from reports since `since`. Generations are counted per member
    against its own last one before `since` (KIP-848 member epochs differ between members)."""
    counts: list[int] = []
    revoked = 0
    reached: list[float] = []
    for host in hosts:
        previous: frozenset[tuple[str, int]] | None = None
        baseline = -1
        seen: set[int] = set()
        first_new: float | None = None
        for report in lab.collector.reports(host):
            parts = owned(report)
            if report["timestamp"] < since:
                baseline = max(baseline, report["generation"])
            else:
                if report["generation"] > baseline:
                    seen.add(report["generation"])
                    if first_new is None and report["event"] == "assigned":
                        first_new = report["timestamp"]
                if report["event"] in ("revoked", "lost") and previous is not None:
                    revoked += len(previous - parts)
            previous = parts
        counts.append(len(seen))
        if first_new is not None:
            reached.append(first_new)
    stable_at = max(reached) if len(reached) == len(hosts) else None
    return max(counts, default=0), revoked, stable_at


@dataclass
class EnforceRun:
    label: str
    latencies: list[float] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)
    revoked: list[int] = field(default_factory=list)
    partitions: int = 0
    # Application partitions held by a sidecar, times seconds, per enforcement.
    held: list[float] = field(default_factory=list)


def run_enforcements(
    label: str,
    bootstrap: str,
    make_topic: Callable[[str, int], None],
    *,
    strategy: str,
    rounds: int,
    apps: int = 3,
    sidecars: int | None = None,
    partitions: int = 6,
    protocol: str = "classic",
) -> EnforceRun:
    result = EnforceRun(label, partitions=partitions)
    group_id, topic = f"bench-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}"
    make_topic(topic, partitions)
    make_topic(control_topic(group_id), 1)
    make_topic(flip_topic(group_id), 1)
    logs = Path(tempfile.mkdtemp(prefix="bench-enforce-"))
    lab = Lab(bootstrap, logs)
    if protocol == "consumer":
        kafka = {"KAFKA_GROUP_PROTOCOL": "consumer"}
    else:
        kafka = {
            "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": strategy,
            "KAFKA_SESSION_TIMEOUT_MS": str(SESSION_MS),
            "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
        }
    hosts = [f"app-{number}" for number in range(apps)]
    everything = frozenset((topic, partition) for partition in range(partitions))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        urls = []
        for number, host in enumerate(hosts):
            lab.consumer(host, group_id, {**kafka, "KAFKA_TOPICS": topic})
            if number < (apps if sidecars is None else sidecars):
                urls.append(lab.sidecar(host, group_id, kafka))
        say(f"[{label}] {apps} consumers and {len(urls)} sidecar(s) starting")
        shared = protocol != "consumer"
        wait_for(
            lambda: settled_once(lab, hosts, everything, shared=shared), 90, "the group settles"
        )
        for url in urls:
            wait_for(lambda url=url: joined(url), 60, "the sidecars join")
        time.sleep(QUIET_S)
        for number in range(1, rounds + 1):
            if not shared:
                wait_for(lambda: broker_stable(admin, group_id), 60, "the group is Stable")
            url = random.choice(urls)
            started = time.time()
            status, body = call(
                url + "/v1/enforce",
                {"groupId": group_id, "requestId": f"bench-{number}", "waitSeconds": 40},
            )
            answered = time.time()
            if status != 200 or body.get("status") != "enforced":
                say(f"[{label}] enforcement {number}: {status} {body}")
                continue
            target = body["generation"]
            reconciled = None
            if not shared:
                # The new epoch reaches each member at its next heartbeat; Stable again once all
                # hold it (group.consumer.heartbeat.interval.ms, 5 s by default).
                wait_for(lambda: broker_stable(admin, group_id), 60, "every member reconciled")
                reconciled = time.time()
            if shared:
                wait_for(
                    lambda target=target: (settled(lab, hosts, everything) or -1) >= target,
                    60,
                    "the application reaches the new generation",
                )
            time.sleep(QUIET_S)
            seen, revoked, stable_at = window_costs(lab, hosts, started)
            result.held.append(sidecar_held(lab, [f"{h}-sidecar" for h in hosts], topic, started))
            # Under KIP-848 unchanged members get no callback: the broker's Stable is the mark.
            latency = (stable_at or reconciled or answered) - started
            result.latencies.append(latency)
            result.generations.append(seen)
            result.revoked.append(revoked)
            say(
                f"[{label}] enforcement {number}/{rounds}: {seen} new generation(s) seen by the "
                f"application, {revoked} partition(s) revoked, stable after {latency:.2f} s"
            )
    finally:
        lab.close()
    return result


def sidecar_held(lab: Lab, sidecars: list[str], topic: str, since: float) -> float:
    """Partition-seconds of `topic` in the sidecars' own reports since `since` (one heartbeat
    report a second each; a sidecar's member holds control partitions only, so expect 0)."""
    held = 0.0
    for host in sidecars:
        for report in lab.collector.reports(host):
            if report["timestamp"] >= since and report["event"] == "heartbeat":
                held += sum(1 for name, _ in owned(report) if name == topic)
    return held


def run_kafkajs_enforcements(
    label: str,
    bootstrap: str,
    make_topic: Callable[[str, int], None],
    *,
    assigner: str,
    rounds: int,
    apps: int = 3,
    partitions: int = 6,
) -> EnforceRun:
    """Enforcements of a kafkajs fleet with a sidecar per pod (the VISIT lever)."""
    result = EnforceRun(label, partitions=partitions)
    group_id, topic = f"bench-{uuid.uuid4().hex[:6]}", f"bench-{uuid.uuid4().hex[:6]}"
    make_topic(topic, partitions)
    logs = Path(tempfile.mkdtemp(prefix="bench-enforce-kafkajs-"))
    lab = Lab(bootstrap, logs)
    everything = frozenset((topic, partition) for partition in range(partitions))
    members = [
        KafkajsConsumer(f"app-{n}", bootstrap, group_id, topic, logs, ASSIGNER=assigner)
        for n in range(apps)
    ]

    def generation_of() -> int | None:
        latest = [m.assignments()[-1] if m.assignments() else None for m in members]
        if any(item is None for item in latest):
            return None
        generations = {item["generation"] for item in latest if item is not None}
        covered = frozenset().union(*(item["partitions"] for item in latest if item))
        return generations.pop() if len(generations) == 1 and covered == everything else None

    try:
        before = wait_for(lambda: (g := generation_of()) is not None and (g,), 90, "settled")[0]
        # The fleet's settings name no strategy: the sidecars read the group's protocol.
        urls = [
            lab.sidecar(f"app-{n}", group_id, {"KAFKA_SESSION_TIMEOUT_MS": "10000"})
            for n in range(apps)
        ]
        for url in urls:
            wait_for(lambda url=url: joined(url), 60, "the sidecars join their lease group")
        say(f"[{label}] {apps} kafkajs consumers at generation {before}, {apps} sidecars")
        time.sleep(QUIET_S)
        for number in range(1, rounds + 1):
            current = generation_of()
            url = random.choice(urls)
            started = time.time()
            status, body = call(
                url + "/v1/enforce",
                {"groupId": group_id, "requestId": f"bench-{number}", "waitSeconds": 40},
            )
            if status != 200 or body.get("status") != "enforced":
                say(f"[{label}] enforcement {number}: {status} {body}")
                continue
            wait_for(lambda c=current: (generation_of() or -1) > (c or -1), 60, "new generation")
            time.sleep(QUIET_S)
            new = sorted(
                {i["generation"] for m in members for i in m.assignments() if i["at"] >= started}
            )
            # Every member's assignment of the first new generation: the enforcement's end.
            first = [
                i["at"]
                for m in members
                for i in m.assignments()
                if new and i["generation"] == new[0]
            ]
            latency = (max(first) if len(first) == apps else time.time()) - started
            held = 0.0
            for generation in new:
                items = [
                    i for m in members for i in m.assignments() if i["generation"] == generation
                ]
                uncovered = everything - frozenset().union(*(i["partitions"] for i in items))
                later = [
                    i["at"]
                    for m in members
                    for i in m.assignments()
                    if i["generation"] > generation
                ]
                end = min(later) if later else time.time()
                held += len(uncovered) * max(0.0, end - max(i["at"] for i in items))
            result.latencies.append(latency)
            result.generations.append(len(new))
            result.revoked.append(partitions)  # eager: every member gives everything up
            result.held.append(held)
            say(
                f"[{label}] enforcement {number}/{rounds}: {len(new)} new generation(s), "
                f"every member rejoined after {latency:.2f} s, sidecar-held "
                f"{held:.1f} partition-s ({body['message']})"
            )
    finally:
        for member in members:
            member.kill()
        lab.close()
    return result


@dataclass
class TopicRun:
    label: str
    members: int
    rebalances: int = 0
    all_consuming_after: float | None = None
    revoked: int = 0


def run_topic_creation(
    label: str,
    bootstrap: str,
    make_topic: Callable[[str, int], None],
    *,
    members: int,
    managed: bool,
) -> TopicRun:
    result = TopicRun(label, members)
    group_id, prefix = f"bench-{uuid.uuid4().hex[:6]}", f"t{uuid.uuid4().hex[:6]}"
    make_topic(f"{prefix}.a", members)
    logs = Path(tempfile.mkdtemp(prefix="bench-topics-"))
    lab = Lab(bootstrap, logs)
    hosts = [f"member-{number:02d}" for number in range(members)]
    base = {
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
        "KAFKA_SESSION_TIMEOUT_MS": str(SESSION_MS),
        "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
        "KAFKA_TOPIC_PATTERN": f"^{prefix}\\..*",
    }
    first = frozenset((f"{prefix}.a", p) for p in range(members))
    both = first | frozenset((f"{prefix}.b", p) for p in range(members))
    try:
        sidecar = None
        for number, host in enumerate(hosts):
            properties = logs / f"{host}.properties"
            if managed:
                # Refresh on their own only every 5 minutes, and refresh on every rejoin.
                properties.write_text(
                    "topic.metadata.refresh.interval.ms=300000\nmetadata.max.age.ms=3000\n"
                )
            else:
                # Each member finds new topics at its own refresh, KAFKA-7126's situation.
                properties.write_text(
                    f"topic.metadata.refresh.interval.ms={4000 + 1500 * number}\n"
                )
            lab.consumer(host, group_id, {**base, "KAFKA_CONFIG_FILE": str(properties)})
        if managed:
            make_topic(control_topic(group_id), 1)
            make_topic(flip_topic(group_id), 1)
            sidecar = lab.sidecar(hosts[0], group_id, base)
        say(f"[{label}] {members} pattern-subscribed members starting")
        wait_for(lambda: settled_once(lab, hosts, first), 120, "the group settles")
        if sidecar is not None:
            wait_for(lambda: joined(sidecar), 60, "the sidecar joins")
        time.sleep(QUIET_S)
        created = time.time()
        make_topic(f"{prefix}.b", members)
        say(f"[{label}] created {prefix}.b ({members} partitions)")
        if sidecar is not None:
            call(
                sidecar + "/v1/enforce",
                {"groupId": group_id, "requestId": f"topics-{prefix}", "waitSeconds": 60},
            )
        wait_for(lambda: settled(lab, hosts, both) is not None, 150, "every member consumes it")
        all_in = time.time()
        # Quiet: no further generation for a while.
        last = settled(lab, hosts, both)
        while True:
            time.sleep(QUIET_S * 1.5)
            now = settled(lab, hosts, both)
            if now == last:
                break
            last = now
        seen, revoked, _ = window_costs(lab, hosts, created)
        result.rebalances, result.revoked = seen, revoked
        result.all_consuming_after = all_in - created
        say(
            f"[{label}] {seen} rebalance(s) after the topic appeared; every member consuming it "
            f"after {result.all_consuming_after:.1f} s"
        )
    finally:
        lab.close()
    return result


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def render(enforce: list[EnforceRun], topics: list[TopicRun]) -> str:
    lines = [
        "Per enforcement (mean over the rounds):",
        f"{'broker / assignor':36} {'rounds':>6} {'generations':>11} {'revoked':>8} "
        f"{'of':>3} {'median s':>9} {'p95 s':>7} {'held p-s':>9}",
    ]
    for run in enforce:
        if not run.latencies:
            lines.append(f"{run.label:36} {'0':>6}  (no enforcement succeeded)")
            continue
        lines.append(
            f"{run.label:36} {len(run.latencies):>6} "
            f"{statistics.mean(run.generations):>11.2f} {statistics.mean(run.revoked):>8.2f} "
            f"{run.partitions:>3} {statistics.median(run.latencies):>9.2f} "
            f"{percentile(run.latencies, 0.95):>7.2f} "
            f"{sum(run.held) if run.held else 0.0:>9.1f}"
        )
    if topics:
        lines += [
            "",
            "Topic creation (pattern subscription, cooperative-sticky, Apache Kafka):",
            f"{'':36} {'members':>7} {'rebalances':>10} {'revoked':>8} "
            f"{'all consuming after s':>22}",
        ]
        for run in topics:
            after = f"{run.all_consuming_after:.1f}" if run.all_consuming_after is not None else "-"
            lines.append(
                f"{run.label:36} {run.members:>7} {run.rebalances:>10} {run.revoked:>8} {after:>22}"
            )
        if len(topics) == 2 and topics[0].rebalances:
            ratio = topics[1].rebalances / topics[0].rebalances
            lines.append(f"unmanaged / managed rebalances: {ratio:.1f}x")
    return "\n".join(lines)


def plot(enforce: list[EnforceRun], topics: list[TopicRun], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = [run for run in enforce if run.latencies]
    figure, axes = plt.subplots(1, 3, figsize=(16, 5))
    labels = [textwrap.fill(run.label, 16) for run in runs]
    axes[0].boxplot([run.latencies for run in runs])
    axes[0].set_xticks(range(1, len(runs) + 1), labels, fontsize=7)
    axes[0].set_ylabel("seconds")
    axes[0].set_title("request to new Stable generation")
    positions = range(len(runs))
    axes[1].bar(
        [p - 0.2 for p in positions],
        [statistics.mean(r.generations) for r in runs],
        0.4,
        label="new generations",
    )
    axes[1].bar(
        [p + 0.2 for p in positions],
        [statistics.mean(r.revoked) for r in runs],
        0.4,
        label="partitions revoked",
    )
    axes[1].set_xticks(list(positions), labels, fontsize=7)
    axes[1].set_title("cost of one enforcement (application members)")
    axes[1].legend()
    if topics:
        axes[2].bar(
            [textwrap.fill(t.label, 20) for t in topics],
            [t.rebalances for t in topics],
            color=["tab:green", "tab:red"],
        )
        axes[2].set_ylabel("rebalances after the topic appeared")
        axes[2].set_title(f"new topic, {topics[0].members} pattern-subscribed members")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="enforcements per configuration")
    parser.add_argument("--members", type=int, default=12, help="members for topic creation")
    parser.add_argument("--no-mock", action="store_true", help="skip librdkafka's mock cluster")
    parser.add_argument("--no-topics", action="store_true", help="skip the topic-creation part")
    parser.add_argument("--png", default="bench/enforce.png", help="chart path (matplotlib)")
    parser.add_argument("--json", help="also write the raw figures here")
    parser.add_argument(
        "--client",
        choices=("librdkafka", "kafkajs", "all"),
        default="librdkafka",
        help="the application's client library (kafkajs: node consumers, the VISIT lever)",
    )
    args = parser.parse_args()
    random.seed(7)
    enforce: list[EnforceRun] = []
    topics: list[TopicRun] = []
    started = time.monotonic()
    with KafkaBroker(log_dir=tempfile.mkdtemp(prefix="bench-kafka-")) as kafka:
        say(f"Apache Kafka at {kafka.bootstrap}")

        def kafka_topic(name: str, partitions: int) -> None:
            asyncio.run(ensure_topic(kafka.bootstrap, name, partitions))

        for label, assigner in (
            ("kafka kafkajs RoundRobinAssigner", "roundrobin"),
            ("kafka kafkajs application-named", "orders-assignor"),
        ):
            if args.client in ("kafkajs", "all"):
                enforce.append(
                    run_kafkajs_enforcements(
                        label, kafka.bootstrap, kafka_topic, assigner=assigner, rounds=args.rounds
                    )
                )
        for label, strategy, protocol in (
            ()
            if args.client == "kafkajs"
            else (
                ("kafka cooperative-sticky", "cooperative-sticky", "classic"),
                ("kafka eager (range)", "range", "classic"),
                # A sidecar in every pod, as in the classic groups: Kafka's uniform assignor gives
                # the control partition to one of them.
                ("kafka KIP-848 (consumer protocol)", "", "consumer"),
            )
        ):
            enforce.append(
                run_enforcements(
                    label,
                    kafka.bootstrap,
                    kafka_topic,
                    strategy=strategy,
                    rounds=args.rounds,
                    protocol=protocol,
                )
            )
        if not args.no_topics and args.client != "kafkajs":
            topics.append(
                run_topic_creation(
                    "managed (enforced at creation)",
                    kafka.bootstrap,
                    kafka_topic,
                    members=args.members,
                    managed=True,
                )
            )
            topics.append(
                run_topic_creation(
                    "unmanaged (own metadata refresh)",
                    kafka.bootstrap,
                    kafka_topic,
                    members=args.members,
                    managed=False,
                )
            )
    if not args.no_mock and args.client != "kafkajs":
        with MockCluster(initial_rebalance_delay_ms=3000) as mock:
            mock.set_consumer_group_timeouts(SESSION_MS, 1000)
            say(f"librdkafka mock cluster at {mock.bootstrap}")
            rounds = max(3, args.rounds // 2)
            for label, strategy in (
                ("mock cooperative-sticky", "cooperative-sticky"),
                ("mock eager (range)", "range"),
            ):
                enforce.append(
                    run_enforcements(
                        label, mock.bootstrap, mock.create_topic, strategy=strategy, rounds=rounds
                    )
                )
    say(f"done in {time.monotonic() - started:.0f} s")
    print()
    print(render(enforce, topics))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"enforce": [vars(r) for r in enforce], "topics": [vars(t) for t in topics]},
                indent=2,
            )
        )
    if plot(enforce, topics, Path(args.png)):
        print(f"\nchart: {args.png}")
    else:
        print("\n(matplotlib not installed: no chart)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
