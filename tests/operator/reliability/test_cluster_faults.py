"""Faults of a real cluster under a managed rolling update: the operator's watch expired (410
Gone) while it ran, and another writer changing the StatefulSet mid-rollout.

Real parts: Apache Kafka, Kubernetes' control plane (etcd, kube-apiserver, the StatefulSet
controller, the scheduler), the lab's kubelet running each pod as a `rebalancer gate` init
container then a consumer process, and the operator as its own process. Each rollout must end
with every pod on the latest template, no batch repeated or skipped without status saying so,
nothing held without a condition saying why, and a status that tells the truth.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests.operator.e2e.support import (
    apply,
    events_for,
    eventually,
    get_cg,
    incarnations,
    kubectl,
    running_lab,
)
from tests.operator.reliability.rollout_fleets import (
    BATCH_OUT,
    NS,
    PARTITIONS,
    SESSION_MS,
    HoldWatch,
    assert_rolled_once,
    assert_truthful_end,
    at_phase,
    batches_opened,
    bump_template,
    completed,
    event_names,
    fleet,
    managed,
    patch_rollout,
    pods_lab,
    pods_of,
    rollout_of,
    settled,
    workload_body,
)

from rebalancer.planning.workload_views import PARTITION_FIELD, field_writer
from rebalancer.structs.gates import GATE_BATCH_ANNOTATION
from rebalancer_lab.api_faults import FaultyApi
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPLICAS = 3
CG_LIST = r"^/apis/rebalancer\.dev/v1alpha1/consumergroups$"
# kube-apiserver compacts etcd every this often, to the revision it noted at the tick before: a
# revision is gone within two intervals. Five minutes by default; short here so that the
# operator's watch can be made to outlive its resourceVersion in seconds.
COMPACTION_S = 4


def cold_started(lab: Lab, name: str, **rollout: Any) -> dict[str, Any]:
    """A managed fleet of REPLICAS pods, its cold start Completed and the group settled."""
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    apply(lab, managed(lab, name, **rollout), fleet(lab, name, REPLICAS))
    done = eventually(lambda: completed(lab, name), 120, f"{name}: the cold start Completed")
    settled(lab, name, REPLICAS)
    return done


def finished(lab: Lab, name: str, before: str, within: float) -> dict[str, Any]:
    """status.rollout once a rollout other than `before` has Completed; status on failure."""
    try:
        return eventually(lambda: completed(lab, name, before), within, f"{name}: Completed")
    except AssertionError as error:
        status = get_cg(lab, name).get("status")
        raise AssertionError(f"{error}; status: {json.dumps(status, indent=1)}") from None


# -- the operator's watch expires (410 Gone) while a rollout starts ----------------------------


@pytest.fixture
def expiring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, FaultyApi]]:
    """A lab whose API server answers watches from etcd (no watch cache, which keeps at least
    75 s of events whatever etcd has compacted) and compacts every COMPACTION_S; its operator
    talks to it through a FaultyApi."""
    flags = {
        "kube-apiserver": ("--watch-cache=false", f"--etcd-compaction-interval={COMPACTION_S}s")
    }
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        pods=True,
        jitter="uniform(0,1)",
        session_timeout_ms=SESSION_MS,
        control_plane_flags=flags,
    ) as lab:
        assert lab.plane is not None and lab.operator is not None
        with FaultyApi(lab.plane) as proxy:
            lab.operator.stop(grace=15)
            lab.start_operator(proxy.write_kubeconfig(lab.config.state_dir / "operator-kubeconfig"))
            yield lab, proxy
            # The operator goes before the proxy it talks through.
            assert lab.operator is not None
            lab.operator.stop(grace=15)


def compacted(lab: Lab, revision: str) -> bool:
    """Whether etcd no longer has `revision`: a list at exactly it is answered 410 Gone."""
    assert lab.api_client is not None
    try:
        client.CustomObjectsApi(lab.api_client).list_cluster_custom_object(
            "rebalancer.dev",
            "v1alpha1",
            "consumergroups",
            resource_version=revision,
            resource_version_match="Exact",
            limit=1,
        )
    except client.ApiException as error:
        if error.status == 410:
            return True
        raise
    return False


def test_a_rollout_around_an_expired_watch_finishes_once_and_the_operator_sees_again(
    expiring: tuple[Lab, FaultyApi],
) -> None:
    lab, proxy = expiring
    name = "expiry"
    cold = cold_started(lab, name, settleSeconds=2)
    lives = {f"{name}-consumer-{k}": incarnations(lab, f"{name}-consumer-{k}") for k in range(3)}
    seen = event_names(lab, name)
    assert lab.api_client is not None
    objects = client.CustomObjectsApi(lab.api_client)

    with HoldWatch(lab, name) as holds:
        # The watch is cut and its reconnects answered 429 with Retry-After: kopf retries the
        # same request (the same resourceVersion) up to 8 times, 59 s in all at these
        # back-offs, before it would give up and list afresh; the faults are cleared long before.
        proxy.inject(status=429, method="GET", path_regex=CG_LIST, times=8, retry_after=3)
        assert proxy.drop_watches() >= 1
        # Cut, the watch sees nothing more: every revision it has seen is at most this one.
        now = objects.list_cluster_custom_object("rebalancer.dev", "v1alpha1", "consumergroups")
        revision = now["metadata"]["resourceVersion"]
        # Meanwhile: a spec change only the watch brings to the operator, and a new template,
        # which the rollout daemon finds by reading the StatefulSet itself.
        patch_rollout(lab, name, settleSeconds=3)
        generation = get_cg(lab, name)["metadata"]["generation"]
        bump_template(lab, name, "2")
        eventually(lambda: compacted(lab, revision), 60, f"etcd compacted past {revision}")
        assert get_cg(lab, name)["status"].get("observedGeneration") != generation, (
            "the operator saw the spec change although its watch was down"
        )
        assert proxy.met, "the operator did not try to watch again while its watch was down"
        proxy.clear()

        # The reconnect that gets through resumes from a compacted revision: 410 Gone.
        eventually(
            lambda: any(code == 410 for _, code in proxy.watch_errors),
            60,
            "a 410 Gone down the operator's ConsumerGroup watch",
        )
        # After it, kopf lists afresh: the spec change made during the outage is handled.
        eventually(
            lambda: get_cg(lab, name)["status"].get("observedGeneration") == generation,
            60,
            "the operator to see the spec changed during the outage",
        )
        final = finished(lab, name, cold["rolloutId"], 150)
        assert_truthful_end(lab, name, REPLICAS)
    holds.assert_clean()
    print(f"faults met: {len(proxy.met)}; watch errors: {proxy.watch_errors}")
    assert final["kind"] == "rolling-update" and final["batches"] == REPLICAS, final
    assert final["membersJoined"] == REPLICAS, final
    assert batches_opened(lab, name, "rolling-update", seen) == list(range(1, REPLICAS + 1))
    assert_rolled_once(lab, name, final, REPLICAS)
    replaced = {pod: incarnations(lab, pod) - before for pod, before in lives.items()}
    assert replaced == {pod: 1 for pod in lives}, f"pods replaced: {replaced}"


# -- another writer changes the StatefulSet mid-rollout ----------------------------------------

WRITTEN = "contest"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="module")
def written(lab: Lab) -> Iterator[dict[str, Any]]:
    """The fleet the writer tests change under their rollouts, cold-started once; a watch on
    holds over all of them."""
    cold = cold_started(lab, WRITTEN, settleSeconds=2)
    shared: dict[str, Any] = {"name": WRITTEN, "before": cold["rolloutId"], "replicas": REPLICAS}
    with HoldWatch(lab, WRITTEN) as watch:
        shared["watch"] = watch
        yield shared
    watch.assert_clean()


def apply_as(lab: Lab, name: str, manager: str, spec: dict[str, Any]) -> None:
    """Server-side apply of `spec` to fleet `name`'s StatefulSet as field manager `manager`,
    taking the fields over from whoever owns them (--force-conflicts), as a GitOps tool does."""
    assert lab.api_client is not None
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"{name}-consumer", "namespace": NS},
        "spec": spec,
    }
    client.AppsV1Api(lab.api_client).patch_namespaced_stateful_set(
        f"{name}-consumer",
        NS,
        body,
        field_manager=manager,
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def partition_of(lab: Lab, name: str) -> tuple[int, str | None]:
    """The StatefulSet's partition and the field manager that last wrote it."""
    body = workload_body(lab, name)
    partition = (body["spec"]["updateStrategy"].get("rollingUpdate") or {}).get("partition", 0)
    return int(partition), field_writer(body, PARTITION_FIELD)


