"""The lab's Deployment and ReplicaSet controllers, and garbage collection of what they own."""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.lab.support import (
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    PodWatch,
    deployment,
    is_ready,
    new_version,
    statefulset,
    template,
    wait_for,
)

from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.kube.objects import condition, is_terminating
from rebalancer.lab.kube.requesting import Api
from rebalancer.lab.kubelet import DELAY_ANNOTATION

Body = dict[str, Any]


def get(api: Api, name: str) -> Body:
    found = api.get(f"{DEPLOYMENTS}/{name}")
    assert found is not None
    return found


def replica_sets(api: Api) -> list[Body]:
    return list(api.list(REPLICASETS)["items"])


def live_pods(api: Api) -> list[Body]:
    return [p for p in api.list(PODS)["items"] if not is_terminating(p)]


def complete(api: Api, name: str) -> Body | None:
    """The Deployment once its rollout is complete, as `kubectl rollout status` decides."""
    found = get(api, name)
    st = found.get("status") or {}
    replicas = found["spec"]["replicas"]
    done = (
        st.get("observedGeneration") == found["metadata"]["generation"]
        and st.get("updatedReplicas", 0) == replicas
        and st.get("replicas", 0) == replicas
        and st.get("availableReplicas", 0) == replicas
        and len([p for p in live_pods(api) if p["metadata"]["labels"].get("app") == name])
        == replicas
    )
    return found if done else None


def slow_start(version: str = "1", name: str = "app", delay: float = 0.3) -> Body:
    """A template whose pods start `delay` seconds late, so rollouts take several steps."""
    tmpl = template(version, labels={"app": name})
    tmpl["metadata"]["annotations"] = {DELAY_ANNOTATION: str(delay)}
    return tmpl


def test_a_deployment_runs_its_pods_through_a_replica_set(api: Api, cluster: LabCluster) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 3))
    found = wait_for(lambda: complete(api, "app"), what="app complete")

    (rs,) = replica_sets(api)
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"app-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "app", "pod-template-hash": pod_hash}
    assert rs["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert found["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    for pod in live_pods(api):
        assert pod["metadata"]["name"].startswith(f"app-{pod_hash}-")
        assert pod["metadata"]["labels"]["pod-template-hash"] == pod_hash
        assert pod["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    st = found["status"]
    assert (st["readyReplicas"], st["availableReplicas"], st["updatedReplicas"]) == (3, 3, 3)
    assert condition(found, "Available")["status"] == "True"
    progressing = condition(found, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "NewReplicaSetAvailable")
    assert rs["status"]["readyReplicas"] == 3


@pytest.mark.parametrize(
    ("surge", "unavailable", "max_total", "min_ready"),
    [(1, 1, 5, 3), ("50%", 0, 6, 4), (0, "50%", 4, 2)],
)
def test_a_rolling_update_stays_within_max_surge_and_max_unavailable(
    api: Api,
    cluster: LabCluster,
    surge: int | str,
    unavailable: int | str,
    max_total: int,
    min_ready: int,
) -> None:
    strategy = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
    }
    body = deployment("app", 4, template=slow_start(), strategy=strategy)
    created = api.create(DEPLOYMENTS, body)
    wait_for(lambda: complete(api, "app"), what="first rollout")
    observed = {"total": 0, "ready": 99}

    def within_bounds(cache: list[Body]) -> None:
        live = [p for p in cache if not is_terminating(p)]
        observed["total"] = max(observed["total"], len(live))
        observed["ready"] = min(observed["ready"], sum(1 for p in live if is_ready(p)))
        assert len(live) <= max_total, f"{len(live)} pods, more than {max_total}"
        ready = sum(1 for p in live if is_ready(p))
        assert ready >= min_ready, f"{ready} ready pods, fewer than {min_ready}"

    with PodWatch(api) as watch:
        watch.checks.append(within_bounds)
        patch = new_version(created, "2")
        patch["spec"]["template"]["metadata"]["annotations"] = {DELAY_ANNOTATION: "0.3"}
        api.patch(f"{DEPLOYMENTS}/app", patch)
        found = wait_for(lambda: complete(api, "app"), timeout=20, what="second rollout")
    assert not watch.failures, watch.failures[:3]
    # The bounds were reached, not just respected: the rollout used its room.
    assert observed["total"] == max_total
    assert observed["ready"] == min_ready
    sets = {
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs
        for rs in replica_sets(api)
    }
    assert sets["1"]["spec"]["replicas"] == 0 and sets["2"]["spec"]["replicas"] == 4
    assert found["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_a_paused_deployment_does_not_roll_out_until_resumed(api: Api, cluster: LabCluster) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 2))
    wait_for(lambda: complete(api, "app"), what="first rollout")
    before = {p["metadata"]["uid"] for p in live_pods(api)}

    api.patch(f"{DEPLOYMENTS}/app", {"spec": {"paused": True}})
    api.patch(f"{DEPLOYMENTS}/app", new_version(created, "2"))
    found = wait_for(
        lambda: (
            (d := get(api, "app"))["status"].get("observedGeneration")
            == d["metadata"]["generation"]
            and d
        ),
        what="observed",
    )
    time.sleep(1.5)  # more than a resync: nothing may move
    assert len(replica_sets(api)) == 1
    assert {p["metadata"]["uid"] for p in live_pods(api)} == before
    progressing = condition(get(api, "app"), "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("Unknown", "DeploymentPaused")
    assert found["status"]["updatedReplicas"] == 0 if "updatedReplicas" in found["status"] else True

    # Scaling still works while paused, as on a cluster.
    api.patch(f"{DEPLOYMENTS}/app", {"spec": {"replicas": 3}})
    wait_for(lambda: len([p for p in live_pods(api) if is_ready(p)]) == 3, what="scaled to 3")
    assert len(replica_sets(api)) == 1

    api.patch(f"{DEPLOYMENTS}/app", {"spec": {"paused": False}})
    wait_for(lambda: complete(api, "app"), what="rolled out after resume")
    assert not before & {p["metadata"]["uid"] for p in live_pods(api)}
    assert len(replica_sets(api)) == 2


def test_recreate_stops_every_old_pod_before_starting_new_ones(
    api: Api, cluster: LabCluster
) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 3, strategy={"type": "Recreate"}))
    wait_for(lambda: complete(api, "app"), what="first rollout")
    old = {p["metadata"]["uid"] for p in live_pods(api)}
    overlap: list[int] = []

    def no_overlap(cache: list[Body]) -> None:
        uids = {p["metadata"]["uid"] for p in cache}
        if uids & old and uids - old:
            overlap.append(len(uids))

    with PodWatch(api) as watch:
        watch.checks.append(no_overlap)
        api.patch(f"{DEPLOYMENTS}/app", new_version(created, "2"))
        wait_for(lambda: complete(api, "app"), what="recreated")
    assert not overlap, "old and new pods existed at the same time"


def test_scaling_up_and_down(api: Api, cluster: LabCluster) -> None:
    api.create(DEPLOYMENTS, deployment("app", 2))
    wait_for(lambda: complete(api, "app"), what="2 replicas")
    api.patch(f"{DEPLOYMENTS}/app", {"spec": {"replicas": 5}})
    wait_for(lambda: complete(api, "app"), what="5 replicas")
    assert len(live_pods(api)) == 5
    api.patch(f"{DEPLOYMENTS}/app", {"spec": {"replicas": 1}})
    wait_for(lambda: complete(api, "app"), what="1 replica")
    (rs,) = replica_sets(api)
    assert rs["spec"]["replicas"] == 1
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "1"


def test_revision_history_limit_removes_the_oldest_idle_replica_sets(
    api: Api, cluster: LabCluster
) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 1, revisionHistoryLimit=1))
    for version in ("2", "3", "4"):
        wait_for(lambda: complete(api, "app"), what=f"rollout before {version}")
        api.patch(f"{DEPLOYMENTS}/app", new_version(created, version))
    wait_for(lambda: complete(api, "app"), what="last rollout")
    revisions = wait_for(
        lambda: (
            (
                r := sorted(
                    rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                    for rs in replica_sets(api)
                )
            )
            and len(r) == 2
            and r
        ),
        what="two ReplicaSets left",
    )
    assert revisions == ["3", "4"]


