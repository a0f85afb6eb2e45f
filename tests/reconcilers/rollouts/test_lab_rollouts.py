"""Managed rollouts on the real control plane: the lab kubelet runs the pods (the gate as a real
init container process, acting as the pod's ServiceAccount) and the real StatefulSet and
Deployment controllers create and replace them; the planner and actuator run the operator's
loop. The group is stood in for by the pods' readiness (no broker here): the Kafka side is the
benchmark's."""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from typing import Any

import pytest
from tests.reconcilers.rollouts.support import SLEEPER, grant_gates, until

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator, read_workload
from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.planning.rollout_actions import Action, InstallGate, OpenGate
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import Mechanism, RolloutKind, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import WorkloadView

pytestmark = pytest.mark.e2e
# Gated pods reach their gates at different moments, up to 4.5 s apart: a StatefulSet's 1.5 s
# per ordinal, a Deployment's by its name's hash. A first init container waits that long (the
# kubelet sets HOSTNAME to the pod's name).
STAGGER = """
import os, re, time, zlib
name = os.environ["HOSTNAME"]
ordinal = re.fullmatch(r"orders-(\\d+)", name)
time.sleep(1.5 * (int(ordinal[1]) if ordinal else zlib.crc32(name.encode()) % 4))
"""


def statefulset(replicas: int, gated: bool, version: str = "1") -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 2,
        "containers": [
            {
                "name": "app",
                "image": "x",
                "command": SLEEPER,
                "env": [{"name": "V", "value": version}],
            }
        ],
    }
    if gated:
        template_spec["initContainers"] = [
            {"name": "stagger", "image": "s", "command": [sys.executable, "-c", STAGGER]},
            gate_container(GateOptions(timeout_seconds=300)),
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "orders"},
        "spec": {
            "replicas": replicas,
            "serviceName": "orders",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "orders"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "template": {"metadata": {"labels": {"app": "orders"}}, "spec": template_spec},
        },
    }


def group_of(workload: WorkloadView, now: float) -> GroupSnapshot:
    """A group whose members are the Ready pods; rebalancing while a started pod is not Ready."""
    ready = [pod.name for pod in workload.live_pods if pod.ready]
    starting = any(pod.gate.through and not pod.ready for pod in workload.live_pods)
    state = "Empty" if not ready else ("PreparingRebalance" if starting else "Stable")
    return GroupSnapshot(
        state=state,
        protocol="classic",
        assignor="range",
        generation=None,
        members=len(ready),
        member_details=tuple(
            MemberSummary(name, name, None, None, 1, Source.MEMBER_REPORTS) for name in ready
        ),
        assigned_partitions=12 if state == "Stable" else 0,
        total_partitions=12,
        lag=None,
        observed_at=now,
        sources={"members": Source.MEMBER_REPORTS},
    )


async def run_rollouts(
    kube: KubernetesApi,
    ns: str,
    policy: RolloutPolicy,
    status: dict[str, Any],
    seconds: float,
    kind: WorkloadKind = WorkloadKind.STATEFULSET,
    name: str = "orders",
) -> tuple[RolloutState, dict[str, Any], list[Action]]:
    """The operator's loop until a rollout completes or fails; the state lives in `status`."""
    setup = RolloutSetup(policy, BrokerProfile.APACHE_KAFKA, 3.0)
    actuator = Actuator(kube, ns, kind, name, GateOptions())
    done: list[Action] = []
    deadline = time.monotonic() + seconds
    state = RolloutState.from_status(status)
    before = state.rollout_id
    while time.monotonic() < deadline:
        state = RolloutState.from_status(json.loads(json.dumps(status)))
        workload = await read_workload(kube, ns, kind, name)
        assert workload is not None
        now = time.time()
        state, actions = step(state, Observation(setup, workload, group_of(workload, now)), now)
        done += await actuator.apply(actions)
        status = state.to_status()
        finished = state.phase in (RolloutPhase.COMPLETED, RolloutPhase.FAILED)
        if finished and state.rollout_id != before:
            break
        await asyncio.sleep(0.4)
    return state, status, done


def pods(kube: KubernetesApi, ns: str) -> dict[str, dict[str, Any]]:
    items = json.loads(kube.core.list_namespaced_pod(ns, _preload_content=False).data)["items"]
    return {item["metadata"]["name"]: item for item in items}