def posted(lab: Lab, name: str, reason: str, seen: set[str]) -> dict[str, Any] | None:
    """The `reason` Event on fleet `name`'s ConsumerGroup not in `seen` (Event names)."""
    found = [
        event
        for event in events_for(lab, name)
        if event["reason"] == reason and event["metadata"]["name"] not in seen
    ]
    assert len(found) <= 1, [event["message"] for event in found]
    return found[0] if found else None


def joining_first(lab: Lab, shared: dict[str, Any]) -> dict[str, Any]:
    """status.rollout once the next rollout's first batch is out (its pod replaced)."""
    rollout = at_phase(lab, shared["name"], BATCH_OUT, shared["before"])
    assert rollout["batch"] == 1, rollout
    return rollout


def assert_all_current(lab: Lab, name: str, replicas: int) -> None:
    """Every pod runs the StatefulSet's latest template, and the controller says so."""
    body = workload_body(lab, name)
    status = body["status"]
    revision = status["updateRevision"]
    assert status.get("currentRevision") == revision, status
    pods = {
        pod["metadata"]["name"]: pod["metadata"]["labels"].get("controller-revision-hash")
        for pod in pods_of(lab, name)
        if not pod["metadata"].get("deletionTimestamp")
    }
    assert len(pods) == replicas and set(pods.values()) == {revision}, (revision, pods)