def test_a_rollback_reuses_the_old_replica_set(api: Api, cluster: LabCluster) -> None:
    created = api.create(DEPLOYMENTS, deployment("app", 2))
    wait_for(lambda: complete(api, "app"), what="v1")
    api.patch(f"{DEPLOYMENTS}/app", new_version(created, "2"))
    wait_for(lambda: complete(api, "app") and len(replica_sets(api)) == 2, what="v2")
    api.patch(f"{DEPLOYMENTS}/app", new_version(created, "1"))
    wait_for(
        lambda: (
            complete(api, "app")
            and get(api, "app")["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            == "3"
        ),
        what="back to v1 as revision 3",
    )
    assert len(replica_sets(api)) == 2


def test_owned_objects_are_collected_when_their_owner_is_deleted(
    api: Api, cluster: LabCluster
) -> None:
    api.create(DEPLOYMENTS, deployment("app", 2))
    api.create(STATEFULSETS, statefulset("db", 2, podManagementPolicy="Parallel"))
    wait_for(lambda: complete(api, "app") and len(live_pods(api)) == 4, what="everything up")

    api.delete(f"{DEPLOYMENTS}/app")
    wait_for(lambda: not replica_sets(api), what="ReplicaSets collected")
    wait_for(
        lambda: {p["metadata"]["name"] for p in api.list(PODS)["items"]} == {"db-0", "db-1"},
        what="the Deployment's pods collected",
    )
    api.delete(f"{STATEFULSETS}/db")
    wait_for(lambda: not api.list(PODS)["items"], what="the StatefulSet's pods collected")


def test_the_collector_deletes_pods_whose_owner_never_existed(
    api: Api, cluster: LabCluster
) -> None:
    body = {
        "metadata": {
            "name": "orphan",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "gone",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "main", "command": ["sleep", "600"]}]},
    }
    api.create(PODS, body)
    wait_for(lambda: api.get(f"{PODS}/orphan") is None, what="the orphan collected")


def test_events_say_what_the_controllers_and_the_kubelet_did(api: Api, cluster: LabCluster) -> None:
    api.create(DEPLOYMENTS, deployment("app", 1))
    wait_for(lambda: complete(api, "app"), what="app complete")

    def reasons() -> dict[tuple[str, str], str]:
        events = api.list("/api/v1/namespaces/default/events")["items"]
        return {(e["involvedObject"]["kind"], e["reason"]): e["message"] for e in events}

    seen = wait_for(
        lambda: (r := reasons()) and ("Pod", "Started") in r and r, what="the kubelet's events"
    )
    assert seen[("Deployment", "ScalingReplicaSet")].startswith("Scaled up replica set app-")
    assert seen[("ReplicaSet", "SuccessfulCreate")].startswith("Created pod: app-")
    assert seen[("Pod", "Scheduled")].endswith(" to lab")
    assert seen[("Pod", "Started")] == "Started container main"
