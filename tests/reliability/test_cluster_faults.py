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
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests.api_faults import FaultyApi
from tests.e2e.support import apply, eventually, get_cg, incarnations, running_lab
from tests.reliability.rollout_fleets import (
    PARTITIONS,
    SESSION_MS,
    HoldWatch,
    assert_rolled_once,
    assert_truthful_end,
    batches_opened,
    bump_template,
    completed,
    event_names,
    fleet,
    managed,
    patch_rollout,
    settled,
)

from rebalancer.lab.producer import ensure_topic
from rebalancer.lab.running import Lab

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
    # Every revision the operator's watch has seen is at most this one.
    now = objects.list_cluster_custom_object("rebalancer.dev", "v1alpha1", "consumergroups")
    revision = now["metadata"]["resourceVersion"]

    with HoldWatch(lab, name) as holds:
        # The watch is cut and its reconnects answered 429 with Retry-After: kopf retries the
        # same request (the same resourceVersion) up to 8 times, 59 s in all at these
        # back-offs, before it would give up and list afresh; the faults are cleared long before.
        proxy.inject(status=429, method="GET", path_regex=CG_LIST, times=8, retry_after=3)
        assert proxy.drop_watches() >= 1
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