def batch_labels(lab: Lab, name: str) -> dict[str, str | None]:
    return {
        pod["metadata"]["name"]: pod["metadata"].get("annotations", {}).get(GATE_BATCH_ANNOTATION)
        for pod in pods_of(lab, name)
    }


def test_a_new_template_mid_rollout_supersedes_it_and_every_pod_gets_the_newest(
    lab: Lab, written: dict[str, Any]
) -> None:
    name, replicas = WRITTEN, written["replicas"]
    seen = event_names(lab, name)
    pods = [f"{name}-consumer-{k}" for k in range(replicas)]
    lives = {pod: incarnations(lab, pod) for pod in pods}
    bump_template(lab, name, "2")
    first = joining_first(lab, written)
    # Batch 1's pod runs the second template first: on a loaded machine the StatefulSet
    # controller can recreate it only after the third has landed, straight at the third.
    last = pods[-1]
    eventually(lambda: incarnations(lab, last) > lives[last], 60, f"{last} replaced by batch 1")
    # A second template (kubectl patch, field manager kubectl-patch) while batch 1 is out.
    bump_template(lab, name, "3")
    final = finished(lab, name, first["rolloutId"], 150)
    assert_truthful_end(lab, name, replicas)
    assert_all_current(lab, name, replicas)
    superseded = posted(lab, name, "RolloutSuperseded", seen)
    assert superseded is not None, [e["reason"] for e in events_for(lab, name)]
    said = superseded["message"]
    print("RolloutSuperseded:", said)
    assert f"rollout {first['rolloutId']} stopped at batch 1 of {replicas}" in said, said
    assert "the pod template was changed by kubectl-patch" in said, said
    assert said in final["message"], final
    # The new rollout replaced what was left: pods the first rollout had not reached once,
    # the one it had replaced (orders-2, at the partition) once more, by its controller.
    assert final["kind"] == "rolling-update", final
    labels = batch_labels(lab, name)
    assert {label.split("/")[0] for label in labels.values() if label} == {final["rolloutId"]}
    numbers = [int(str(labels[pod]).split("/")[1]) for pod in reversed(pods)]
    assert numbers == sorted(numbers), f"batches out of ordinal order: {labels}"
    assert final["membersJoined"] == replicas, final
    opened = batches_opened(lab, name, "rolling-update", seen)
    assert opened == [1, *range(1, final["batches"] + 1)], opened
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in pods}
    assert replaced == {pods[-1]: 2, **{pod: 1 for pod in pods[:-1]}}, replaced
    written["before"] = final["rolloutId"]


