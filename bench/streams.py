"""A Kafka Streams fleet's cold start, rolling update and scale-up, three ways, on one lab.

    .venv/bin/python bench/streams.py --protocols classic,streams \\
        --scenarios cold-start,statefulset-update,scale-up --repeat 3
    .venv/bin/python bench/streams.py --summarise      # the table and plot of the results file

On the lab (Apache Kafka, Kubernetes' own control plane, the lab's kubelet, the operator), each
pod is a JVM running the example application of `examples/streams-app` (a per-key count in a
RocksDB store with a changelog topic; rebalancer_lab.streams_example), N pods (--pods, 12) over
one input topic of P partitions (--partitions, 2N), so P tasks. Each pod's state directory is
kept across its replacements, as a volume claim per pod keeps it. Protocols: `classic` (the
consumer protocol with StreamsPartitionAssignor) and `streams` (KIP-1071, the broker assigns).

Scenarios (a fresh application, topic and ConsumerGroup per run; the input holds --records
records over N * 500 keys before the first pod starts):
- cold-start: a StatefulSet of N from nothing, each pod after the cell's start jitter; t0 = its
  creation;
- statefulset-update: a template change of a running StatefulSet of N, the new pods after the
  jitter; t0 = the patch;
- scale-up: a running StatefulSet of N/2 scaled to N, the new pods after the jitter.

Strategies:
- naive: Kubernetes' and Kafka Streams' defaults: OrderedReady, dynamic members, the client's
  45 s session; the broker's 3 s initial delay;
- tuned: what a careful user sets by hand: Parallel (all pods start within the jitter), static
  members (group.instance.id = the pod's name, so a replaced pod gets its tasks back without a
  rebalance), a 60 s session (the classic client's; on the streams protocol the session is the
  group's, whose 45 s default covers a restart here) and maxUnavailable 25 %;
- managed: tuned's settings, the join gate in the template and a ConsumerGroup with
  spec.policy.rollout enabled (settleSeconds 2), `spec.policy.protocol: streams` on the streams
  protocol, and with --streams-delay-ms the group's own initial delay
  (`spec.policy.groupConfigs.streams.initialRebalanceDelayMs`, set live before the first pod).
  With `--gate-holds Join` the gate holds only the join: the JVM starts at once and the example
  waits for the gate's file (REBALANCER_JOIN_GATE) just before KafkaStreams.start(), so its
  start-up overlaps the gathering; the results name such a sitting's cells.
Every run has a ConsumerGroup (observe-only unless managed), so every run has the operator's
view of the group beside the bench's.

Measured from the instances' own events (bench/streams_timeline.py says how): rebalances
(classic: generations the instances joined after t0, from their consumers' logs) or epochs (the
streams group's epoch, as the operator read it, after t0 less before), tasks moved (a task
running on another pod than before), task stores restored and the seconds spent restoring,
unowned task-seconds (tasks no running instance held, from t0 to Stable) and time to Stable (t0
to the last state change, every task then held, and nothing changing for QUIET_S).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client

from bench_labs import bench_lab, stop_on_sigterm
from rebalancer.planning.gate_templates import (
    GateOptions,
    gate_container,
    join_gate_env,
    join_gate_mount,
    join_gate_volume,
)
from rebalancer.structs.gates import GateHold
from rebalancer_lab.kubelet import JITTER_ANNOTATION, JITTER_SEED_ANNOTATION
from rebalancer_lab.running import Lab
from rebalancer_lab.streams_example import (
    example_jar,
    joined_generations,
    pod_events,
    streams_statefulset,
)
from rollouts import append_line, provenance, say, split_list
from streams_timeline import Figures, Incarnation, figures

NS = "default"
PROTOCOLS = ("classic", "streams")
SCENARIOS = ("cold-start", "statefulset-update", "scale-up")
STRATEGIES = ("naive", "tuned", "managed")
SHORT = {"cold-start": "cs", "statefulset-update": "su", "scale-up": "up"}
KAFKA_SESSION_MS = 45000  # the client's default, and the broker's for streams groups
STATIC_SESSION_MS = 60000  # covers a JVM's restart on a loaded machine
KAFKA_DELAY_MS = 3000
QUIET_S = 8.0
KEYS_PER_POD = 500
PROGRESS_EVERY_S = 30.0


@dataclass(frozen=True)
class Cell:
    protocol: str
    scenario: str
    pods: int
    partitions: int
    jitter: str

    @property
    def label(self) -> str:
        return (
            f"{self.scenario} N={self.pods} P={self.partitions} {self.protocol} "
            f"jitter {self.jitter}"
        )

    @property
    def replicas(self) -> tuple[int, int]:
        return (self.pods // 2, self.pods) if self.scenario == "scale-up" else (self.pods,) * 2

    @property
    def tasks(self) -> frozenset[str]:
        return frozenset(f"0_{p}" for p in range(self.partitions))


@dataclass(frozen=True)
class Setup:
    ordered: bool
    static: bool
    session_ms: int
    managed: bool
    streams_delay_ms: int | None = None
    gate_holds: str = "Pod"  # GateHold: the pod (an init container) or only the join


def setup_for(
    cell: Cell, strategy: str, streams_delay_ms: int | None, gate_holds: str = "Pod"
) -> Setup:
    """The module docstring says what each strategy sets and why."""
    if strategy == "naive":
        return Setup(ordered=True, static=False, session_ms=KAFKA_SESSION_MS, managed=False)
    tuned = Setup(ordered=False, static=True, session_ms=STATIC_SESSION_MS, managed=False)
    if strategy == "tuned":
        return tuned
    delay = streams_delay_ms if cell.protocol == "streams" else None
    return Setup(False, True, STATIC_SESSION_MS, True, delay, gate_holds)


def draw_seed_of(cell: Cell, repeat: int) -> int:
    """One seed per cell and repeat: the strategies of one repeat meet the same start delays."""
    return zlib.crc32(f"{cell.label}|{repeat}".encode())


def jittered(jitter: str, seed: int) -> dict[str, str]:
    return {JITTER_ANNOTATION: jitter, JITTER_SEED_ANNOTATION: str(seed)}


def workload(lab: Lab, cell: Cell, setup: Setup, name: str, replicas: int) -> dict[str, Any]:
    body = streams_statefulset(
        name,
        lab.bootstrap,
        f"{name}-input",
        replicas,
        group_protocol=cell.protocol,
        static=setup.static,
        session_timeout_ms=setup.session_ms,
        commit_interval_ms=1000,
        state_root=lab.config.state_dir / "streams-state" / name,
    )
    spec = body["spec"]
    spec["podManagementPolicy"] = "OrderedReady" if setup.ordered else "Parallel"
    rolling: dict[str, Any] = {"partition": 0}
    if not setup.ordered:
        rolling["maxUnavailable"] = "25%"
    spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    if setup.managed:
        pod = spec["template"]["spec"]
        hold = GateHold(setup.gate_holds)
        pod["initContainers"] = [gate_container(GateOptions(timeout_seconds=600, hold=hold))]
        if hold is GateHold.JOIN:
            # The JVM starts at once and waits for the gate's file only before it joins.
            container = pod["containers"][0]
            pod["volumes"] = [*pod["volumes"], join_gate_volume()]
            container["volumeMounts"] = [*container["volumeMounts"], join_gate_mount()]
            container["env"] = [*container["env"], join_gate_env()]
    return body


def consumer_group(lab: Lab, cell: Cell, setup: Setup, name: str) -> dict[str, Any]:
    policy: dict[str, Any] = {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 30}}
    if cell.protocol == "streams":
        policy["protocol"] = "streams"
    if setup.managed:
        policy["rollout"] = {
            "enabled": True,
            "settleSeconds": 2,
            "consumers": {"sessionTimeoutMs": setup.session_ms, "heartbeatIntervalMs": 3000},
        }
        if setup.streams_delay_ms is not None:
            streams = {"initialRebalanceDelayMs": setup.streams_delay_ms}
            policy["groupConfigs"] = {"streams": streams}
    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap], "profile": "apache-kafka"},
            "subscription": {"topics": [f"{name}-input"]},
            "workload": {"kind": "StatefulSet", "name": name},
            "policy": policy,
        },
    }


def fill_input(bootstrap: str, topic: str, partitions: int, records: int, keys: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(records):
        producer.produce(topic, key=f"key-{n % keys}", value=b"1")
        if n % 5000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError(f"{topic}: records left unsent")


@dataclass
class Run:
    cell: Cell
    strategy: str
    repeat: int
    setup: Setup
    figures: Figures
    t0: float
    rebalances: int | None  # classic: generations joined after t0
    epochs: int | None  # streams: the group epoch's rise after t0
    operator_rebalances: int | None
    settled: bool
    wall_s: float

    @property
    def stable_s(self) -> float | None:
        at = self.figures.stable_at
        return None if at is None else at - self.t0


class Bench:
    def __init__(self, lab: Lab, args: argparse.Namespace) -> None:
        assert lab.api_client is not None
        self.lab = lab
        self.args = args
        self.core = client.CoreV1Api(lab.api_client)
        self.apps = client.AppsV1Api(lab.api_client)
        self.custom = client.CustomObjectsApi(lab.api_client)
        self.pod_logs = lab.config.state_dir / "logs" / "pods"

    # -- the cluster ---------------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any]:
        with contextlib.suppress(client.ApiException):
            body = self.custom.get_namespaced_custom_object(
                "rebalancer.dev", "v1alpha1", NS, "consumergroups", name
            )
            return dict(body.get("status") or {})
        return {}

    def pods(self, name: str) -> list[dict[str, Any]]:
        raw = self.core.list_namespaced_pod(
            NS, label_selector=f"app={name}", _preload_content=False
        )
        items = json.loads(raw.data)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def lives(self, name: str) -> list[Incarnation]:
        """Every pod incarnation of the workload so far, from the lab kubelet's log folders."""
        found = []
        for folder in sorted(self.pod_logs.glob(f"{NS}_{name}-*_*")):
            pod = folder.name[len(NS) + 1 : folder.name.rindex("_")]
            events = _events(folder)
            found.append(Incarnation(pod, events))
        return found

    def generations(self, name: str) -> set[int]:
        return {
            generation
            for folder in self.pod_logs.glob(f"{NS}_{name}-*_*")
            for generation in joined_generations(folder)
        }

    def remove(self, name: str) -> None:
        with contextlib.suppress(client.ApiException):
            self.custom.delete_namespaced_custom_object(
                "rebalancer.dev", "v1alpha1", NS, "consumergroups", name
            )
        time.sleep(1)  # the operator hands the workload back before it goes
        with contextlib.suppress(client.ApiException):
            self.apps.delete_namespaced_stateful_set(name, NS)
        for _ in range(240):
            if not self.core.list_namespaced_pod(NS, label_selector=f"app={name}").items:
                return
            time.sleep(0.5)
        say(f"  {name}: pods still there after 120 s; going on")

    # -- one run ---------------------------------------------------------------------------

    def run(self, cell: Cell, strategy: str, repeat: int) -> Run:
        started = time.time()
        setup = setup_for(cell, strategy, self.args.streams_delay_ms, self.args.gate_holds)
        name = f"k{cell.protocol[0]}-{SHORT[cell.scenario]}-{strategy[0]}-{uuid.uuid4().hex[:5]}"
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        say(f"{cell.label} / {strategy} #{repeat}: {name} (load average {load})")
        keys = cell.pods * KEYS_PER_POD
        fill_input(self.lab.bootstrap, f"{name}-input", cell.partitions, self.args.records, keys)
        seed = draw_seed_of(cell, repeat)
        try:
            t0, end, settled, before = self.act(cell, setup, name, seed)
            return self.measured(
                cell, strategy, repeat, setup, name, (t0, end, settled, before), started
            )
        finally:
            self.remove(name)

    def act(
        self, cell: Cell, setup: Setup, name: str, seed: int
    ) -> tuple[float, float, bool, dict[str, Any]]:
        """(t0, end, settled, the group's status at t0)."""
        before, after = cell.replicas
        create = self.custom.create_namespaced_custom_object
        create(
            "rebalancer.dev",
            "v1alpha1",
            NS,
            "consumergroups",
            consumer_group(self.lab, cell, setup, name),
        )
        if setup.streams_delay_ms is not None:
            self.wait(lambda: self.delay_set(name), 60, f"{name}: the group's delay set")
        body = workload(self.lab, cell, setup, name, before)
        if cell.scenario in ("cold-start", "scale-up"):
            # A scale-up's new pods come from the same template: its jitter is there from the
            # start (a later template change would roll the running pods).
            body["spec"]["template"]["metadata"]["annotations"] = jittered(cell.jitter, seed)
        t_create = time.time()
        self.apps.create_namespaced_stateful_set(NS, body, _preload_content=False)
        settled = self.settle(cell, setup, name, before, t_create, "1", None)
        if cell.scenario == "cold-start":
            return t_create, time.time(), settled, {}
        time.sleep(2)
        status = self.status(name)
        status["joinedBefore"] = sorted(self.generations(name))
        previous = (status.get("rollout") or {}).get("rolloutId")
        t0 = time.time()
        if cell.scenario == "statefulset-update":
            container = {"name": "streams", "env": [{"name": "APP_VERSION", "value": "2"}]}
            template = {
                "metadata": {"annotations": jittered(cell.jitter, seed)},
                "spec": {"containers": [container]},
            }
            self.apps.patch_namespaced_stateful_set(name, NS, {"spec": {"template": template}})
            version = "2"
        else:
            self.apps.patch_namespaced_stateful_set(name, NS, {"spec": {"replicas": after}})
            version = "1"
        settled = self.settle(cell, setup, name, after, t0, version, previous)
        return t0, time.time(), settled, status

    def delay_set(self, name: str) -> bool:
        configs = (self.status(name).get("settings") or {}).get("perGroupConfigs") or {}
        return configs.get("state") == "applied"

    def settle(
        self,
        cell: Cell,
        setup: Setup,
        name: str,
        replicas: int,
        since: float,
        version: str,
        previous: str | None,
    ) -> bool:
        """Waits until every pod of `version` is Ready, every task is held, nothing changed for
        QUIET_S and (managed) the operator's rollout Completed; False on the timeout."""

        def done() -> bool:
            pods = self.pods(name)
            fresh = [p for p in pods if _version(p) == version and _ready(p)]
            if len(fresh) != replicas or len(pods) != replicas:
                return False
            found = figures(self.lives(name), cell.tasks, since, time.time())
            if found.stable_at is None or time.time() - found.stable_at < QUIET_S:
                return False
            if not setup.managed:
                return True
            rollout = self.status(name).get("rollout") or {}
            return rollout.get("rolloutId") != previous and rollout.get("phase") == "Completed"

        return self.wait(done, self.args.settle_timeout, f"{name}: settled")

    def wait(self, check: Callable[[], bool], timeout: float, what: str) -> bool:
        deadline = time.time() + timeout
        shown = time.time()
        while time.time() < deadline:
            if check():
                return True
            if time.time() - shown > PROGRESS_EVERY_S:
                shown = time.time()
                say(f"  ... waiting for {what}")
            time.sleep(1)
        say(f"  {what}: not within {timeout:.0f} s; measured as it stands")
        return False

    def measured(
        self,
        cell: Cell,
        strategy: str,
        repeat: int,
        setup: Setup,
        name: str,
        moments: tuple[float, float, bool, dict[str, Any]],
        started: float,
    ) -> Run:
        t0, end, settled, before = moments
        found = figures(self.lives(name), cell.tasks, t0, end)
        rebalances = epochs = None
        if cell.protocol == "classic":
            old = max(before.get("joinedBefore") or [0])
            rebalances = len({g for g in self.generations(name) if g > old})
        # The operator's last look after the end: its epoch and count.
        self.wait(lambda: _observed_after(self.status(name), end), 30, f"{name}: a look after")
        after = self.status(name).get("group") or {}
        was = before.get("group") or {}
        if cell.protocol == "streams" and isinstance(after.get("generation"), int):
            epochs = after["generation"] - int(was.get("generation") or 0)
        counted = after.get("rebalances")
        if isinstance(counted, int):
            counted -= int(was.get("rebalances") or 0)
        run = Run(
            cell,
            strategy,
            repeat,
            setup,
            found,
            t0,
            rebalances,
            epochs,
            counted if isinstance(counted, int) else None,
            settled,
            time.time() - started,
        )
        stable = "-" if run.stable_s is None else f"{run.stable_s:.1f} s"
        say(
            f"  {name}: rebalances {rebalances}, epochs {epochs}, operator {counted}; "
            f"{found.tasks_moved} tasks moved, {found.restored_tasks} restored "
            f"({found.restore_s:.1f} s), {found.unowned_task_s:.0f} unowned task-s, "
            f"Stable after {stable}"
        )
        return run


