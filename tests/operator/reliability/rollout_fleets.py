"""Managed consumer fleets on the lab cluster for the rollout fault tests, and what they check.

A fleet is a gated StatefulSet, or an ungated Deployment, of lab consumers (real processes run
by the lab's kubelet) with a ConsumerGroup that manages its rollouts. The checks read only what
a user can read: status, Events, the workload, the pods and their logs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.operator.e2e.support import (
    condition,
    consumer_group,
    consumer_pid,
    consumer_statefulset,
    events_for,
    eventually,
    get_cg,
    kubectl,
    running_lab,
)

from rebalancer.planning.workload_views import view_workload
from rebalancer.structs.gates import GATE_BATCH_ANNOTATION, RESUME_ANNOTATION, GateState
from rebalancer.structs.times import parse_rfc3339
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION, WorkloadView
from rebalancer_lab.running import Lab

NS = "default"
SESSION_MS = 6000  # the least Kafka allows (group.min.session.timeout.ms)
PARTITIONS = 4  # of each fleet's topic
BATCH_EVENT = re.compile(
    r"^(\S+) batch (\d+) of (\d+): (?:gathering its pods|opening its pods as they appear)"
)


def fleet(
    lab: Lab, name: str, replicas: int, *, version: str = "1", record_dir: Path | None = None
) -> dict[str, Any]:
    """A gated StatefulSet of consumers of group and topic `name`; with `record_dir`, each pod
    records what it processes in `<record_dir>/<pod>.tsv`."""
    return consumer_statefulset(
        lab, name, replicas, gated=True, version=version, record_dir=record_dir
    )


def deployment_fleet(
    lab: Lab, name: str, replicas: int, *, min_ready_seconds: int = 8
) -> dict[str, Any]:
    """The fleet as an ungated Deployment `<name>-consumer`, one pod more and none fewer at a
    time (maxSurge 1, maxUnavailable 0): the operator steps its rollouts by pausing it.

    The lab consumer has no readiness probe: Ready the moment it starts. Without
    minReadySeconds the Deployment controller had replaced all three pods within about a
    second of being resumed for the first batch, before the operator (which looks every 2 s)
    could pause it. A new pod counted
    Available only after `min_ready_seconds` keeps the next old pod in place until the pause
    has landed.
    """
    body = fleet(lab, name, replicas)
    body["kind"] = "Deployment"
    spec = body["spec"]
    for key in ("serviceName", "podManagementPolicy", "updateStrategy"):
        del spec[key]
    del spec["template"]["spec"]["initContainers"]
    spec["minReadySeconds"] = min_ready_seconds
    spec["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    return body


def managed(lab: Lab, name: str, **rollout: Any) -> dict[str, Any]:
    body = consumer_group(name, lab.bootstrap)
    body["spec"]["kafka"]["profile"] = "apache-kafka"
    body["spec"]["policy"]["rollout"] = {
        "enabled": True,
        "settleSeconds": 1,
        "maxBatchSize": 1,
        "consumers": {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": SESSION_MS // 3},
        **rollout,
    }
    return body


def rollout_of(lab: Lab, name: str) -> dict[str, Any]:
    return dict(get_cg(lab, name).get("status", {}).get("rollout") or {})


def completed(lab: Lab, name: str, after: str | None = None) -> dict[str, Any] | None:
    """status.rollout once a rollout other than `after` (a rolloutId) has Completed."""
    rollout = rollout_of(lab, name)
    done = rollout.get("phase") == "Completed" and rollout.get("rolloutId") != after
    return rollout if done else None


def group_of(lab: Lab, name: str) -> dict[str, Any]:
    return dict(get_cg(lab, name).get("status", {}).get("group") or {})


def bump_template(lab: Lab, name: str, version: str) -> None:
    # Only the template: applying the whole object would also reset the parked partition.
    env = [{"name": "APP_VERSION", "value": version}]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "consumer", "env": env}]}}}}
    kubectl(lab, "patch", "sts", f"{name}-consumer", "-p", json.dumps(patch))


def patch_rollout(lab: Lab, name: str, **fields: Any) -> None:
    patch = json.dumps({"spec": {"policy": {"rollout": fields}}})
    kubectl(lab, "patch", "cg", name, "--type=merge", "-p", patch)


def pods_of(lab: Lab, name: str) -> list[dict[str, Any]]:
    assert lab.api_client is not None
    found = client.CoreV1Api(lab.api_client).list_namespaced_pod(
        NS, label_selector=f"app={name}", _preload_content=False
    )
    return list(json.loads(found.data)["items"])


def workload_body(lab: Lab, name: str, kind: str = "StatefulSet") -> dict[str, Any]:
    """The fleet's StatefulSet or Deployment as stored."""
    assert lab.api_client is not None
    apps = client.AppsV1Api(lab.api_client)
    read = (
        apps.read_namespaced_stateful_set
        if kind == "StatefulSet"
        else apps.read_namespaced_deployment
    )
    body = dict(json.loads(read(f"{name}-consumer", NS, _preload_content=False).data))
    body.setdefault("kind", kind)
    return body