def test_a_scale_up_mid_rollout_supersedes_it_and_says_who(
    lab: Lab, written: dict[str, Any]
) -> None:
    name, replicas = WRITTEN, written["replicas"]
    seen = event_names(lab, name)
    pods = [f"{name}-consumer-{k}" for k in range(replicas)]
    lives = {pod: incarnations(lab, pod) for pod in pods}
    bump_template(lab, name, "4")
    first = joining_first(lab, written)
    kubectl(lab, "scale", "sts", f"{name}-consumer", f"--replicas={replicas + 1}")
    scaler = field_writer(workload_body(lab, name), ("f:spec", "f:replicas"))
    final = finished(lab, name, first["rolloutId"], 150)
    written["replicas"] = replicas + 1
    assert_truthful_end(lab, name, replicas + 1)
    assert_all_current(lab, name, replicas + 1)
    superseded = posted(lab, name, "RolloutSuperseded", seen)
    assert superseded is not None
    said = superseded["message"]
    print("RolloutSuperseded:", said)
    assert f"rollout {first['rolloutId']} stopped at batch 1 of {replicas}" in said, said
    assert f"the replicas were changed by {scaler} from {replicas} to {replicas + 1}" in said
    # The first rollout's batch keeps its label; the new pod joined the new rollout's first
    # batch, and is counted with it.
    labels = batch_labels(lab, name)
    assert labels[pods[-1]] == f"{first['rolloutId']}/1", labels
    assert labels[f"{name}-consumer-{replicas}"] == f"{final['rolloutId']}/1", labels
    assert final["membersJoined"] == replicas, final  # the two old pods left and the new one
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in pods}
    assert replaced == {pod: 1 for pod in pods}, replaced
    assert incarnations(lab, f"{name}-consumer-{replicas}") == 1
    written["before"] = final["rolloutId"]


@pytest.fixture
def contested(lab: Lab) -> Iterator[dict[str, Any]]:
    """A fleet of its own for each attempt of the partition test, cold-started: a rerun starts
    from a partition no other writer holds, not from the one a failed attempt left."""
    name = f"contested-{next(ATTEMPTS)}"
    cold = cold_started(lab, name, settleSeconds=2)
    shared: dict[str, Any] = {"name": name, "before": cold["rolloutId"], "replicas": REPLICAS}
    with HoldWatch(lab, name) as watch:
        yield shared
    watch.assert_clean()
    for kind in ("consumergroup", "statefulset"):
        what = name if kind == "consumergroup" else f"{name}-consumer"
        kubectl(lab, "delete", kind, what, "--wait=false")


ATTEMPTS = itertools.count(1)


