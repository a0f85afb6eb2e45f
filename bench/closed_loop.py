"""The closed loop on Apache Kafka: a managed fleet's cold start and rolling updates with the
operator's defaults, `rebalancer learn` on the history the operator recorded, the recommendation
applied as `spec.policy.learning.mode: auto` applies it, and the same cold start and rolling
updates again, side by side.

    .venv/bin/python bench/closed_loop.py                       # N=24, 5 rollouts per phase
    .venv/bin/python bench/closed_loop.py --pods 6 --rollouts 1  # a quick look
    .venv/bin/python bench/closed_loop_summary.py bench/closed-loop-results.jsonl  # again

One lab (bench/rollouts.py's: Apache Kafka at the production 3 s initial delay, Kubernetes' own
control plane, the lab kubelet, the operator with `--history-dir <state>/history`) and one fleet
for the whole loop: a Parallel StatefulSet of --pods `python -m rebalancer_lab.consumer` pods with
the join gate, and a ConsumerGroup whose spec.policy has the operator's defaults: rollouts
enabled (settleSeconds 2, no batch size), managed consumer settings (`settings: {}` but the
assignor: session 45 s, dynamic members), learning off. The consumers take their session,
heartbeat and assignor from the managed settings only, so a learned session timeout reaches them
the way it reaches a user's fleet. The StatefulSet is created with 0 replicas, and the loop
waits for the operator to write its settings into the template, so the first cold start is the
fleet's own and not a settings rollout.

1. before: a cold start (replicas 0 -> N, the group Empty: the operator's cold start), then
   --rollouts rolling updates (a new APP_VERSION per update; each new pod waits the lab
   kubelet's start jitter, --jitter, as in bench/rollouts.py), each measured;
2. `rebalancer learn --master local[2]` on <state>/history, writing
   <state>/history/_recommendations/recommendations.json, where the operator reads it;
3. spec.policy.learning.mode set to auto: the operator applies the recommendation through
   spec.policy (rebalancer.planning.recommendation_policies.policy_patch: the batch size to
   rollout.updateBatchSize, for rolling updates only, the session timeout to
   settings.sessionTimeoutMs; a delay only with a brokerDelay policy, which this fleet has not:
   Apache Kafka's group.initial.rebalance.delay.ms is a static broker setting, and the lab's
   broker keeps 3 s). A changed session timeout rolls the fleet (the settings machinery's own
   rollout): the loop waits for it and for the group to settle;
4. after: scaled to 0, the group Empty again, and the same cold start and rolling updates.

Measured per event from the consumers' own member reports, as bench/rollouts.py measures them:
rebalances (generations the members saw after t0 other than the last one before it: the
loop's group goes Empty and the broker may start it again at generation 1), time to Stable from
t0, unowned partition-seconds from t0 (a cold start's wait for its first assignment included);
the model's replay (bench/rollouts.py's `replayed`) of the same pod timeline beside each, and
after the table the model's rolling update per batch size (bench/closed_loop_model.py), the
learned one marked. Every event is a
line of --out with the date, commit, command, the loop's id and the spec.policy in force; the
summary (bench/closed_loop_summary.py) prints before and after side by side and plots them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

import closed_loop_model
import closed_loop_summary
import rollouts
from bench_labs import bench_lab, stop_on_sigterm
from rebalancer.planning.consumer_settings_templates import SETTINGS_HASH_VARIABLE
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab
from rollouts import (
    KAFKA_DELAY_MS,
    NO_JITTER,
    NS,
    Cell,
    PodLife,
    PodWatcher,
    ReportTee,
    Setup,
    append_line,
    last_ready,
    measure,
    moved,
    provenance,
    settled,
    with_departures,
)

GROUP = ("rebalancer.dev", "v1alpha1", NS, "consumergroups")
PROGRESS_EVERY_S = 30.0
# Until measured, what each step is guessed to take (seconds), for the first ETA.
GUESS_S = {"lab": 90.0, "cold-start": 60.0, "rolling-update": 75.0, "learn": 150.0,
           "apply": 120.0, "empty": 30.0}  # fmt: skip
STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:7.1f}s] {text}", flush=True)


def clock(seconds: float) -> str:
    minutes, rest = divmod(int(max(seconds, 0.0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{rest:02d}s" if hours else f"{minutes}m{rest:02d}s"


# -- the steps and their progress -------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    phase: str  # setup, before, learn, after
    kind: str  # a GUESS_S key
    label: str


def steps_of(rollout_count: int) -> list[Step]:
    def phase(name: str) -> list[Step]:
        return [
            Step(name, "empty", f"{name}: the group emptied"),
            Step(name, "cold-start", f"{name}: cold start"),
            *(
                Step(name, "rolling-update", f"{name}: rolling update {index}/{rollout_count}")
                for index in range(1, rollout_count + 1)
            ),
        ]

    return [
        Step("setup", "lab", "lab and fleet set up"),
        *phase("before"),
        Step("learn", "learn", "rebalancer learn"),
        Step("learn", "apply", "recommendation applied, fleet settled"),
        *phase("after"),
    ]


class Progress:
    """Which step is going, the time since the start, and an ETA (each remaining step costed by
    the finished steps of its kind, else by GUESS_S)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.index = 0
        self.began = time.monotonic()
        self.step_began = self.began
        self.took: dict[str, list[float]] = {}
        self.shown = 0.0

    def begin(self, index: int) -> None:
        self.index = index
        self.step_began = time.monotonic()
        self.show()

    def finish(self) -> None:
        kind = self.steps[self.index].kind
        self.took.setdefault(kind, []).append(time.monotonic() - self.step_began)

    def estimate(self, kind: str) -> float:
        done = self.took.get(kind)
        return sum(done) / len(done) if done else GUESS_S[kind]

    def eta(self) -> float:
        current = self.estimate(self.steps[self.index].kind)
        left = max(current - (time.monotonic() - self.step_began), 0.0)
        return left + sum(self.estimate(step.kind) for step in self.steps[self.index + 1 :])

    def show(self) -> None:
        self.shown = time.monotonic()
        step = self.steps[self.index]
        say(
            f"[progress] step {self.index + 1}/{len(self.steps)}: {step.label}; "
            f"elapsed {clock(time.monotonic() - self.began)}, ETA {clock(self.eta())}"
        )

    def tick(self) -> None:
        if time.monotonic() - self.shown >= PROGRESS_EVERY_S:
            self.show()