def _events(folder: Path) -> list[dict[str, Any]]:
    return pod_events(folder)


def _version(pod: dict[str, Any]) -> str:
    env = pod["spec"]["containers"][0].get("env") or []
    return next((str(e.get("value")) for e in env if e["name"] == "APP_VERSION"), "")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _observed_after(status: dict[str, Any], end: float) -> bool:
    text = (status.get("group") or {}).get("observedAt")
    if not text:
        return False
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() > end


# -- the results --------------------------------------------------------------------------


def record(run: Run, gate_holds: str) -> dict[str, Any]:
    """One run as one line; `gate_holds` is the sitting's, on every line of it, so that tuned
    runs pair with the managed runs beside them."""
    origin = provenance()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": origin.command,
        "commit": origin.commit,
        "dirty": origin.dirty,
        **asdict(run.cell),
        "strategy": run.strategy,
        "repeat": run.repeat,
        "gate_holds": gate_holds,
        "setup": asdict(run.setup),
        "rebalances": run.rebalances,
        "epochs": run.epochs,
        "operator_rebalances": run.operator_rebalances,
        "stable_s": None if run.stable_s is None else round(run.stable_s, 2),
        "unowned_task_s": round(run.figures.unowned_task_s, 1),
        "tasks_moved": run.figures.tasks_moved,
        "restored_tasks": run.figures.restored_tasks,
        "restored_records": run.figures.restored_records,
        "restore_s": round(run.figures.restore_s, 2),
        "state_changes": run.figures.state_changes,
        "settled": run.settled,
        "wall_s": round(run.wall_s, 1),
    }


