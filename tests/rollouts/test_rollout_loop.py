"""Planner, actuator and gate together, through the API emulator, as the operator will run them.

A small stand-in plays kubelet (it starts each pod's `rebalancer gate` process, reports the init
container running while it waits, and the pod Ready once it exits 0) and the group (settled when
every pod is Ready). The loop is the one the operator's rollout daemon runs: read the workload,
step the planner, carry out its actions, keep the state as status.rollout does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from tests.rollouts.support import gated_pod, statefulset

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator, read_workload
from rebalancer.lab.apiserver import ApiServerThread
from rebalancer.planning.rollout_actions import OpenGate
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_policies import RolloutPolicy
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollout_statuses import rollout_conditions
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import WorkloadKind

NS = "default"
MERGE = "application/merge-patch+json"


class Kubelet:
    """Runs each pod's gate as a real process and reports what kubelet would."""

    def __init__(self, api: ApiServerThread, kube: KubernetesApi) -> None:
        self.api = api
        self.kube = kube
        self.exited: dict[str, float] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def status(self, pod: str, status: dict[str, Any]) -> None:
        self.kube.core.patch_namespaced_pod_status(
            pod, NS, {"status": status}, _content_type=MERGE, _preload_content=False
        )

    async def run_pod(self, pod: str, delay: float) -> None:
        await asyncio.sleep(delay)
        env = {**os.environ, "POD_NAME": pod, "POD_NAMESPACE": NS}
        env["REBALANCER_API_SERVER"] = self.api.url
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rebalancer", "gate", "--timeout", "120",
            env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert process.stderr is not None
        while line := (await process.stderr.readline()).decode():
            if "waiting for the operator" in line:
                running = {"name": GATE_CONTAINER, "state": {"running": {}}}
                await asyncio.to_thread(self.status, pod, {"initContainerStatuses": [running]})
        code = await process.wait()
        self.exited[pod] = time.time()
        assert code == 0
        done = {"name": GATE_CONTAINER, "state": {"terminated": {"exitCode": 0}}}
        await asyncio.to_thread(
            self.status,
            pod,
            {
                "phase": "Running",
                "initContainerStatuses": [done],
                "containerStatuses": [{"name": "app", "state": {"running": {}}, "ready": True}],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        )

    def start(self, pods: list[str], spacing: float) -> None:
        for index, pod in enumerate(pods):
            self.tasks.append(asyncio.create_task(self.run_pod(pod, index * spacing)))


def create_statefulset(kube: KubernetesApi, replicas: int) -> list[str]:
    body = statefulset(replicas=replicas)
    body["spec"]["template"]["spec"]["initContainers"] = [{"name": GATE_CONTAINER, "image": "g"}]
    created = json.loads(
        kube.apps.create_namespaced_stateful_set(NS, body, _preload_content=False).data
    )
    kube.apps.patch_namespaced_stateful_set_status(
        "orders",
        NS,
        {
            "status": {
                "replicas": replicas,
                "currentRevision": "r1",
                "updateRevision": "r1",
                "observedGeneration": created["metadata"]["generation"],
            }
        },
        _content_type=MERGE,
        _preload_content=False,
    )
    names = [f"orders-{ordinal}" for ordinal in range(replicas)]
    for name in names:
        pod = gated_pod(name, labels={"app": "orders", "controller-revision-hash": "r1"})
        kube.core.create_namespaced_pod(NS, pod, _preload_content=False)
    return names


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


async def test_managed_cold_start_through_the_api(
    api: ApiServerThread, kube: KubernetesApi
) -> None:
    replicas = 5
    names = create_statefulset(kube, replicas)
    kubelet = Kubelet(api, kube)
    kubelet.start(names, spacing=0.8)  # pods reach their gates 0.8 s apart
    setup = RolloutSetup(RolloutPolicy(settle_seconds=1), BrokerProfile.APACHE_KAFKA, 3.0)
    actuator = Actuator(kube, NS, WorkloadKind.STATEFULSET, "orders")
    status: dict[str, Any] = {}
    opened: list[OpenGate] = []
    phases: list[RolloutPhase] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        # The state lives only in status: every step starts from what a restart would read.
        state = RolloutState.from_status(json.loads(json.dumps(status)))
        workload = await read_workload(kube, NS, WorkloadKind.STATEFULSET, "orders")
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
    await asyncio.gather(*kubelet.tasks)
    assert state.phase is RolloutPhase.COMPLETED, state
    assert [len(action.pods) for action in opened] == [replicas]
    spread = max(kubelet.exited.values()) - min(kubelet.exited.values())
    # They reached their gates 3.2 s apart; released as they arrived, the exits would spread as
    # much. Half of that leaves room for process exits on a loaded machine (a wall-clock bound
    # of 0.5 s measured the machine's load more than the release).
    assert spread < 1.6, kubelet.exited
    assert status["membersJoined"] == replicas
    assert status["batches"] == 1
    assert RolloutPhase.BATCH_OPENING in phases
    assert rollout_conditions(state) == []
    sts = json.loads(
        kube.apps.read_namespaced_stateful_set("orders", NS, _preload_content=False).data
    )
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == replicas  # parked