# -- the fleet ---------------------------------------------------------------------------------


def consumer_env(lab: Lab, name: str, topic: str, report_url: str) -> list[dict[str, Any]]:
    """What the pods need besides the managed settings (which bring session, heartbeat and
    assignor): where Kafka is, the group, the topic, where to report."""
    pod_name = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    values = {
        "KAFKA_BOOTSTRAP_SERVERS": lab.bootstrap,
        "KAFKA_GROUP_ID": name,
        "KAFKA_TOPICS": topic,
        "REBALANCER_NAMESPACE": NS,
        "REBALANCER_CONSUMER_GROUP": name,
        "REBALANCER_REPORT_URL": report_url,
        "REBALANCER_REPORT_INTERVAL_S": "5",
        "APP_VERSION": "1",
    }
    return [{"name": "POD_NAME", **pod_name}] + [
        {"name": key, "value": value} for key, value in values.items()
    ]


def consumer_group(lab: Lab, name: str, topic: str, assignor: str) -> dict[str, Any]:
    """The operator's defaults: managed rollouts and settings, learning off."""
    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap], "profile": "apache-kafka"},
            "subscription": {"topics": [topic]},
            "workload": {"kind": "StatefulSet", "name": name},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 30},
                "rollout": {"enabled": True, "settleSeconds": 2},
                "settings": {"assignmentStrategy": assignor},
            },
        },
    }


def update_patch(version: int, jitter: str) -> dict[str, Any]:
    """A rolling update: a new APP_VERSION, and the jitter for the new pods."""
    container = {"name": "consumer", "env": [{"name": "APP_VERSION", "value": str(version)}]}
    template = {"metadata": {"annotations": {rollouts.JITTER_ANNOTATION: jitter}}}
    return {"spec": {"template": {**template, "spec": {"containers": [container]}}}}


@dataclass
class Event:
    """One measured cold start or rolling update."""

    phase: str
    scenario: str  # cold-start or rolling-update
    index: int
    t0: float
    end: float
    settled: bool
    measured: dict[str, Any]
    simulated: dict[str, Any]
    rollout: dict[str, Any]
    policy: dict[str, Any]
    wall_s: float
    lives: list[PodLife] = field(default_factory=list)


