"""A settings change reaches running consumers through a staggered rollout, end to end.

Real parts: Apache Kafka, the Kubernetes control plane (its StatefulSet controller), the lab
kubelet (each pod a real `python -m rebalancer_lab.consumer` process that reads the mounted
ConfigMap and its env), the settings plan, ConfigMap and template patch, and the rollout
planner and actuator in the loop the operator runs. The group is stood in for by the pods'
readiness, as in the rollout tests; the consumers' own logs show what they run with.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests import polling
from tests.kafka_brokers import shared_broker
from tests.kube_clusters import SharedCluster

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator, read_workload
from rebalancer.clients.workload_patching import apply_configmap, patch_workload, read_workload_body
from rebalancer.planning.consumer_settings_plans import (
    SettingsInputs,
    consumer_timings,
    plan_settings,
)
from rebalancer.planning.rollout_actions import Action, SetStatefulSetPartition
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import Mechanism, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.rollout_policy import ConsumerTimings, RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import WorkloadView
from rebalancer_lab.broker import KafkaBroker

pytestmark = pytest.mark.e2e
NAME = "orders-consumer"


@pytest.fixture
def broker() -> KafkaBroker:
    return shared_broker()


def consumers(bootstrap: str, group: str) -> dict[str, Any]:
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap},
        {"name": "KAFKA_GROUP_ID", "value": group},
        {"name": "KAFKA_TOPICS", "value": "orders"},
        {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "6000"},
        {"name": "KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "value": "cooperative-sticky"},
    ]
    container = {
        "name": "consumer",
        "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
        "command": ["python", "-m", "rebalancer_lab.consumer"],
        "env": env,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 2,
            "serviceName": NAME,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [container]},
            },
        },
    }


def pods(kube: KubernetesApi, ns: str) -> dict[str, dict[str, Any]]:
    items = json.loads(kube.core.list_namespaced_pod(ns, _preload_content=False).data)["items"]
    return {item["metadata"]["name"]: item for item in items}


def log_of(state: Path, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    folder = state / f"{meta['namespace']}_{meta['name']}_{meta['uid']}" / "consumer"
    return "".join(path.read_text(errors="replace") for path in sorted(folder.glob("*.log")))


def settings_line(state: Path, pod: dict[str, Any]) -> str | None:
    return next((ln for ln in log_of(state, pod).splitlines() if "settings:" in ln), None)


async def eventually(probe: Any, seconds: float, what: str) -> Any:
    return await polling.eventually_async(probe, what, seconds, not_yet=())


def joined(state: Path, pod: dict[str, Any]) -> bool:
    """The consumer in this pod has been through a rebalance (its own log says so)."""
    return "assigned generation=" in log_of(state, pod)


def group_of(workload: WorkloadView, members: set[str], now: float) -> GroupSnapshot:
    """The group as the consumers' own logs show it: a pod is a member once it was assigned.

    Stands in for the observer's snapshot, which needs the operator; the planner must not
    release the next batch before the real group has settled.
    """
    live = [pod.name for pod in workload.live_pods]
    ready = [name for name in live if name in members]
    state = "Empty" if not ready else ("Stable" if len(ready) == len(live) else "Rebalancing")
    return GroupSnapshot(
        state=state,
        protocol="classic",
        assignor="cooperative-sticky",
        generation=None,
        members=len(ready),
        member_details=tuple(
            MemberSummary(name, name, None, None, 1, Source.MEMBER_REPORTS) for name in ready
        ),
        assigned_partitions=4 if state == "Stable" else 0,
        total_partitions=4,
        lag=None,
        observed_at=now,
        sources={"members": Source.MEMBER_REPORTS},
    )


async def roll_out(
    kube: KubernetesApi, ns: str, state_dir: Path, policy: RolloutPolicy, seconds: float
) -> tuple[RolloutState, list[Action]]:
    setup = RolloutSetup(policy, BrokerProfile.APACHE_KAFKA, 3.0)
    actuator = Actuator(kube, ns, WorkloadKind.STATEFULSET, NAME)
    status: dict[str, Any] = {}
    done: list[Action] = []
    deadline = time.monotonic() + seconds
    state = RolloutState.from_status(status)
    while time.monotonic() < deadline:
        state = RolloutState.from_status(json.loads(json.dumps(status)))
        workload = await read_workload(kube, ns, WorkloadKind.STATEFULSET, NAME)
        assert workload is not None
        now = time.time()
        members = {name for name, pod in pods(kube, ns).items() if joined(state_dir, pod)}
        group = group_of(workload, members, now)
        state, actions = step(state, Observation(setup, workload, group), now)
        done += await actuator.apply(actions)
        status = state.to_status()
        if state.phase in (RolloutPhase.COMPLETED, RolloutPhase.FAILED):
            break
        await asyncio.sleep(0.3)
    return state, done


async def test_a_settings_change_rolls_out_in_batches_and_the_consumers_run_it(
    cluster: SharedCluster, kube: KubernetesApi, ns: str, broker: KafkaBroker
) -> None:
    logs = cluster.pod_logs()
    group = f"orders-{uuid.uuid4().hex[:8]}"
    admin = AdminGateway(build_client_config([broker.bootstrap], None))
    try:
        await admin.create_topic("orders", 4)
    finally:
        admin.close()
    kube.apps.create_namespaced_stateful_set(
        ns, consumers(broker.bootstrap, group), _preload_content=False
    )
    before = await eventually(
        lambda: (found := pods(kube, ns)) and len(found) == 2
        and all(joined(logs, pod) for pod in found.values()) and found,
        30, "two consumers in the group",
    )  # fmt: skip
    for pod in before.values():
        line = settings_line(logs, pod) or ""
        assert "session.timeout.ms=6000" in line and "heartbeat.interval.ms" not in line, line

    # The settings change: what the handler does on an update of spec.policy.settings.
    workload = await read_workload_body(kube, ns, WorkloadKind.STATEFULSET, NAME)
    assert workload is not None
    # The session stays; the rest changes visibly.
    policy = SettingsPolicy(
        session_timeout_ms=6000,
        heartbeat_interval_ms=1500,
        max_poll_interval_ms=60000,
        static_membership=True,
        properties=(("fetch.wait.max.ms", "50"),),
    )
    plan = plan_settings(
        SettingsInputs(
            namespace=ns,
            name="orders",
            uid=None,
            policy=policy,
            workload_kind=WorkloadKind.STATEFULSET,
            container=None,
            protocol_choice=ProtocolChoice.AUTO,
            workload=workload,
            view=await read_workload(kube, ns, WorkloadKind.STATEFULSET, NAME),
            observed={"state": "Stable", "members": 2, "assignor": "cooperative-sticky"},
        )
    )
    assert plan.problems == () and plan.configmap is not None and plan.rendered is not None
    await apply_configmap(kube, plan.configmap)
    assert await patch_workload(kube, ns, WorkloadKind.STATEFULSET, NAME, list(plan.patch.ops))

    # Parked in the same patch: no pod is replaced until the planner releases it.
    await asyncio.sleep(2.0)
    assert {p["metadata"]["uid"] for p in pods(kube, ns).values()} == {
        p["metadata"]["uid"] for p in before.values()
    }

    rollout = RolloutPolicy(
        max_batch_size=1,
        settle_seconds=1,
        gate_joins=False,
        consumers=consumer_timings(plan, ConsumerTimings()),
    )
    state, done = await roll_out(kube, ns, logs, rollout, 45)
    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert state.mechanism is Mechanism.STATEFULSET_REPLACE
    # One pod per batch, the highest ordinal first, then parked again: never every pod at once.
    assert state.sizes == (1, 1)
    partitions = [a.partition for a in done if isinstance(a, SetStatefulSetPartition)]
    assert partitions == [1, 0, 2]

    # Every consumer was replaced, joined the group (the planner waited for that between the
    # batches), and runs the new settings.
    after = pods(kube, ns)
    for name, pod in after.items():
        assert pod["metadata"]["uid"] != before[name]["metadata"]["uid"]
        assert joined(logs, pod)
        line = settings_line(logs, pod) or ""
        assert "session.timeout.ms=6000" in line, line
        assert "heartbeat.interval.ms=1500" in line, line
        assert "max.poll.interval.ms=60000" in line, line
        assert f"group.instance.id={name}" in line, line
        assert f"settings-hash={plan.rendered.hash}" in line, line
        assert "consumer.properties" in line, line  # the mounted file it read