def held_deployment(lab: Lab, name: str) -> dict[str, Any] | None:
    """The fleet's Deployment while the operator holds it for a rollout (paused, with its mark)."""
    body = workload_body(lab, name, "Deployment")
    marked = ROLLOUT_HOLD_ANNOTATION in (body["metadata"].get("annotations") or {})
    return body if body["spec"].get("paused") and marked else None


def workload_of(lab: Lab, name: str, kind: str = "StatefulSet") -> WorkloadView:
    body = workload_body(lab, name, kind)
    replica_sets: list[dict[str, Any]] = []
    if kind == "Deployment":
        assert lab.api_client is not None
        found = client.AppsV1Api(lab.api_client).list_namespaced_replica_set(
            NS, label_selector=f"app={name}", _preload_content=False
        )
        replica_sets = list(json.loads(found.data)["items"])
    return view_workload(body, pods_of(lab, name), replica_sets)


def hard_kill(lab: Lab, pod: str) -> int:
    """SIGKILL the pod's consumer: no LeaveGroup, no last commit."""
    pid = consumer_pid(lab, pod)
    assert pid is not None, f"no consumer process for {pod}"
    os.kill(pid, signal.SIGKILL)
    return pid


def batches_opened(lab: Lab, name: str, kind: str, seen: set[str]) -> list[int]:
    """Batch numbers of the `kind` rollout's BatchOpening Events not in `seen` (Event names),
    in the order posted. A batch re-entered on resuming from a pause counts once."""
    numbers: list[int] = []
    resumed = False
    events = sorted(events_for(lab, name), key=_event_time)
    for event in events:
        if event["metadata"]["name"] in seen:
            continue
        if event["reason"] == "RolloutPaused":
            resumed = True
            continue
        match = BATCH_EVENT.match(str(event.get("message") or ""))
        if event["reason"] != "BatchOpening" or match is None or match[1] != kind:
            continue
        number = int(match[2])
        if resumed and numbers and numbers[-1] == number:
            resumed = False
            continue
        resumed = False
        numbers.append(number)
    return numbers


def _event_time(event: dict[str, Any]) -> tuple[str, str]:
    stamp = event.get("eventTime") or event.get("firstTimestamp") or event.get("lastTimestamp")
    return (str(stamp or ""), event["metadata"].get("resourceVersion", ""))


def event_names(lab: Lab, name: str) -> set[str]:
    return {event["metadata"]["name"] for event in events_for(lab, name)}


def assert_rolled_once(lab: Lab, name: str, rollout: dict[str, Any], replicas: int) -> None:
    """Every pod replaced once, in batches of one, highest ordinal first, each batch once."""
    pods = {pod["metadata"]["name"]: pod for pod in pods_of(lab, name)}
    labels = {
        pod: body["metadata"].get("annotations", {}).get(GATE_BATCH_ANNOTATION)
        for pod, body in pods.items()
    }
    rollout_id = rollout["rolloutId"]
    assert labels == {
        f"{name}-consumer-{replicas - 1 - k}": f"{rollout_id}/{k + 1}" for k in range(replicas)
    }, labels


def settled(lab: Lab, name: str, members: int) -> dict[str, Any]:
    """status.group once it shows `members` members, Stable, every partition assigned."""

    def probe() -> dict[str, Any] | None:
        group = group_of(lab, name)
        whole = group.get("assignedPartitions") == PARTITIONS and group.get("state") == "Stable"
        return group if whole and group.get("members") == members else None

    return eventually(probe, 90, f"{name}: {members} members, every partition assigned")


# A batch that is out: joining, or already settled and held for the settle time (a batch of
# static members can be back in the group before a look sees it joining).
BATCH_OUT = ("BatchJoining", "BatchSettling")


def at_phase(
    lab: Lab, name: str, phase: str | tuple[str, ...], before: str | None
) -> dict[str, Any]:
    """status.rollout as soon as a rollout other than `before` shows `phase` (or one of them)."""
    phases = (phase,) if isinstance(phase, str) else phase

    def probe() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        fresh = rollout.get("rolloutId") != before
        return rollout if fresh and rollout.get("phase") in phases else None

    # Generous: the slowest tests run beside each other on a 2-core CI machine at its end.
    return eventually(probe, 150, f"{name}: rollout at {' or '.join(phases)}", every=0.1)