class Loop:
    def __init__(self, lab: Lab, tee: ReportTee, args: argparse.Namespace) -> None:
        self.lab = lab
        self.tee = tee
        self.args = args
        assert lab.api_client is not None
        self.core = client.CoreV1Api(lab.api_client)
        self.apps = client.AppsV1Api(lab.api_client)
        self.custom = client.CustomObjectsApi(lab.api_client)
        self.name = f"loop-{uuid.uuid4().hex[:5]}"
        self.topic = f"closed-loop-p{args.partitions}"
        self.version = 1
        self.watcher = PodWatcher(self.core, self.name)
        self.progress: Progress | None = None

    # -- reading -----------------------------------------------------------------------------

    def cg(self) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(*GROUP, self.name))

    def status(self) -> dict[str, Any]:
        return dict(self.cg().get("status") or {})

    def policy(self) -> dict[str, Any]:
        return dict((self.cg().get("spec") or {}).get("policy") or {})

    def rollout(self) -> dict[str, Any]:
        return dict(self.status().get("rollout") or {})

    def template_env(self) -> list[dict[str, Any]]:
        sts = self.apps.read_namespaced_stateful_set(self.name, NS, _preload_content=False)
        body = json.loads(sts.data)
        containers = body["spec"]["template"]["spec"]["containers"]
        return list(containers[0].get("env") or [])

    def settings_hash(self) -> str | None:
        for var in self.template_env():
            if var.get("name") == SETTINGS_HASH_VARIABLE:
                return str(var.get("value"))
        return None

    def reports(self) -> list[rollouts.Report]:
        return with_departures(self.tee.of(self.name), list(self.watcher.pods.values()))

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        deadline = time.time() + timeout
        shown = time.time()
        while time.time() < deadline:
            try:
                value = check()
            except client.ApiException as exc:
                value = None
                say(f"  ... {what}: API {exc.status}")
            if value:
                return value
            if time.time() - shown > 15:
                shown = time.time()
                rollout = self.rollout()
                say(
                    f"  ... {what}: rollout {rollout.get('phase', '-')} "
                    f"{rollout.get('batch', '-')}/{rollout.get('batches', '-')}, "
                    f"{len(self.watcher.live())} pods"
                )
            if self.progress is not None:
                self.progress.tick()
            time.sleep(0.5)
        return None

    def settle(self, since: float, previous: str | None, timeout: float) -> tuple[float, bool]:
        """When the group settled with every pod's consumer running and the operator's rollout
        after `previous` Completed; (now, False) at the timeout."""
        pods, partitions = self.args.pods, self.args.partitions

        def done() -> float | None:
            lives = self.watcher.live()
            ready = [life for life in lives if life.consumer_at is not None]
            if not (len(ready) == pods == len(lives)):
                return None
            rollout = self.rollout()
            if rollout.get("rolloutId") == previous or rollout.get("phase") != "Completed":
                return None
            return settled(self.reports(), partitions, pods, since)

        at = self.wait("settling", done, timeout)
        if at is None:
            say(f"  not settled within {timeout:.0f} s: measured as it stands")
            return time.time(), False
        return float(at), True

    # -- acting ------------------------------------------------------------------------------

    def set_up(self) -> None:
        """The ConsumerGroup, then the StatefulSet at 0 replicas; returns once the operator's
        managed settings are in its template."""
        setup = Setup("StatefulSet", "Parallel", False, 45000, 3000, True)
        env = consumer_env(self.lab, self.name, self.topic, self.tee.url)
        body = rollouts.workload(setup, self.name, env, 0, self.args.jitter)
        self.custom.create_namespaced_custom_object(
            *GROUP, consumer_group(self.lab, self.name, self.topic, self.args.assignor)
        )
        self.apps.create_namespaced_stateful_set(NS, body, _preload_content=False)
        self.watcher.start()
        found = self.wait("the managed settings in the template", self.settings_hash, 180)
        if not found:
            raise RuntimeError("the operator did not write its settings into the template")
        say(f"  {self.name}: settings {found} in the template; policy {self.policy()}")

    def empty(self) -> None:
        """Scale to 0 and wait until no pod is left and the operator sees the group Empty."""
        self.scale(0)

        def gone() -> bool:
            if self.watcher.live():
                return False
            group = self.status().get("group") or {}
            return group.get("members") in (0, None) or group.get("state") in ("Empty", "Dead")

        if not self.wait("the group emptying", gone, 180):
            say("  the group did not look Empty within 180 s; going on")
        time.sleep(3)

    def scale(self, replicas: int) -> None:
        self.apps.patch_namespaced_stateful_set(self.name, NS, {"spec": {"replicas": replicas}})

    def cold_start(self, phase: str) -> Event:
        previous = self.rollout().get("rolloutId")
        began = time.monotonic()
        t0 = time.time()
        self.scale(self.args.pods)
        end, ok = self.settle(t0, previous, self.args.settle_timeout)
        return self.measured(phase, "cold-start", 0, t0, end, ok, began)

    def rolling_update(self, phase: str, index: int) -> Event:
        previous = self.rollout().get("rolloutId")
        self.version += 1
        time.sleep(2)
        began = time.monotonic()
        t0 = time.time()
        self.apps.patch_namespaced_stateful_set(
            self.name, NS, update_patch(self.version, self.args.jitter)
        )

        def fresh() -> bool:
            lives = self.watcher.live()
            return len(lives) == self.args.pods and all(
                (life.first_container_at or 0) > t0 for life in lives
            )

        end, ok = self.settle(t0, previous, self.args.settle_timeout)
        if ok and not fresh():
            say("  settled, but not every pod is of the new template")
        return self.measured(phase, "rolling-update", index, t0, end, ok, began)

    def measured(
        self, phase: str, scenario: str, index: int, t0: float, end: float, ok: bool, began: float
    ) -> Event:
        lives = list(self.watcher.pods.values())
        reports = self.reports()
        if scenario == "cold-start":
            # The group was Empty at t0: only what followed counts (its generations may continue
            # from before, or start again at 1 if the broker dropped the empty group).
            reports = [report for report in reports if report.at >= t0]
        partitions = self.args.partitions
        _, stw, wait, stable = measure(reports, t0, end + 0.001, partitions)
        # Not measure()'s count, whose baseline is the highest generation ever reported: the
        # loop's group goes Empty between phases and in whole-group updates, and the broker
        # may drop it and start again at generation 1 (closed_loop_summary.rebalances_in).
        rebalances = closed_loop_summary.rebalances_in(
            [(report.at, report.event, report.generation) for report in reports], t0, end + 0.001
        )
        status = self.status()
        rollout = dict(status.get("rollout") or {})
        # The pods of this event: those still there at t0, and those it started.
        cold = scenario == "cold-start"
        phase_lives = [
            life
            for life in lives
            if (life.deleted_at is None or life.deleted_at >= t0)
            and life.consumer_at is not None
            and (not cold or life.consumer_at >= t0)
        ]
        figures = {
            "rebalances": rebalances,
            "time_to_stable_s": round(stable, 3),
            "stable_after_ready_s": round(max(stable - last_ready(phase_lives, t0), 0.0), 3),
            "unowned_ps": round(stw + wait, 2),
            "stop_the_world_ps": round(stw, 2),
            "partitions_moved": moved(reports, t0, end + 0.001),
            "settled": ok,
            "operator_rebalances": (status.get("group") or {}).get("rebalances"),
            "plan": rollout.get("plan"),
            "batches": rollout.get("batches"),
            "rollout_phase": rollout.get("phase"),
        }
        event = Event(
            phase=phase,
            scenario=scenario,
            index=index,
            t0=t0,
            end=end,
            settled=ok,
            measured=figures,
            simulated={},
            rollout=rollout,
            policy=self.policy(),
            wall_s=time.monotonic() - began,
            lives=phase_lives,
        )
        event.simulated = self.replayed(event, reports)
        say(
            f"  {phase} {scenario} {index or ''}: {rebalances} rebalances, Stable after "
            f"{stable:.1f} s, unowned {stw + wait:.0f} partition-s, plan {rollout.get('plan')} "
            f"in {rollout.get('batches')} batch(es); the model: {event.simulated or '-'}"
        )
        return event

    def replayed(self, event: Event, reports: Sequence[rollouts.Report]) -> dict[str, Any]:
        """bench/rollouts.py's replay of the event's pod timeline on the coordinator model."""
        settings = self.settings_in_pods()
        scenario = "cold-start" if event.scenario == "cold-start" else "statefulset-update"
        cell = Cell(scenario, self.args.pods, self.args.partitions, self.args.assignor, "0")
        setup = Setup("StatefulSet", "Parallel", settings["static"], settings["session_ms"],
                      settings["heartbeat_ms"], True)  # fmt: skip
        lives = list(event.lives)
        starts = [life.consumer_at for life in lives if life.consumer_at is not None]
        setup_t0 = event.t0 if scenario == "cold-start" else min(starts, default=event.t0)
        run = rollouts.Run(
            cell=cell, strategy="managed", repeat=1, setup=setup, rebalances=0,
            stop_the_world_ps=0.0, first_owned_ps=0.0, time_to_stable_s=0.0, last_ready_s=0.0,
            slowest_start_s=None, operator_rebalances=None, rollout={}, settled=True,
            lives=lives, t0=event.t0, setup_t0=setup_t0, reports=list(reports),
        )  # fmt: skip
        try:
            return {
                key: round(value, 3) if isinstance(value, float) else value
                for key, value in rollouts.replayed(run).items()
            }
        except Exception as exc:  # the measurement stands without the model
            say(f"  the model's replay failed: {exc!r}")
            return {}

    def settings_in_pods(self) -> dict[str, Any]:
        """Session, heartbeat and static membership the managed settings give the pods."""
        values = {
            str(var.get("name")): var.get("value") for var in self.template_env() if "name" in var
        }
        session = int(values.get("KAFKA_SESSION_TIMEOUT_MS") or 45000)
        heartbeat = int(values.get("KAFKA_HEARTBEAT_INTERVAL_MS") or min(3000, session // 3))
        return {
            "session_ms": session,
            "heartbeat_ms": heartbeat,
            "static": "KAFKA_GROUP_INSTANCE_ID" in values,
        }

    # -- learning ----------------------------------------------------------------------------

    def learn(self) -> dict[str, Any]:
        """`rebalancer learn` on the operator's history; the summary it wrote."""
        tick = self.progress.tick if self.progress is not None else None
        return run_learn(self.lab.config.state_dir, self.args.master, tick)

    def apply(self) -> dict[str, Any]:
        """learning.mode auto, as a user turns it on; returns status.learning once the operator
        applied the recommendation (or said why not) and the fleet settled."""
        previous = self.rollout().get("rolloutId")
        hash_before = self.settings_hash()
        policy_before = self.policy()
        self.custom.patch_namespaced_custom_object(
            *GROUP, self.name, {"spec": {"policy": {"learning": {"mode": "auto"}}}}
        )

        def decided() -> dict[str, Any] | None:
            return learning_decided(self.status())

        learning = self.wait("the operator applying the recommendation", decided, 120) or dict(
            self.status().get("learning") or {}
        )
        say(f"  status.learning: {json.dumps(learning, sort_keys=True)}")
        time.sleep(5)
        policy_after = self.policy()
        say(f"  spec.policy before: {json.dumps(policy_before, sort_keys=True)}")
        say(f"  spec.policy after:  {json.dumps(policy_after, sort_keys=True)}")
        if self.settings_hash() != hash_before or self.rollout().get("rolloutId") != previous:
            say("  the learned settings roll the fleet: waiting for it to settle")
            self.settle(time.time(), previous, self.args.settle_timeout)
        else:
            time.sleep(10)
        return {"learning": learning, "policy_before": policy_before, "policy_after": policy_after}


# -- learning, for this loop and bench/streams_closed_loop.py's ---------------------------------

DECIDED_REASONS = ("NothingToApply", "NoGain", "InEffect", "RecommendationStale")


def run_learn(state: Path, master: str, tick: Callable[[], None] | None = None) -> dict[str, Any]:
    """`rebalancer learn` on the lab operator's history (<state>/history), writing where the
    operator reads it (<state>/history/_recommendations); the summary it wrote."""
    history = state / "history"
    output = history / "_recommendations"
    log = state / "logs" / "learn.log"
    command = [sys.executable, "-m", "rebalancer", "learn", "--history", str(history),
               "--output", str(output), "--master", master]  # fmt: skip
    say(f"  {' '.join(command)} (log: {log})")
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True)
        while process.poll() is None:
            if tick is not None:
                tick()
            time.sleep(1)
    if process.returncode != 0:
        tail = log.read_text(encoding="utf-8").splitlines()[-20:]
        raise RuntimeError(f"rebalancer learn failed ({process.returncode}): {tail}")
    summary = json.loads((output / "recommendations.json").read_text(encoding="utf-8"))
    return dict(summary)


def learning_decided(status: dict[str, Any]) -> dict[str, Any] | None:
    """status.learning once the operator applied the recommendation or said why not."""
    learning = dict(status.get("learning") or {})
    if learning.get("lastAppliedTime") or learning.get("reason") in DECIDED_REASONS:
        return learning
    return None


# -- the results file ----------------------------------------------------------------------------


def line_of(
    event: Event, loop: str, origin: rollouts.Provenance, args: argparse.Namespace,
    recommendation: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "date": datetime.fromtimestamp(event.t0, UTC).isoformat(timespec="seconds"),
        **asdict(origin),
        "loop": loop,
        "phase": event.phase,
        "scenario": event.scenario,
        "index": event.index,
        "pods": args.pods,
        "partitions": args.partitions,
        "assignor": args.assignor,
        "jitter": args.jitter,
        "join_window_s": KAFKA_DELAY_MS / 1000.0,
        "measured": event.measured,
        "simulated": event.simulated,
        "policy": event.policy,
        "recommendation": recommendation,
        "wall_s": round(event.wall_s, 1),
        "load": [round(value, 2) for value in os.getloadavg()],
    }


def recommendation_of(summary: dict[str, Any], name: str) -> dict[str, Any] | None:
    group = (summary.get("groups") or {}).get(f"{NS}/{name}")
    return dict(group) if isinstance(group, dict) else None


def describe(group: dict[str, Any] | None, summary: dict[str, Any]) -> str:
    if group is None:
        messages = "; ".join(summary.get("messages") or []) or "none"
        return f"no recommendation for the group (messages: {messages})"
    current = group.get("current") or {}
    parts = [
        f"{label} {current.get(key)} -> {group.get(key)}"
        for key, label in (
            ("initialRebalanceDelayMs", "initial delay ms"),
            ("batchSize", "batch size"),
            ("sessionTimeoutMs", "session timeout ms"),
        )
    ]
    cost = (
        f"model's expected cost {group.get('expectedCostPerDaySeconds')} s/day against "
        f"{group.get('defaultCostPerDaySeconds')} s/day for the defaults (improvement "
        f"{group.get('improvement')})"
    )
    notes = "; ".join(group.get("notes") or [])
    return f"{', '.join(parts)}; {cost}; evidence {group.get('evidence')}" + (
        f"; notes: {notes}" if notes else ""
    )


# -- main ----------------------------------------------------------------------------------------


def run_loop(loop: Loop, args: argparse.Namespace, progress: Progress) -> list[dict[str, Any]]:
    """Before, learn, apply, after; each measured event appended to --out as it ends."""
    origin = provenance()
    lines: list[dict[str, Any]] = []
    recommendation: dict[str, Any] | None = None

    def advance() -> None:
        progress.finish()
        if progress.index + 1 < len(progress.steps):
            progress.begin(progress.index + 1)

    def keep(event: Event) -> None:
        line = line_of(event, loop.name, origin, args, recommendation)
        append_line(args.out, line)
        lines.append(line)
        advance()

    advance()  # the lab and the fleet are set up
    for phase in ("before", "after"):
        if phase == "after":
            summary = loop.learn()
            recommendation = recommendation_of(summary, loop.name)
            say(f"  the recommendation: {describe(recommendation, summary)}")
            advance()
            applied = loop.apply()
            recommendation = {**(recommendation or {}), "applied": applied}
            advance()
        loop.empty()
        advance()
        keep(loop.cold_start(phase))
        for number in range(1, args.rollouts + 1):
            keep(loop.rolling_update(phase, number))
    return lines


def print_report(lines: Sequence[dict[str, Any]], args: argparse.Namespace) -> None:
    """The side-by-side table, the verdict, the recommendation and the plot."""
    rows = closed_loop_summary.compare(lines)
    loop = lines[0]["loop"] if lines else "-"
    print()
    print(
        f"Closed loop {loop}: N={args.pods}, P={args.partitions}, {args.assignor}, jitter "
        f"{args.jitter}, {args.rollouts} rolling update(s) per phase"
    )
    print(closed_loop_summary.report(lines))
    print()
    recommendation = next(
        (line["recommendation"] for line in lines if line["recommendation"]), None
    )
    if recommendation is not None:
        applied = recommendation.get("applied") or {}
        learned = {key: value for key, value in recommendation.items() if key != "applied"}
        print(f"recommendation: {json.dumps(learned, sort_keys=True)}")
        print(f"status.learning: {json.dumps(applied.get('learning'), sort_keys=True)}")
        moves = closed_loop_summary.changed(
            applied.get("policy_before"), applied.get("policy_after")
        )
        print(f"spec.policy changed: {'; '.join(moves) or 'nothing'}")
        learned = recommendation.get("batchSize")
        print()
        print(
            f"Why, on the coordinator model: a rolling update of N={args.pods}, "
            f"P={args.partitions}, per batch size (bench/closed_loop_model.py):"
        )
        bound = rollouts.jitter_bound(args.jitter) * 1000.0
        found = closed_loop_model.updates(args.pods, args.partitions, bound)
        print(
            closed_loop_model.table(found, args.pods, learned if isinstance(learned, int) else None)
        )
    if args.plot is not None and lines:
        title = (
            f"Closed loop on Apache Kafka, N={args.pods} {args.assignor}: "
            "the operator's defaults, then the learned recommendation"
        )
        written = closed_loop_summary.plot(rows, lines, args.plot, title)
        if written is not None:
            say(f"plot: {written}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    steps = steps_of(args.rollouts)
    progress = Progress(steps)
    progress.begin(0)
    lab = bench_lab(args.state_dir, "rebalancer-bench-closed-loop-", KAFKA_DELAY_MS)
    state = lab.config.state_dir
    stop_on_sigterm()
    tee = ReportTee(lab.report_url)
    tee.start()
    lines: list[dict[str, Any]] = []
    loop: Loop | None = None
    try:
        lab.start(fleet=False, pods=True, jitter=NO_JITTER)
        loop = Loop(lab, tee, args)
        loop.progress = progress
        asyncio.run(ensure_topic(lab.bootstrap, loop.topic, args.partitions))
        say(f"lab up in {state}: Apache Kafka at {lab.bootstrap}; history in {state}/history")
        loop.set_up()
        lines = run_loop(loop, args, progress)
    finally:
        if loop is not None:
            loop.watcher.stop()
        lab.stop()
        tee.stop()
    say(f"{len(lines)} event(s) appended to {args.out}; lab state and logs in {state}")
    print_report(lines, args)
    return 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--pods", type=int, default=24, help="N, the fleet's replicas (default 24)")
    add("--partitions", type=int, default=None, help="partitions of the topic (default 2N)")
    add("--assignor", default="cooperative-sticky", choices=("cooperative-sticky", "range"))
    add("--rollouts", type=int, default=5, help="rolling updates per phase (default 5)")
    add("--jitter", default="uniform(0,6)", help="each new pod's start jitter (lab kubelet)")
    add("--master", default="local[2]", help="Spark master of `rebalancer learn`")
    add("--settle-timeout", type=float, default=300.0, help="seconds an event may take")
    add("--out", type=Path, default=Path(__file__).with_name("closed-loop-results.jsonl"))
    add("--plot", default=str(Path(__file__).with_name("closed-loop.png")), help="'' for none")
    add("--state-dir", type=Path, default=None, help="the lab's state and logs (default: tmp)")
    args = parser.parse_args(argv)
    args.partitions = args.partitions or 2 * args.pods
    args.plot = Path(args.plot) if args.plot else None
    if args.pods < 1 or args.rollouts < 1:
        parser.error("--pods and --rollouts must be at least 1")
    if not math.isfinite(args.settle_timeout) or args.settle_timeout <= 0:
        parser.error("--settle-timeout must be positive")
    return args


if __name__ == "__main__":
    raise SystemExit(main())
