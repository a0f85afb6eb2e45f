"""Kubernetes' StatefulSet controller and the lab kubelet together: a rollout finishes only if
the kubelet reports readiness truthfully and removes the pods it stopped, and a claim's files
outlive the pods that used them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.lab.support import (
    ROLLOUT_S,
    Lab,
    PodWatch,
    is_ready,
    new_version,
    statefulset,
    template,
    wait_for,
)

from rebalancer_lab.kube.objects import is_terminating
from rebalancer_lab.kube.requesting import resource_path

Body = dict[str, Any]


def pods(lab: Lab) -> dict[str, Body]:
    return {p["metadata"]["name"]: p for p in lab.api.list(lab.pods)["items"]}


def status(lab: Lab, name: str) -> Body:
    found = lab.api.get(lab.path("statefulsets", name))
    assert found is not None
    return found.get("status") or {}


def settled(lab: Lab, name: str, replicas: int) -> Body | None:
    """The StatefulSet's status once every replica is ready at the update revision."""
    found = lab.api.get(lab.path("statefulsets", name))
    assert found is not None
    st = found.get("status") or {}
    done = (
        st.get("observedGeneration") == found["metadata"]["generation"]
        and st.get("replicas", 0) == replicas
        and st.get("readyReplicas", 0) == replicas
        and st.get("updatedReplicas", 0) == replicas
        and st.get("currentRevision") == st.get("updateRevision")
    )
    return st if done else None


def test_a_rolling_update_replaces_the_highest_ordinal_first_one_at_a_time(lab: Lab) -> None:
    sts = lab.api.create(lab.path("statefulsets"), statefulset(lab, "roll", 3))
    old = wait_for(lambda: settled(lab, "roll", 3), ROLLOUT_S, "roll settled")["updateRevision"]

    with PodWatch(lab) as watch:
        # Never more than one pod down at a time.
        def one_down_at_most(cache: list[Body]) -> None:
            ready = sum(1 for p in cache if is_ready(p))
            assert ready >= 2, f"only {ready} ready pods during the update"

        watch.checks.append(one_down_at_most)
        lab.api.patch(lab.path("statefulsets", "roll"), new_version(sts, "2"))
        st = wait_for(lambda: settled(lab, "roll", 3), ROLLOUT_S, "rolled")
    assert st["updateRevision"] != old and st["currentRevision"] == st["updateRevision"]
    assert watch.names_in_order(lambda e: is_terminating(e.pod)) == ["roll-2", "roll-1", "roll-0"]
    assert not watch.failures, watch.failures[:3]
    revisions = {p["metadata"]["labels"]["controller-revision-hash"] for p in pods(lab).values()}
    assert revisions == {st["updateRevision"]}


def test_the_partition_limits_an_update_to_the_ordinals_at_or_above_it(lab: Lab) -> None:
    body = statefulset(
        lab,
        "part",
        3,
        podManagementPolicy="Parallel",
        updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
    )
    sts = lab.api.create(lab.path("statefulsets"), body)
    old = wait_for(lambda: settled(lab, "part", 3), ROLLOUT_S, "settled")["currentRevision"]

    lab.api.patch(lab.path("statefulsets", "part"), new_version(sts, "2"))

    def partly() -> Body | None:
        st = status(lab, "part")
        return st if st.get("updatedReplicas") == 1 and st.get("readyReplicas") == 3 else None

    st = wait_for(partly, ROLLOUT_S, "one pod updated")
    new = st["updateRevision"]
    assert new != old and st["currentRevision"] == old and st["currentReplicas"] == 2
    by_name = {n: p["metadata"]["labels"]["controller-revision-hash"] for n, p in pods(lab).items()}
    assert by_name == {"part-0": old, "part-1": old, "part-2": new}

    patch = {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}
    lab.api.patch(lab.path("statefulsets", "part"), patch)
    st = wait_for(lambda: settled(lab, "part", 3), ROLLOUT_S, "all updated")
    assert st["currentRevision"] == new


@pytest.fixture
def volumes(lab: Lab) -> Iterator[list[str]]:
    """PersistentVolumes bound ahead to claims of the test's namespace (no provisioner runs:
    the scheduler places a pod only once its claims are bound); deleted after the test."""
    names: list[str] = []
    yield names
    for name in names:
        lab.api.delete(resource_path("v1", "persistentvolumes", name=name))


def volume_for(lab: Lab, claim: str) -> Body:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{lab.namespace}-{claim}"},
        "spec": {
            "capacity": {"storage": "1Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            # Never mounted: the lab kubelet keeps a claim's files in its state folder.
            "hostPath": {"path": f"/nonexistent/{lab.namespace}/{claim}"},
            "claimRef": {"namespace": lab.namespace, "name": claim},
        },
    }


def test_volume_claim_templates_give_each_ordinal_storage_that_outlives_its_pods(
    lab: Lab, volumes: list[str]
) -> None:
    for claim in ("data-store-0", "data-store-1"):
        created = lab.api.create(resource_path("v1", "persistentvolumes"), volume_for(lab, claim))
        volumes.append(created["metadata"]["name"])
    tmpl = template(
        labels={"app": "store"},
        command=["sh", "-c", 'test -f /data/born || echo "$HOSTNAME" > /data/born; sleep 600'],
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
    )
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Mi"}},
        },
    }
    body = statefulset(
        lab, "store", 2, template=tmpl, volumeClaimTemplates=[claim], podManagementPolicy="Parallel"
    )
    lab.api.create(lab.path("statefulsets"), body)
    wait_for(lambda: settled(lab, "store", 2), ROLLOUT_S, "settled")
    volume = next(v for v in pods(lab)["store-1"]["spec"]["volumes"] if v["name"] == "data")
    assert volume == {"name": "data", "persistentVolumeClaim": {"claimName": "data-store-1"}}
    first = pods(lab)["store-1"]["metadata"]["uid"]

    lab.api.delete(lab.path("pods", "store-1"))
    wait_for(
        lambda: (p := pods(lab).get("store-1")) and p["metadata"]["uid"] != first and is_ready(p),
        30,
        "store-1 recreated",
    )
    claims = lab.state / "claims" / lab.namespace
    assert (claims / "data-store-1" / "born").read_text().strip() == "store-1"
    assert (claims / "data-store-0" / "born").read_text().strip() == "store-0"