def observed_since(lab: Lab, name: str, moment: float) -> bool:
    """Whether the operator has written status.group since `moment` (epoch seconds)."""
    stamp = group_of(lab, name).get("observedAt")
    if not isinstance(stamp, str):
        return False
    return parse_rfc3339(stamp) > moment


def assert_truthful_end(lab: Lab, name: str, replicas: int) -> dict[str, Any]:
    """At rest after a rollout: nothing claims progress or trouble, the figures add up.

    The conditions are the observer's and the rollout's together; the observer pass that the
    rollout's end wakes merges them within seconds (an observe interval at most)."""
    group = settled(lab, name, replicas)

    def calm() -> dict[str, Any] | None:
        body = get_cg(lab, name)
        progressing, degraded = condition(body, "Progressing"), condition(body, "Degraded")
        return body if "True" not in (progressing.get("status"), degraded.get("status")) else None

    try:
        body = eventually(calm, 10, f"{name}: neither Progressing nor Degraded")
    except AssertionError:
        body = get_cg(lab, name)
        raise AssertionError(
            (condition(body, "Progressing"), condition(body, "Degraded"))
        ) from None
    rollout = body["status"]["rollout"]
    assert rollout["batch"] == rollout["batches"], rollout
    return group


def explained(body: dict[str, Any]) -> str | None:
    """Why the workload may be held, as status says it; None when status says nothing."""
    progressing = condition(body, "Progressing")
    degraded = condition(body, "Degraded")
    if progressing.get("status") == "True":
        return f"Progressing: {progressing.get('message')}"
    if progressing.get("reason") == "RolloutPaused" and "paused" in progressing["message"]:
        return f"Paused: {progressing['message']}"
    if degraded.get("status") == "True" and RESUME_ANNOTATION in str(degraded.get("message")):
        return f"Degraded: {degraded['message']}"
    return None


def holds(view: WorkloadView) -> list[str]:
    """What keeps the workload from running its template: pods held at their gates, pods the
    partition keeps at the old revision, a paused Deployment."""
    found = [f"{pod.name} at its gate" for pod in view.live_pods if pod.gate is GateState.WAITING]
    partition = view.partition or 0
    found += [
        f"{pod.name} behind partition {partition}"
        for pod in view.live_pods
        if not pod.updated and pod.ordinal is not None and pod.ordinal < partition
    ]
    if view.paused:
        found.append("the Deployment is paused")
    return found


@dataclass
class HoldWatch:
    """Samples the workload and status in the background: a hold that status does not explain
    for longer than `grace` (the operator's resting poll plus a busy machine) is a violation."""

    lab: Lab
    name: str
    kind: str = "StatefulSet"
    grace: float = 40.0
    every: float = 0.5
    violations: list[str] = field(default_factory=list)
    samples: int = 0
    held_samples: int = 0  # samples with something held: the watch had something to check
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _since: float | None = None

    def __enter__(self) -> HoldWatch:
        self._thread = threading.Thread(target=self._run, name=f"holds-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def check(self) -> None:
        body = get_cg(self.lab, self.name)
        held = holds(workload_of(self.lab, self.name, self.kind))
        self.samples += 1
        self.held_samples += bool(held)
        if not held or explained(body) is not None:
            self._since = None
            return
        now = time.monotonic()
        self._since = self._since or now
        if now - self._since > self.grace:
            self.violations.append(
                f"held for {now - self._since:.0f} s with no condition saying why: {held}; "
                f"conditions {body.get('status', {}).get('conditions')}"
            )
            self._since = None

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.check()
            except (client.ApiException, OSError, ValueError, KeyError):
                continue

    def assert_clean(self) -> None:
        assert self.held_samples > 0, f"the hold watch saw nothing held in {self.samples} samples"
        assert not self.violations, self.violations


@contextmanager
def pods_lab(
    tmp_path_factory: pytest.TempPathFactory, operator_flags: tuple[str, ...] = ()
) -> Iterator[Lab]:
    """The fault modules' lab: workloads run as pods, each waiting up to a second before its
    first container starts (not all at once), dynamic members' session SESSION_MS."""
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        pods=True,
        jitter="uniform(0,1)",
        session_timeout_ms=SESSION_MS,
        operator_flags=operator_flags,
    ) as running:
        yield running