FIGURES = (
    ("rebalances", "rebalances"),
    ("epochs", "epochs"),
    ("tasks_moved", "tasks moved"),
    ("restored_tasks", "stores restored"),
    ("unowned_task_s", "unowned task-s"),
    ("stable_s", "Stable (s)"),
)


def summarise(paths: Sequence[Path], plot: Path | None) -> int:
    lines = [json.loads(line) for path in paths for line in path.read_text().splitlines() if line]
    cells: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]] = {}
    for line in lines:
        gate = line.get("gate_holds", "Pod")
        key = (line["protocol"], line["scenario"], str(line["pods"]), line["jitter"], gate)
        cells.setdefault(key, {}).setdefault(line["strategy"], []).append(line)
    print("| cell | figure | naive | tuned | managed | managed/tuned |")
    print("|---|---|---|---|---|---|")
    for key, runs in sorted(cells.items()):
        held = " [gate holds the join]" if key[4] == "Join" else ""
        label = f"{key[1]} N={key[2]} {key[0]} jitter {key[3]}{held}"
        for field, title in FIGURES:
            shown = {s: _median_and_spread(runs.get(s, []), field) for s in STRATEGIES}
            if all(value is None for value, _ in shown.values()):
                continue
            ratio = _ratio(shown["managed"][0], shown["tuned"][0])
            row = " | ".join(_cell_text(*shown[s]) for s in STRATEGIES)
            print(f"| {label} | {title} | {row} | {ratio} |")
    if plot is not None:
        _plot(cells, plot)
        print(f"plot written to {plot}")
    return 0


