"""A GitOps tool re-applies the workload's manifest mid-rollout; the rollout still ends correct,
and the operator owns only the fields docs/gitops.md tells GitOps users to ignore.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller, server-side
apply and managedFields), the lab's kubelet (each pod a `rebalancer gate` init container, then
a consumer process), the operator as its own process. The StatefulSet is written only by
server-side apply under the field manager `gitops` with force, as Argo CD (ServerSideApply) and
Flux's kustomize-controller do, from a manifest that leaves the partition out. The gate is not
in the manifest: the operator injects it (spec.policy.rollout.injectGate). A new version is
applied, and while its first batch joins the same manifest is applied again. The rollout must
complete once, every pod replaced once in its batch; the operator's fields must survive the
re-apply; and the fields managedFields gives the operator's manager must be exactly those
docs/gitops.md lists. The same for a Deployment, re-applied while the rollout holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.managed_fields import documented, owned_by
from tests.operator.e2e.support import apply, eventually, kubectl
from tests.operator.reliability.rollout_fleets import (
    BATCH_OUT,
    PARTITIONS,
    SESSION_MS,
    assert_rolled_once,
    assert_truthful_end,
    completed,
    deployment_fleet,
    fleet,
    held_deployment,
    managed,
    pods_lab,
    rollout_of,
    settled,
    workload_body,
)

from rebalancer.structs.gates import GATE_CONTAINER
from rebalancer.structs.workloads import FIELD_MANAGER, ROLLOUT_HOLD_ANNOTATION
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NAME = "gitops"
REPLICAS = 3
MANAGER = "gitops"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


def manifest(lab: Lab, version: str) -> dict[str, Any]:
    """The StatefulSet as kept in git: no partition, no gate (the operator adds both)."""
    body = fleet(lab, NAME, REPLICAS, version=version)
    spec = body["spec"]
    spec["updateStrategy"] = {"type": "RollingUpdate"}
    del spec["template"]["spec"]["initContainers"]
    return body


def server_side_apply(lab: Lab, body: dict[str, Any]) -> str:
    return kubectl(
        lab,
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={MANAGER}",
        "-f",
        "-",
        stdin=yaml.safe_dump(body),
    )


def test_a_gitops_reapply_mid_rollout_leaves_the_rollout_and_the_operators_fields(
    lab: Lab,
) -> None:
    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    apply(lab, managed(lab, NAME, injectGate=True))
    server_side_apply(lab, manifest(lab, "1"))
    cold = eventually(lambda: completed(lab, NAME), 150, "the cold start Completed")

    server_side_apply(lab, manifest(lab, "2"))

    def mid_rollout() -> dict[str, Any] | None:
        rollout = rollout_of(lab, NAME)
        fresh = rollout.get("rolloutId") not in (cold["rolloutId"], None)
        return rollout if fresh and rollout.get("phase") in BATCH_OUT else None

    at_reapply = eventually(mid_rollout, 120, "the rollout's first batch joining", every=0.1)
    before = workload_body(lab, NAME)
    server_side_apply(lab, manifest(lab, "2"))
    after = workload_body(lab, NAME)
    # The re-apply changed nothing the operator wrote: the parked partition, the gate.
    strategy = after["spec"]["updateStrategy"]
    assert strategy == before["spec"]["updateStrategy"], (before, after)
    containers = [c["name"] for c in after["spec"]["template"]["spec"]["initContainers"]]
    assert containers == [GATE_CONTAINER], containers
    assert after["metadata"]["generation"] == before["metadata"]["generation"]

    final = eventually(
        lambda: completed(lab, NAME, cold["rolloutId"]), 180, "the rollout Completed"
    )
    assert final["rolloutId"] == at_reapply["rolloutId"], (at_reapply, final)
    assert not final.get("interference"), final
    assert_rolled_once(lab, NAME, final, REPLICAS)
    assert_truthful_end(lab, NAME, REPLICAS)

    body = workload_body(lab, NAME)
    ours = owned_by(body, FIELD_MANAGER)
    print("fields of the operator's manager:", sorted(ours))
    print("fields of the GitOps manager:", sorted(owned_by(body, MANAGER)))
    assert ours == documented("statefulset"), (sorted(ours), sorted(documented("statefulset")))
    # Nothing both write: the GitOps tool's apply never takes a field from the operator.
    assert not ours & owned_by(body, MANAGER)


DEPLOYMENT = "gitops-deploy"


def test_a_gitops_reapply_while_a_deployment_is_held_for_its_rollout(lab: Lab) -> None:
    """The Deployment's rollout holds it paused with the operator's mark; the operator's manager
    then owns what docs/gitops.md lists for Deployments, the tool's re-apply of the same
    manifest leaves both, the rollout completes, and once handed back the operator owns
    nothing on the Deployment."""
    asyncio.run(ensure_topic(lab.bootstrap, DEPLOYMENT, PARTITIONS))
    timings = {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": SESSION_MS // 3}
    group = managed(lab, DEPLOYMENT, settleSeconds=1, consumers=timings)
    group["spec"]["workload"] = {"kind": "Deployment", "name": f"{DEPLOYMENT}-consumer"}
    apply(lab, group)

    def deployment(version: str) -> dict[str, Any]:
        # The planner at rest looks every 10 s: a new pod Available in less could let the
        # controller replace two pods before the rollout is planned, leaving one batch and
        # nothing to hold between batches.
        body = deployment_fleet(lab, DEPLOYMENT, REPLICAS, min_ready_seconds=15)
        for variable in body["spec"]["template"]["spec"]["containers"][0]["env"]:
            if variable["name"] == "APP_VERSION":
                variable["value"] = version
        return body

    server_side_apply(lab, deployment("1"))
    # Running, and seen running by the operator: a new template applied before the operator
    # first looked would be rolled by the controller before any rollout is planned.
    eventually(
        lambda: (
            (workload_body(lab, DEPLOYMENT, "Deployment").get("status") or {}).get(
                "availableReplicas"
            )
            == REPLICAS
        ),
        150,
        "the Deployment running",
    )
    settled(lab, DEPLOYMENT, REPLICAS)
    eventually(
        lambda: rollout_of(lab, DEPLOYMENT).get("phase") in ("Idle", "Completed"),
        60,
        "the rollout planner at rest",
    )
    before_id = rollout_of(lab, DEPLOYMENT).get("rolloutId")
    server_side_apply(lab, deployment("2"))

    before = eventually(
        lambda: held_deployment(lab, DEPLOYMENT),
        120,
        "the Deployment held for its rollout",
        every=0.1,
    )
    holding = owned_by(before, FIELD_MANAGER)
    print("fields of the operator's manager on the held Deployment:", sorted(holding))
    assert holding == documented("deployment"), (sorted(holding), documented("deployment"))
    server_side_apply(lab, deployment("2"))
    after = workload_body(lab, DEPLOYMENT, "Deployment")
    assert after["spec"].get("paused") is True, after["spec"]
    assert ROLLOUT_HOLD_ANNOTATION in (after["metadata"].get("annotations") or {})
    assert after["metadata"]["generation"] == before["metadata"]["generation"]

    final = eventually(
        lambda: completed(lab, DEPLOYMENT, before_id), 240, "the Deployment's rollout Completed"
    )
    # Every pod in a batch, or replaced before the plan was made (`base`: the controller's
    # surge pod may come before the first hold lands).
    assert final["kind"] == "rolling-update", final
    assert int(final.get("base") or 0) + sum(final["batchSizes"]) == REPLICAS, final
    assert_truthful_end(lab, DEPLOYMENT, REPLICAS)
    body = workload_body(lab, DEPLOYMENT, "Deployment")
    assert not body["spec"].get("paused"), body["spec"]
    # Handed back: `paused: false` is no field the API server keeps, the mark is removed.
    assert owned_by(body, FIELD_MANAGER) == set(), sorted(owned_by(body, FIELD_MANAGER))
