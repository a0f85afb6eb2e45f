"""Deleting a ConsumerGroup hands its workload back in every rollout phase, on the real control
plane: the operator's delete handler (rollouts.hand_back) leaves the StatefulSet unparked (its
partition at 0) and every pod held at its join gate opened, and a Deployment held for a rollout
resumed and unmarked.

Each case sets the workload as the phase leaves it (parked at rest; stepped mid-rollout, as
when parking is off or the rollout started unparked; a pod waiting at its gate) and the
ConsumerGroup's status.rollout as the planner wrote it, then runs the handler kopf runs on
deletion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from tests.reconcilers.rollouts.support import PARKED, statefulset, until
from tests.reconcilers.rollouts.test_rollout_daemon import dependencies, posted  # noqa: F401  (fixture)

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.handlers import rollouts
from rebalancer.structs.gates import GATE_ANNOTATION, GATE_CONTAINER, GATE_OPEN
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION

GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"
NAME, WORKLOAD = "orders", "orders-consumer"
REPLICAS = 3
NOW = "2026-01-01T00:00:00Z"

# (phase, partition the phase leaves, status.rollout beyond the phase)
PHASES: list[tuple[str, int, dict[str, Any]]] = [
    ("Idle", REPLICAS, {"parked": True}),
    ("Planning", REPLICAS, {"parked": True}),
    # Mid-rollout the partition is the planner's step, parked or not at the start.
    ("BatchOpening", 2, {"batch": 1, "batchSizes": [1, 2]}),
    ("BatchJoining", 2, {"batch": 1, "batchSizes": [1, 2], "opened": [f"{WORKLOAD}-2"]}),
    ("BatchSettling", 1, {"batch": 2, "batchSizes": [1, 1, 1], "parked": True}),
    ("Completed", REPLICAS, {"parked": True}),
    ("Failed", 2, {"batch": 1, "batchSizes": [1, 2], "reason": "BatchDeadlineExceeded"}),
    ("Paused", 2, {"pausedFrom": "BatchJoining", "batch": 1, "batchSizes": [1, 2]}),
]


def consumer_group(ns: str, kind: str, workload: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": NAME, "namespace": ns},
        "spec": {
            "groupId": NAME,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [NAME]},
            "workload": {"kind": kind, "name": workload},
            "policy": {"rollout": {"enabled": True, "maxBatchSize": 1}},
        },
    }


def with_status(kube: KubernetesApi, ns: str, rollout: dict[str, Any]) -> kopf.Body:
    """The ConsumerGroup with status.rollout as the planner left it."""
    kube.custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, consumer_group(ns, *WORKLOADS[rollout["kind"]])
    )
    status = {"status": {"rollout": {k: v for k, v in rollout.items() if k != "kind"}}}
    updated = kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, NAME, status
    )
    assert updated["status"]["rollout"]["phase"] == rollout["phase"]
    return kopf.Body(updated)


WORKLOADS = {"sts": ("StatefulSet", WORKLOAD), "deploy": ("Deployment", WORKLOAD)}


def sts(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    got = kube.apps.read_namespaced_stateful_set(WORKLOAD, ns, _preload_content=False)
    return cast(dict[str, Any], json.loads(got.data))


def pods(kube: KubernetesApi, ns: str) -> list[dict[str, Any]]:
    got = kube.core.list_namespaced_pod(
        ns, label_selector=f"app={WORKLOAD}", _preload_content=False
    )
    return cast(list[dict[str, Any]], json.loads(got.data)["items"])


async def delete_handler(kube: KubernetesApi, ns: str, body: kopf.Body, tmp_path: Path) -> None:
    memo = kopf.Memo(deps=dependencies(kube, tmp_path))
    await rollouts.hand_back(body=body, namespace=ns, name=NAME, memo=memo)


@pytest.mark.parametrize(("phase", "partition", "rollout"), PHASES, ids=[p[0] for p in PHASES])
async def test_deleting_in_each_phase_unparks_the_statefulset_and_opens_its_gates(
    kube: KubernetesApi,
    ns: str,
    tmp_path: Path,
    phase: str,
    partition: int,
    rollout: dict[str, Any],
) -> None:
    gated = statefulset(WORKLOAD, REPLICAS)
    gated["spec"]["template"]["spec"] = {
        "schedulingGates": PARKED,
        "initContainers": [{"name": GATE_CONTAINER, "image": "rebalancer"}],
        "containers": [{"name": "app", "image": "c:1"}],
    }
    gated["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition
    gated["spec"]["selector"]["matchLabels"] = {"app": WORKLOAD}
    gated["spec"]["template"]["metadata"]["labels"] = {"app": WORKLOAD}
    kube.apps.create_namespaced_stateful_set(ns, gated)
    await until(lambda: len(pods(kube, ns)) == REPLICAS, "the StatefulSet's pods", 30)
    body = with_status(
        kube,
        ns,
        {"kind": "sts", "phase": phase, "phaseSince": NOW, "rolloutId": "r1", **rollout},
    )

    await delete_handler(kube, ns, body, tmp_path)

    rolling = sts(kube, ns)["spec"]["updateStrategy"].get("rollingUpdate") or {}
    assert not rolling.get("partition"), f"{phase}: still parked at {rolling}"
    for pod in pods(kube, ns):
        annotations = pod["metadata"].get("annotations") or {}
        assert annotations.get(GATE_ANNOTATION) == GATE_OPEN, (phase, pod["metadata"]["name"])


@pytest.mark.parametrize("phase", ["BatchJoining", "Paused", "Failed"])
async def test_deleting_resumes_a_deployment_held_for_the_rollout(
    kube: KubernetesApi, ns: str, tmp_path: Path, phase: str
) -> None:
    container = {"name": "consumer", "image": "x", "command": ["sleep", "3600"]}
    kube.apps.create_namespaced_deployment(
        ns,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": WORKLOAD, "annotations": {ROLLOUT_HOLD_ANNOTATION: "true"}},
            "spec": {
                "replicas": 0,
                "paused": True,
                "selector": {"matchLabels": {"app": WORKLOAD}},
                "template": {
                    "metadata": {"labels": {"app": WORKLOAD}},
                    "spec": {"containers": [container]},
                },
            },
        },
    )
    extra = {"pausedFrom": "BatchJoining"} if phase == "Paused" else {}
    body = with_status(
        kube,
        ns,
        {
            "kind": "deploy",
            "phase": phase,
            "phaseSince": NOW,
            "rolloutId": "r1",
            "holdingDeployment": True,
            **extra,
        },
    )

    await delete_handler(kube, ns, body, tmp_path)

    got = json.loads(
        kube.apps.read_namespaced_deployment(WORKLOAD, ns, _preload_content=False).data
    )
    assert not got["spec"].get("paused"), phase
    assert ROLLOUT_HOLD_ANNOTATION not in (got["metadata"].get("annotations") or {}), phase