def _median_and_spread(runs: list[dict[str, Any]], field: str) -> tuple[float | None, str]:
    values = [float(run[field]) for run in runs if run.get(field) is not None]
    if not values:
        return None, ""
    return statistics.median(values), f"{min(values):g}-{max(values):g} (n={len(values)})"


def _cell_text(value: float | None, spread: str) -> str:
    return "-" if value is None else f"{value:.1f} [{spread}]"


def _ratio(managed: float | None, tuned: float | None) -> str:
    if managed is None or tuned is None:
        return "-"
    if tuned == 0:
        return "=" if managed == 0 else "inf"
    return f"{managed / tuned:.2f}"


def _plot(cells: dict[tuple[str, ...], dict[str, list[dict[str, Any]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = (
        ("unowned_task_s", "unowned task-seconds"),
        ("tasks_moved", "tasks moved"),
        ("stable_s", "time to Stable (s)"),
    )
    keys = sorted(cells)
    figure, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 1.2 + 0.6 * len(keys)))
    for axis, (field, title) in zip(axes, shown, strict=True):
        for offset, strategy in enumerate(STRATEGIES):
            for row, key in enumerate(keys):
                values = [
                    r[field] for r in cells[key].get(strategy, []) if r.get(field) is not None
                ]
                y = [row + (offset - 1) * 0.25] * len(values)
                axis.scatter(
                    values,
                    y,
                    s=14,
                    label=strategy if row == 0 else None,
                    color=("tab:red", "tab:blue", "tab:green")[offset],
                )
        axis.set_yticks(range(len(keys)))
        names = [f"{k[1]} {k[0]}" + (" (join gate)" if k[4] == "Join" else "") for k in keys]
        axis.set_yticklabels(names, fontsize=8)
        axis.set_title(title)
    axes[0].legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# -- the matrix ---------------------------------------------------------------------------


def cells_of(args: argparse.Namespace) -> list[Cell]:
    return [
        Cell(protocol, scenario, pods, args.partitions or 2 * pods, args.jitter)
        for protocol in args.protocols
        for scenario in args.scenarios
        for pods in args.pods
    ]


def run_matrix(bench: Bench, cells: Sequence[Cell], args: argparse.Namespace) -> int:
    plan = [
        (cell, strategy, repeat)
        for repeat in range(1, args.repeat + 1)
        for cell in cells
        for strategy in args.strategies
    ]
    say(f"{len(plan)} runs; results appended to {args.out}")
    failed, took = 0, []
    for index, (cell, strategy, repeat) in enumerate(plan, 1):
        started = time.monotonic()
        try:
            append_line(args.out, record(bench.run(cell, strategy, repeat), args.gate_holds))
        except Exception as error:  # a run that breaks must not lose the others
            failed += 1
            say(f"  run failed: {type(error).__name__}: {error}")
        took.append(time.monotonic() - started)
        left = statistics.median(took) * (len(plan) - index)
        say(f"  {index}/{len(plan)} runs done, about {left / 60:.0f} min left")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.summarise is not None:
        return summarise(args.summarise or [args.out], args.plot)
    cells = cells_of(args)
    example_jar(progress=say)
    lab = bench_lab(args.state_dir, "rebalancer-bench-streams-", KAFKA_DELAY_MS)
    state = lab.config.state_dir
    stop_on_sigterm()
    try:
        lab.start(fleet=False, pods=True, jitter="0")
        say(f"lab up in {state}: Apache Kafka at {lab.bootstrap}")
        failed = run_matrix(Bench(lab, args), cells, args)
    finally:
        lab.stop()
    summarise([args.out], args.plot)
    return 1 if failed else 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    listed = parser.add_argument
    listed("--pods", default="12", help="N, comma-separated for several")
    listed("--partitions", type=int, default=None, help="partitions of the input (default 2N)")
    listed("--protocols", default=",".join(PROTOCOLS), help=f"any of {', '.join(PROTOCOLS)}")
    listed("--scenarios", default=",".join(SCENARIOS), help=f"any of {', '.join(SCENARIOS)}")
    listed("--strategies", default=",".join(STRATEGIES), help=f"any of {', '.join(STRATEGIES)}")
    listed("--jitter", default="uniform(0,6)", help="start jitter of the pods t0 starts")
    listed("--repeat", type=int, default=1, help="runs per cell and strategy, interleaved")
    listed("--records", type=int, default=24000, help="records in the input before the start")
    listed(
        "--streams-delay-ms",
        type=int,
        default=None,
        help="managed streams groups' own initial delay (default: the broker's)",
    )
    listed(
        "--gate-holds",
        choices=[hold.value for hold in GateHold],
        default=GateHold.POD.value,
        help="what managed pods' gate holds: the pod (an init container) or only the join "
        "(the JVM starts at once and waits for the gate's file before it joins)",
    )
    listed("--settle-timeout", type=float, default=420.0, help="seconds a change may take")
    listed("--out", type=Path, default=Path(__file__).with_name("streams-results.jsonl"))
    listed("--plot", type=Path, default=Path(__file__).with_name("streams.png"))
    listed(
        "--summarise",
        nargs="*",
        type=Path,
        default=None,
        metavar="RESULTS",
        help="run nothing: the table and plot of these results files (default: --out)",
    )
    listed("--state-dir", type=Path, default=None, help="the lab's state and logs (default: tmp)")
    args = parser.parse_args(argv)
    args.pods = [int(pods) for pods in split_list(args.pods)]
    for option, allowed in (
        ("protocols", PROTOCOLS),
        ("scenarios", SCENARIOS),
        ("strategies", STRATEGIES),
    ):
        values = split_list(getattr(args, option))
        unknown = [value for value in values if value not in allowed]
        if unknown:
            parser.error(f"--{option}: unknown {', '.join(unknown)}; use any of {allowed}")
        setattr(args, option, values)
    return args


if __name__ == "__main__":
    sys.exit(main())