def gates_started_apart(found: dict[str, dict[str, Any]]) -> float:
    """Seconds between the first and the last gate's start (the kubelet's whole seconds)."""
    starts = []
    for pod in found.values():
        [gate] = [s for s in pod["status"]["initContainerStatuses"] if s["name"] == GATE_CONTAINER]
        stamp = gate["state"]["terminated"]["startedAt"]
        starts.append(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return max(starts) - min(starts)


def opens(actions: list[Action]) -> list[tuple[str, ...]]:
    return [action.pods for action in actions if isinstance(action, OpenGate) and action.pods]


async def test_cold_start_then_rolling_update_on_the_lab(kube: KubernetesApi, ns: str) -> None:
    grant_gates(kube, ns)
    kube.apps.create_namespaced_stateful_set(ns, statefulset(4, gated=True), _preload_content=False)
    state, status, done = await run_rollouts(kube, ns, RolloutPolicy(settle_seconds=1), {}, 90)
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert state.kind is RolloutKind.COLD_START
    # Pods reached their gates up to 4.5 s apart; all four were released together.
    assert gates_started_apart(pods(kube, ns)) >= 3
    assert [sorted(batch) for batch in opens(done)] == [[f"orders-{i}" for i in range(4)]]
    first_revision = {
        p["metadata"]["labels"]["controller-revision-hash"] for p in pods(kube, ns).values()
    }
    kube.apps.patch_namespaced_stateful_set(
        "orders",
        ns,
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "app", "env": [{"name": "V", "value": "2"}]}]}
                }
            }
        },
        _preload_content=False,
    )
    policy = RolloutPolicy(settle_seconds=1, max_batch_size=2)
    state, status, done = await run_rollouts(kube, ns, policy, status, 120)
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert state.mechanism is Mechanism.STATEFULSET_REPLACE
    assert [sorted(batch) for batch in opens(done)] == [
        ["orders-2", "orders-3"],
        ["orders-0", "orders-1"],
    ]
    final = pods(kube, ns)
    revisions = {p["metadata"]["labels"]["controller-revision-hash"] for p in final.values()}
    assert len(revisions) == 1 and revisions != first_revision
    assert {p["metadata"]["annotations"]["rebalancer.dev/gate-batch"] for p in final.values()} == {
        f"{state.rollout_id}/1",
        f"{state.rollout_id}/2",
    }
    sts = json.loads(
        kube.apps.read_namespaced_stateful_set("orders", ns, _preload_content=False).data
    )
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 4  # parked again


def all_running(kube: KubernetesApi, ns: str, replicas: int) -> bool:
    found = pods(kube, ns)
    phases = [p.get("status", {}).get("phase") for p in found.values()]
    return len(found) == replicas and phases == ["Running"] * replicas


async def test_the_gate_is_injected_into_a_running_statefulset(
    kube: KubernetesApi, ns: str
) -> None:
    grant_gates(kube, ns)
    kube.apps.create_namespaced_stateful_set(
        ns, statefulset(3, gated=False), _preload_content=False
    )
    await until(lambda: all_running(kube, ns, 3), "three running pods", 30)
    policy = RolloutPolicy(settle_seconds=1, max_batch_size=3, inject_gate=True)
    state, _, done = await run_rollouts(kube, ns, policy, {}, 120)
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert InstallGate() in done
    # The injection is a template change, rolled out as one batch behind the parked partition.
    assert [sorted(batch) for batch in opens(done)] == [["orders-0", "orders-1", "orders-2"]]
    for pod in pods(kube, ns).values():
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["rebalancer-gate"]


async def test_gated_deployment_update_in_batches_its_surge_allows(
    kube: KubernetesApi, ns: str
) -> None:
    grant_gates(kube, ns)
    spec = statefulset(4, gated=True)["spec"]["template"]["spec"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec},
        },
    }
    kube.apps.create_namespaced_deployment(ns, deployment, _preload_content=False)
    policy = RolloutPolicy(settle_seconds=1)
    deploy = {"kind": WorkloadKind.DEPLOYMENT, "name": "web"}
    state, status, done = await run_rollouts(kube, ns, policy, {}, 60, **deploy)  # type: ignore[arg-type]
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert [len(batch) for batch in opens(done)] == [4]
    env = [{"name": "V", "value": "2"}]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": env}]}}}}
    kube.apps.patch_namespaced_deployment("web", ns, patch, _preload_content=False)
    policy = RolloutPolicy(settle_seconds=1, max_batch_size=4)
    state, status, done = await run_rollouts(kube, ns, policy, status, 120, **deploy)  # type: ignore[arg-type]
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert state.kind is RolloutKind.ROLLING_UPDATE
    assert state.mechanism is Mechanism.GATE_QUEUE
    # Gated new pods are not Ready, so no more than maxSurge of them exist at once.
    assert [len(batch) for batch in opens(done)] == [2, 2]
