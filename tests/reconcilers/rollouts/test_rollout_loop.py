"""Planner, actuator and gate together on the real control plane, as the operator will run them.

The StatefulSet controller creates the pods and the lab kubelet runs them: a first init
container holds each pod back 1 s per ordinal, so that the pods reach their gates (real
`rebalancer gate` processes, acting as the pod's ServiceAccount) about 1 s apart. The group is
stood in for (settled when every pod is Ready). The loop is the one the operator's rollout
daemon runs: read the workload, step the planner, carry out its actions, keep the state as
status.rollout does.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.kube_clusters import SharedCluster
from tests.reconcilers.rollouts.support import SLEEPER, grant_gates, statefulset

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator, read_workload
from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.planning.rollout_actions import OpenGate
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollout_statuses import rollout_conditions
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import WorkloadKind

SPACING_SECONDS = 1.0
# Sleeps SPACING_SECONDS times the pod's ordinal (the kubelet sets HOSTNAME to the pod's name).
STAGGER = (
    "import os, time; "
    f"time.sleep({SPACING_SECONDS} * int(os.environ['HOSTNAME'].rsplit('-', 1)[1]))"
)


def create_statefulset(kube: KubernetesApi, ns: str, replicas: int) -> None:
    body = statefulset(replicas=replicas)
    body["spec"]["template"]["spec"] = {
        "terminationGracePeriodSeconds": 1,
        "initContainers": [
            {"name": "stagger", "image": "s", "command": [sys.executable, "-c", STAGGER]},
            gate_container(GateOptions(timeout_seconds=120)),
        ],
        "containers": [{"name": "app", "image": "c", "command": SLEEPER}],
    }
    kube.apps.create_namespaced_stateful_set(ns, body, _preload_content=False)


def group_of(ready: list[str], replicas: int, now: float) -> GroupSnapshot:
    settled = len(ready) == replicas
    return GroupSnapshot(
        state="Stable" if settled else ("Empty" if not ready else "PreparingRebalance"),
        protocol="classic",
        assignor="range",
        generation=1 if settled else None,
        members=len(ready),
        member_details=tuple(
            MemberSummary(name, f"{name}-id", None, 1, 1, Source.MEMBER_REPORTS) for name in ready
        ),
        assigned_partitions=12 if settled else 0,
        total_partitions=12,
        lag=None,
        observed_at=now,
        sources={"members": Source.MEMBER_REPORTS},
    )


def gate_log(logs: Path, ns: str, pod: dict[str, Any]) -> list[str]:
    """The lines the pod's gate wrote (the kubelet keeps them per pod uid and container)."""
    folder = logs / f"{ns}_{pod['metadata']['name']}_{pod['metadata']['uid']}" / GATE_CONTAINER
    return (folder / "0.log").read_text().splitlines()


def logged_at(lines: list[str], words: str) -> float:
    """When the gate logged `words` (each line starts with its UTC time)."""
    line = next(line for line in lines if words in line)
    stamp = line.split(" ", 1)[0]
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_managed_cold_start_through_the_api(
    cluster: SharedCluster, kube: KubernetesApi, ns: str
) -> None:
    replicas = 5
    grant_gates(kube, ns)
    create_statefulset(kube, ns, replicas)
    setup = RolloutSetup(RolloutPolicy(settle_seconds=1), BrokerProfile.APACHE_KAFKA, 3.0)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, "orders")
    status: dict[str, Any] = {}
    opened: list[OpenGate] = []
    phases: list[RolloutPhase] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        # The state lives only in status: every step starts from what a restart would read.
        state = RolloutState.from_status(json.loads(json.dumps(status)))
        workload = await read_workload(kube, ns, WorkloadKind.STATEFULSET, "orders")
        assert workload is not None
        now = time.time()
        ready = [pod.name for pod in workload.pods if pod.ready]
        observation = Observation(setup, workload, group_of(ready, replicas, now), rebalances=0)
        state, actions = step(state, observation, now)
        await actuator.apply(actions)
        opened += [action for action in actions if isinstance(action, OpenGate) and action.pods]
        status = state.to_status()
        phases.append(state.phase)
        if state.phase is RolloutPhase.COMPLETED:
            break
        await asyncio.sleep(0.3)
    assert state.phase is RolloutPhase.COMPLETED, state
    assert [len(action.pods) for action in opened] == [replicas]
    items = json.loads(kube.core.list_namespaced_pod(ns, _preload_content=False).data)["items"]
    logs = [gate_log(cluster.pod_logs(), ns, pod) for pod in items]
    arrived = [logged_at(lines, "waiting for the operator") for lines in logs]
    released = [logged_at(lines, "gate opened by the operator") for lines in logs]
    # The gates reached their wait up to 4 s apart; the first ones start slowest, sharing the
    # CPU with each other (2.3 s apart with 0.8 s spacing, measured here)...
    assert max(arrived) - min(arrived) > 2.0, arrived
    # ...and were released together. Half of the arrival spread leaves room for the gates'
    # event delivery on a loaded machine (a bound of 0.5 s measured the load more than the
    # release); released as they arrived, they would spread as much as they arrived.
    assert max(released) - min(released) < 1.6, released
    assert status["membersJoined"] == replicas
    assert status["batches"] == 1
    assert RolloutPhase.BATCH_OPENING in phases
    assert rollout_conditions(state) == []
    sts = json.loads(
        kube.apps.read_namespaced_stateful_set("orders", ns, _preload_content=False).data
    )
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == replicas  # parked
