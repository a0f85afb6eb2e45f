"""The lab's StatefulSet controller, watched through the API as an operator would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.lab.support import (
    PODS,
    STATEFULSETS,
    PodWatch,
    flag_probe,
    is_ready,
    new_version,
    statefulset,
    template,
    wait_for,
)

from rebalancer.lab.cluster import LabCluster
from rebalancer.lab.kube.objects import is_terminating
from rebalancer.lab.kube.requesting import Api

Body = dict[str, Any]


def pods(api: Api) -> dict[str, Body]:
    return {p["metadata"]["name"]: p for p in api.list(PODS)["items"]}


def status(api: Api, name: str) -> Body:
    found = api.get(f"{STATEFULSETS}/{name}")
    assert found is not None
    return found.get("status") or {}


def settled(api: Api, name: str, replicas: int) -> Body | None:
    """The StatefulSet's status once every replica is ready at the update revision."""
    found = api.get(f"{STATEFULSETS}/{name}")
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


def probed_template(flags: Path, name: str) -> Body:
    return template(labels={"app": name}, readinessProbe=flag_probe(flags))


def test_ordered_ready_creates_ordinals_one_at_a_time(
    api: Api, cluster: LabCluster, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    sts = api.create(STATEFULSETS, statefulset("web", 3, template=probed_template(flags, "web")))

    wait_for(lambda: "web-0" in pods(api), what="web-0 created")
    for ordinal in range(3):
        name = f"web-{ordinal}"
        wait_for(
            lambda name=name: pods(api).get(name, {}).get("status", {}).get("phase") == "Running",
            what=f"{name} running",
        )
        # The next ordinal waits until this one is Ready.
        assert set(pods(api)) == {f"web-{i}" for i in range(ordinal + 1)}
        (flags / name).touch()
        if ordinal < 2:
            wait_for(lambda o=ordinal: f"web-{o + 1}" in pods(api), what=f"web-{ordinal + 1}")

    st = wait_for(lambda: settled(api, "web", 3), what="web settled")
    assert st["availableReplicas"] == 3 and st["currentReplicas"] == 3
    pod = pods(api)["web-1"]
    assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-1"
    assert pod["metadata"]["labels"]["controller-revision-hash"] == st["updateRevision"]
    assert pod["spec"]["hostname"] == "web-1" and pod["spec"]["subdomain"] == "web"
    (owner,) = pod["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "StatefulSet",
        "web",
        sts["metadata"]["uid"],
        True,
    )


def test_parallel_creates_every_ordinal_at_once(
    api: Api, cluster: LabCluster, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    body = statefulset(
        "par", 3, template=probed_template(flags, "par"), podManagementPolicy="Parallel"
    )
    api.create(STATEFULSETS, body)
    wait_for(lambda: set(pods(api)) == {"par-0", "par-1", "par-2"}, what="all three pods")
    assert not any(is_ready(p) for p in pods(api).values())


def test_scale_down_removes_the_highest_ordinals_one_by_one_and_scale_up_adds_them_back(
    api: Api, cluster: LabCluster
) -> None:
    api.create(STATEFULSETS, statefulset("db", 4))
    wait_for(lambda: settled(api, "db", 4), what="db settled at 4")

    with PodWatch(api) as watch:
        api.patch(f"{STATEFULSETS}/db", {"spec": {"replicas": 1}})
        wait_for(lambda: settled(api, "db", 1) and set(pods(api)) == {"db-0"}, what="1 left")
        scaled_up = time.monotonic()
        api.patch(f"{STATEFULSETS}/db", {"spec": {"replicas": 3}})
        wait_for(lambda: settled(api, "db", 3), what="db back at 3")

    terminating = watch.names_in_order(lambda e: is_terminating(e.pod))
    assert terminating == ["db-3", "db-2", "db-1"]
    # OrderedReady: a pod's deletion starts only once the one above it is gone.
    for upper, lower in (("db-3", "db-2"), ("db-2", "db-1")):
        gone = watch.first(
            lambda e, n=upper: e.type == "DELETED" and e.pod["metadata"]["name"] == n
        )
        marked = watch.first(
            lambda e, n=lower: is_terminating(e.pod) and e.pod["metadata"]["name"] == n
        )
        assert gone is not None and marked is not None and gone.at <= marked.at
    created = watch.names_in_order(lambda e: e.type == "ADDED" and e.at > scaled_up)
    assert created == ["db-1", "db-2"]


def test_a_rolling_update_replaces_the_highest_ordinal_first_one_at_a_time(
    api: Api, cluster: LabCluster
) -> None:
    sts = api.create(STATEFULSETS, statefulset("roll", 3))
    old = wait_for(lambda: settled(api, "roll", 3), what="roll settled")["updateRevision"]

    with PodWatch(api) as watch:
        # Never more than one pod down at a time.
        def one_down_at_most(cache: list[Body]) -> None:
            ready = sum(1 for p in cache if is_ready(p))
            assert ready >= 2, f"only {ready} ready pods during the update"

        watch.checks.append(one_down_at_most)
        api.patch(f"{STATEFULSETS}/roll", new_version(sts, "2"))
        st = wait_for(lambda: settled(api, "roll", 3), what="rolled")
    assert st["updateRevision"] != old and st["currentRevision"] == st["updateRevision"]
    assert watch.names_in_order(lambda e: is_terminating(e.pod)) == ["roll-2", "roll-1", "roll-0"]
    assert not watch.failures, watch.failures[:3]
    revisions = {p["metadata"]["labels"]["controller-revision-hash"] for p in pods(api).values()}
    assert revisions == {st["updateRevision"]}


def test_the_partition_limits_an_update_to_the_ordinals_at_or_above_it(
    api: Api, cluster: LabCluster
) -> None:
    body = statefulset(
        "part", 3, updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    )
    sts = api.create(STATEFULSETS, body)
    old = wait_for(lambda: settled(api, "part", 3), what="settled")["currentRevision"]

    api.patch(f"{STATEFULSETS}/part", new_version(sts, "2"))

    def partly() -> Body | None:
        st = status(api, "part")
        return st if st.get("updatedReplicas") == 1 and st.get("readyReplicas") == 3 else None

    st = wait_for(partly, what="one pod updated")
    new = st["updateRevision"]
    assert new != old and st["currentRevision"] == old and st["currentReplicas"] == 2
    by_name = {n: p["metadata"]["labels"]["controller-revision-hash"] for n, p in pods(api).items()}
    assert by_name == {"part-0": old, "part-1": old, "part-2": new}
    # A deleted pod below the partition comes back at the current revision.
    api.delete(f"{PODS}/part-0")
    wait_for(
        lambda: (
            (p := pods(api).get("part-0"))
            and p["metadata"]["uid"]
            and is_ready(p)
            and status(api, "part").get("readyReplicas") == 3
        ),
        what="part-0 back",
    )
    assert pods(api)["part-0"]["metadata"]["labels"]["controller-revision-hash"] == old

    api.patch(
        f"{STATEFULSETS}/part", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}
    )
    st = wait_for(lambda: settled(api, "part", 3), what="all updated")
    assert st["currentRevision"] == new


def test_on_delete_updates_a_pod_only_when_it_is_deleted(api: Api, cluster: LabCluster) -> None:
    sts = api.create(STATEFULSETS, statefulset("od", 2, updateStrategy={"type": "OnDelete"}))
    old = wait_for(lambda: settled(api, "od", 2), what="settled")["currentRevision"]
    api.patch(f"{STATEFULSETS}/od", new_version(sts, "2"))
    new = wait_for(
        lambda: (s := status(api, "od")).get("updateRevision") != old and s,
        what="a new update revision",
    )["updateRevision"]
    uid = pods(api)["od-1"]["metadata"]["uid"]
    old_uids = {n: p["metadata"]["uid"] for n, p in pods(api).items()}

    api.delete(f"{PODS}/od-1")
    wait_for(
        lambda: (p := pods(api).get("od-1")) and p["metadata"]["uid"] != uid and is_ready(p),
        what="od-1 recreated",
    )
    labels = {n: p["metadata"]["labels"]["controller-revision-hash"] for n, p in pods(api).items()}
    assert labels == {"od-0": old, "od-1": new}
    assert pods(api)["od-0"]["metadata"]["uid"] == old_uids["od-0"]
    assert status(api, "od")["updatedReplicas"] == 1


def test_max_unavailable_updates_several_pods_at_once(api: Api, cluster: LabCluster) -> None:
    body = statefulset(
        "fast",
        4,
        podManagementPolicy="Parallel",
        updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
    )
    sts = api.create(STATEFULSETS, body)
    wait_for(lambda: settled(api, "fast", 4), what="settled")
    with PodWatch(api) as watch:
        unready_counts: list[int] = []
        watch.checks.append(
            lambda cache: unready_counts.append(sum(1 for p in cache if not is_ready(p)))
        )
        api.patch(f"{STATEFULSETS}/fast", new_version(sts, "2"))
        wait_for(lambda: settled(api, "fast", 4), what="rolled")
    assert watch.names_in_order(lambda e: is_terminating(e.pod))[:2] == ["fast-3", "fast-2"]
    assert max(unready_counts) == 2


def test_a_failed_pod_is_replaced(api: Api, cluster: LabCluster) -> None:
    tmpl = template(labels={"app": "once"}, command=["sh", "-c", "sleep 0.3; exit 1"])
    tmpl["spec"]["restartPolicy"] = "Never"
    api.create(STATEFULSETS, statefulset("once", 1, template=tmpl))
    first = wait_for(lambda: pods(api).get("once-0"), what="once-0")["metadata"]["uid"]
    wait_for(
        lambda: (p := pods(api).get("once-0")) and p["metadata"]["uid"] != first,
        what="a new once-0 after the first failed",
    )


def test_volume_claim_templates_give_each_ordinal_storage_that_outlives_its_pods(
    api: Api, cluster: LabCluster
) -> None:
    tmpl = template(
        labels={"app": "store"},
        command=["sh", "-c", 'test -f /data/born || echo "$HOSTNAME" > /data/born; sleep 600'],
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
    )
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    body = statefulset(
        "store", 2, template=tmpl, volumeClaimTemplates=[claim], podManagementPolicy="Parallel"
    )
    api.create(STATEFULSETS, body)
    wait_for(lambda: settled(api, "store", 2), what="settled")
    volumes = pods(api)["store-1"]["spec"]["volumes"]
    assert volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-store-1"}}]
    first = pods(api)["store-1"]["metadata"]["uid"]

    api.delete(f"{PODS}/store-1")
    wait_for(
        lambda: (p := pods(api).get("store-1")) and p["metadata"]["uid"] != first and is_ready(p),
        what="store-1 recreated",
    )
    claims = cluster.state_dir / "claims" / "default"
    assert (claims / "data-store-1" / "born").read_text().strip() == "store-1"
    assert (claims / "data-store-0" / "born").read_text().strip() == "store-0"