@pytest.mark.timeout(480)
def test_a_partition_moved_by_another_writer_is_set_back_once_then_left_to_it_until_it_goes(
    lab: Lab, contested: dict[str, Any]
) -> None:
    name, replicas = contested["name"], contested["replicas"]
    seen = event_names(lab, name)
    pods = [f"{name}-consumer-{k}" for k in range(replicas)]
    lives = {pod: incarnations(lab, pod) for pod in pods}
    bump_template(lab, name, "5")
    joining_first(lab, contested)
    # A GitOps tool re-applies its manifest, which says partition 0 (Kubernetes' default).
    gitops = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}
    apply_as(lab, name, "someone-else", gitops)
    overridden = eventually(
        lambda: posted(lab, name, "PartitionOverridden", seen),
        60,
        "the operator to say who moved it",
    )
    assert overridden["type"] == "Warning", overridden
    assert (
        "someone-else set spec.updateStrategy.rollingUpdate.partition to 0"
        in (overridden["message"])
    )
    wanted = replicas - 1
    assert f"set back to {wanted}" in overridden["message"], overridden
    assert partition_of(lab, name)[1] == "rebalancer", partition_of(lab, name)
    # And again: the operator gives way instead of setting it back for good.
    apply_as(lab, name, "someone-else", gitops)
    given = eventually(
        lambda: posted(lab, name, "PartitionContested", seen),
        60,
        "the operator to leave it to the writer",
    )
    assert given["type"] == "Warning", given
    assert "leaves the partition to someone-else" in given["message"], given
    final = finished(lab, name, contested["before"], 180)
    print("PartitionOverridden:", overridden["message"])
    print("PartitionContested:", given["message"])
    print("status.rollout.message:", final["message"])
    # The operator parks a StatefulSet in the very step that completes its rollout (before it
    # writes Completed): the partition is still the other writer's, and stays so at rest
    # while that writer owns it.
    assert partition_of(lab, name) == (0, "someone-else")
    assert_truthful_end(lab, name, replicas)
    assert_all_current(lab, name, replicas)
    assert final["contestedBy"] == "someone-else" and final["yielded"], final
    # Said once each: no quarrel went on (posted() refuses a second Event of a reason).
    assert posted(lab, name, "PartitionOverridden", seen)
    assert posted(lab, name, "PartitionContested", seen)
    assert "leaves the partition to someone-else" in final["message"], final
    # No batch repeated or skipped, each pod replaced once, in order: the pods the controller
    # replaced ahead of their batches waited at their gates for them.
    assert batches_opened(lab, name, "rolling-update", seen) == list(range(1, replicas + 1))
    assert_rolled_once(lab, name, final, replicas)
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in pods}
    assert replaced == {pod: 1 for pod in pods}, replaced

    # The tool's manifest no longer sets the partition: its apply drops the field, which the
    # API server removes as its only owner no longer applies it (defaulted to 0, owned by
    # nobody). The operator takes it back at rest and parks the StatefulSet again.
    apply_as(lab, name, "someone-else", {"updateStrategy": {"type": "RollingUpdate"}})
    taken = eventually(
        lambda: posted(lab, name, "PartitionTakenBack", seen),
        60,
        "the operator to take the partition back",
    )
    print("PartitionTakenBack:", taken["message"])
    assert taken["type"] == "Normal", taken
    assert (
        "someone-else no longer owns spec.updateStrategy.rollingUpdate.partition "
        "(no field manager owns it in managedFields; it is 0)" in taken["message"]
    ), taken
    assert f"parks the StatefulSet at {replicas}" in taken["message"], taken
    eventually(
        lambda: partition_of(lab, name) == (replicas, "rebalancer"),
        30,
        "the StatefulSet parked again by the operator",
    )
    back = rollout_of(lab, name)
    assert not back.get("yielded") and back.get("parked"), back
    assert taken["message"] in back["message"], back
    # The next template rolls in the operator's batches: nothing replaced ahead of its batch,
    # nobody contesting.
    seen = event_names(lab, name)
    lives = {pod: incarnations(lab, pod) for pod in pods}
    bump_template(lab, name, "6")
    again = finished(lab, name, final["rolloutId"], 180)
    assert not again.get("yielded") and not again.get("contestedBy"), again
    assert not again.get("interference"), again
    assert batches_opened(lab, name, "rolling-update", seen) == list(range(1, replicas + 1))
    assert_rolled_once(lab, name, again, replicas)
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in pods}
    assert replaced == {pod: 1 for pod in pods}, replaced
    assert partition_of(lab, name) == (replicas, "rebalancer")
    assert not posted(lab, name, "PartitionOverridden", seen)
