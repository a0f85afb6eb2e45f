"""Which events of a claimed workload wake its rollout planner: a spec its controller has not
observed, or a change in the pods its status counts (one Ready pod more, a revision rolled)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import kopf

from rebalancer.clients.workload_cache import WorkloadCache
from rebalancer.planning.ownership import workload_key
from rebalancer.planning.workload_changes import pod_progress
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.ownership import ClaimIndex
from rebalancer.reconcilers.workloads import claimed_and_changed


def statefulset(name: str, generation: int, observed: int, **status: Any) -> kopf.Body:
    return kopf.Body(
        {
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "team", "generation": generation},
            "status": {"observedGeneration": observed, **status},
        }
    )


def test_a_pod_ready_wakes_the_planner_and_a_repeat_of_the_same_counts_does_not() -> None:
    deps = cast(Dependencies, SimpleNamespace(workload_progress={}, workloads=WorkloadCache()))
    claims = cast(ClaimIndex, {workload_key("team", "StatefulSet", "orders"): ()})
    seen = [
        claimed_and_changed(deps, statefulset("orders", 3, 3, **status), "team", claims)
        for status in (
            {"replicas": 4, "readyReplicas": 3, "updateRevision": "r2", "currentRevision": "r1"},
            # the same counts again (a condition's timestamp, say): nothing to look at
            {"replicas": 4, "readyReplicas": 3, "updateRevision": "r2", "currentRevision": "r1"},
            # the replaced pod is Ready: the next one can go
            {"replicas": 4, "readyReplicas": 4, "updateRevision": "r2", "currentRevision": "r1"},
            # every pod on the new revision
            {"replicas": 4, "readyReplicas": 4, "updateRevision": "r2", "currentRevision": "r2"},
        )
    ]
    assert seen == [True, False, True, True]


def test_a_spec_change_wakes_even_with_the_same_counts_and_unclaimed_workloads_never() -> None:
    deps = cast(Dependencies, SimpleNamespace(workload_progress={}, workloads=WorkloadCache()))
    claims = cast(ClaimIndex, {workload_key("team", "StatefulSet", "orders"): ()})
    counts = {"replicas": 4, "readyReplicas": 4}
    assert claimed_and_changed(deps, statefulset("orders", 3, 3, **counts), "team", claims)
    assert not claimed_and_changed(deps, statefulset("orders", 3, 3, **counts), "team", claims)
    assert claimed_and_changed(deps, statefulset("orders", 4, 3, **counts), "team", claims)
    for _ in range(2):
        other = statefulset("billing", 3, 3, readyReplicas=1)
        assert not claimed_and_changed(deps, other, "team", claims)
    assert not claimed_and_changed(deps, other, "team", None)
    assert list(deps.workload_progress) == [workload_key("team", "StatefulSet", "orders")]


def test_pod_progress_reads_the_counts_both_controllers_keep() -> None:
    deployment = {"status": {"replicas": 3, "updatedReplicas": 1, "unavailableReplicas": 1}}
    assert pod_progress(deployment) != pod_progress({"status": {"replicas": 3}})
    assert pod_progress({}) == pod_progress({"status": None})


def test_a_deleted_or_unclaimed_workload_s_counts_are_forgotten() -> None:
    deps = cast(Dependencies, SimpleNamespace(workload_progress={}, workloads=WorkloadCache()))
    orders = workload_key("team", "StatefulSet", "orders")
    claims = cast(ClaimIndex, {orders: ()})
    body = statefulset("orders", 3, 3, replicas=4, readyReplicas=4)
    assert claimed_and_changed(deps, body, "team", claims, "ADDED")
    assert orders in deps.workload_progress
    assert not claimed_and_changed(deps, body, "team", claims, "DELETED")
    assert deps.workload_progress == {}
    # Recreated under the same name: its first event counts again.
    assert claimed_and_changed(deps, body, "team", claims, "ADDED")
    # The ConsumerGroup that named it is gone: the entry goes with the claim.
    assert not claimed_and_changed(deps, body, "team", cast(ClaimIndex, {}), "MODIFIED")
    assert deps.workload_progress == {}
