"""A settings change to a Deployment with managed rollouts: the template write pauses it, so
its controller replaces no pod on its own, and the planner steps it batch by batch and resumes
it at the end.

Real parts: the Kubernetes control plane (its Deployment and ReplicaSet controllers), the lab
kubelet (pods are real processes), Apache Kafka for the settings reconcile's broker reads,
reconcile_settings as the settings handler calls it, and the rollout planner and actuator in the
operator's loop. The group is stood in for by the pods' readiness.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from tests import polling
from tests.kafka_brokers import shared_broker

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.rolling import Actuator, read_workload
from rebalancer.planning.gate_templates import GateOptions
from rebalancer.planning.rollout_actions import Action, PauseDeployment, ResumeDeployment
from rebalancer.planning.rollout_plans import RolloutSetup
from rebalancer.planning.rollout_states import Mechanism, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.reconcilers.settings_delivery import SettingsTarget, reconcile_settings
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.snapshots import GroupSnapshot, MemberSummary, Source
from rebalancer.structs.specs import ProtocolChoice, WorkloadKind
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION, WorkloadView
from rebalancer_lab.broker import KafkaBroker

pytestmark = pytest.mark.e2e
NAME = "web-consumer"
SLEEPER = ["python", "-c", "import time; time.sleep(3600)"]


@pytest.fixture
def broker() -> KafkaBroker:
    return shared_broker()


def deployment(replicas: int) -> dict[str, Any]:
    # Ready a second or two after it starts, as a consumer that needs a moment: an instant pod
    # would let the controller finish a step before any planner could look.
    probe = {"exec": {"command": ["true"]}, "initialDelaySeconds": 1, "periodSeconds": 1}
    container = {"name": "consumer", "image": "x", "command": SLEEPER, "readinessProbe": probe}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"terminationGracePeriodSeconds": 2, "containers": [container]},
            },
        },
    }


def raw_deployment(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    data = kube.apps.read_namespaced_deployment(NAME, ns, _preload_content=False).data
    body: dict[str, Any] = json.loads(data)
    return body


def pods(kube: KubernetesApi, ns: str) -> dict[str, dict[str, Any]]:
    items = json.loads(kube.core.list_namespaced_pod(ns, _preload_content=False).data)["items"]
    return {
        item["metadata"]["uid"]: item
        for item in items
        if item["metadata"].get("deletionTimestamp") is None
    }


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def eventually(probe: Any, seconds: float, what: str) -> Any:
    return await polling.eventually_async(probe, what, seconds, not_yet=())


def group_of(workload: WorkloadView, now: float) -> GroupSnapshot:
    """Members are the Ready pods; Stable once every live pod is one (a paused Deployment may
    hold a surge pod more than its replicas)."""
    members = [pod.name for pod in workload.live_pods if pod.ready]
    stable = bool(members) and len(members) == len(workload.live_pods)
    return GroupSnapshot(
        state="Stable" if stable else "PreparingRebalance",
        protocol="classic",
        assignor="cooperative-sticky",
        generation=None,
        members=len(members),
        member_details=tuple(
            MemberSummary(name, name, None, None, 1, Source.MEMBER_REPORTS) for name in members
        ),
        assigned_partitions=4 if stable else 0,
        total_partitions=4,
        lag=None,
        observed_at=now,
        sources={"members": Source.MEMBER_REPORTS},
    )


async def test_a_settings_change_to_a_deployment_is_held_then_stepped_by_the_planner(
    kube: KubernetesApi, ns: str, broker: KafkaBroker
) -> None:
    kube.apps.create_namespaced_deployment(ns, deployment(4), _preload_content=False)
    before = await eventually(
        lambda: (found := pods(kube, ns)) and len(found) == 4
        and all(ready(pod) for pod in found.values()) and found,
        40, "four Ready pods",
    )  # fmt: skip

    # What the settings handler does on a change of spec.policy.settings.
    target = SettingsTarget(
        namespace=ns,
        name="web",
        uid=None,
        group_id="web",
        bootstrap_servers=(broker.bootstrap,),
        workload_kind=WorkloadKind.DEPLOYMENT,
        workload_name=NAME,
        container=None,
        protocol_choice=ProtocolChoice.AUTO,
        profile=None,
        settings=SettingsPolicy(session_timeout_ms=6000, max_poll_interval_ms=60000),
        delay=None,
        staggered=True,
    )
    gateway = AdminGateway(build_client_config([broker.bootstrap], None))
    try:
        outcome = await reconcile_settings(kube, gateway, target, {}, {})
    finally:
        gateway.close()
    assert outcome.status is not None and outcome.status.get("applied"), outcome.status

    # Paused and marked in the template write itself: the controller replaces nothing.
    body = raw_deployment(kube, ns)
    assert body["spec"].get("paused") is True
    assert body["metadata"]["annotations"][ROLLOUT_HOLD_ANNOTATION] == "true"
    await asyncio.sleep(3.0)
    assert set(pods(kube, ns)) == set(before)

    # The operator's loop: the planner takes the held template over and steps it.
    policy = RolloutPolicy(settle_seconds=1, gate_joins=False)
    setup = RolloutSetup(policy, BrokerProfile.APACHE_KAFKA, 3.0)
    actuator = Actuator(kube, ns, WorkloadKind.DEPLOYMENT, NAME, GateOptions())
    status: dict[str, Any] = {}
    done: list[Action] = []
    unaccounted: list[float] = []
    replaced_while_paused: set[int] = set()
    deadline = time.monotonic() + 120
    state = RolloutState()
    while time.monotonic() < deadline:
        state = RolloutState.from_status(json.loads(json.dumps(status)))
        workload = await read_workload(kube, ns, WorkloadKind.DEPLOYMENT, NAME)
        assert workload is not None
        now = time.time()
        state, actions = step(state, Observation(setup, workload, group_of(workload, now)), now)
        done += await actuator.apply(actions)
        status = state.to_status()
        body = raw_deployment(kube, ns)
        if body["spec"].get("paused"):
            # Paused, the Deployment is the planner's: a rollout in progress holds it.
            if not (state.phase.active and state.holding_deployment):
                unaccounted.append(now)
            replaced_while_paused.add(sum(1 for uid in pods(kube, ns) if uid not in before))
        if state.phase in (RolloutPhase.COMPLETED, RolloutPhase.FAILED):
            break
        await asyncio.sleep(0.4)

    assert state.phase is RolloutPhase.COMPLETED, state.message
    assert state.mechanism is Mechanism.DEPLOYMENT_STEPS
    assert len(state.sizes) > 1  # stepped in batches, not all at once
    pauses = sum(1 for action in done if isinstance(action, PauseDeployment))
    assert pauses == len(state.sizes) - 1
    assert any(isinstance(action, ResumeDeployment) for action in done)
    # The only pause the planner did not account for is the write's own, before its first step.
    assert unaccounted == []
    # Held part way: the controller did not replace every pod in one go.
    assert any(0 < replaced < 4 for replaced in replaced_while_paused), replaced_while_paused

    # Resumed, unmarked, every pod replaced once, running the new template.
    body = raw_deployment(kube, ns)
    assert not body["spec"].get("paused")
    assert ROLLOUT_HOLD_ANNOTATION not in (body["metadata"].get("annotations") or {})
    after = await eventually(
        lambda: (found := pods(kube, ns)) and len(found) == 4
        and all(ready(pod) for pod in found.values()) and found,
        30, "four Ready pods after the rollout",
    )  # fmt: skip
    assert not set(after) & set(before)
