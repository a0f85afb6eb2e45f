"""A change to a workload's spec starts its rollout at once, not at the planner's next look.

Real parts: Apache Kafka, Kubernetes' control plane (its Deployment and StatefulSet
controllers), the lab's kubelet (each pod a real consumer process), the operator as its own
process, run with `--rollout-resting-poll-seconds 600`: at rest its rollout planner looks at a
workload every ten minutes, so only its watch of the workload (handlers.workloads) can start a
rollout within the bounds below. A Deployment's controller starts replacing pods the moment a
new template is stored; seen late, pods would go past the first batch before any hold.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import apply, eventually
from tests.operator.reliability.rollout_fleets import (
    PARTITIONS,
    assert_rolled_once,
    assert_truthful_end,
    bump_template,
    completed,
    deployment_fleet,
    fleet,
    held_deployment,
    managed,
    pods_lab,
    rollout_of,
    settled,
)

from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

REPLICAS = 3
# The resting poll, and what a watched change must take at most: far apart, so that a look
# that happened to fall soon after the change cannot pass for the watch.
RESTING_POLL = 600
STARTED_WITHIN = 30.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory, ("--rollout-resting-poll-seconds", str(RESTING_POLL))) as run:
        yield run


def at_rest(lab: Lab, name: str) -> dict[str, Any] | None:
    rollout = rollout_of(lab, name)
    return rollout if rollout.get("phase") in ("Idle", "Completed") else None


def test_a_new_deployment_template_is_held_for_its_rollout_at_once(lab: Lab) -> None:
    name = "watched-deploy"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    group = managed(lab, name)
    group["spec"]["workload"] = {"kind": "Deployment", "name": f"{name}-consumer"}
    apply(lab, group)
    apply(lab, deployment_fleet(lab, name, REPLICAS))
    settled(lab, name, REPLICAS)
    before = eventually(lambda: at_rest(lab, name), 60, "the planner at rest")

    new = deployment_fleet(lab, name, REPLICAS)
    new["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "WATCHED", "value": "2"}
    )
    changed_at = time.monotonic()
    apply(lab, new)

    eventually(
        lambda: held_deployment(lab, name),
        STARTED_WITHIN,
        "the Deployment held for its first batch",
        every=0.1,
    )
    print(f"held {time.monotonic() - changed_at:.1f} s after the new template")
    final = eventually(
        lambda: completed(lab, name, before.get("rolloutId")), 240, "the rollout Completed"
    )
    # The controller's surge pod may come before the plan (`base`); every other pod is in a
    # batch of one, held between batches.
    assert final["kind"] == "rolling-update", final
    assert int(final.get("base") or 0) <= 1, final
    assert int(final.get("base") or 0) + sum(final["batchSizes"]) == REPLICAS, final
    assert_truthful_end(lab, name, REPLICAS)


def test_a_new_statefulset_template_starts_its_rollout_at_once(lab: Lab) -> None:
    name = "watched-sts"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    apply(lab, managed(lab, name))
    apply(lab, fleet(lab, name, REPLICAS))
    cold = eventually(lambda: completed(lab, name), 150, "the cold start Completed")
    settled(lab, name, REPLICAS)

    changed_at = time.monotonic()
    bump_template(lab, name, "2")

    def started() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        return rollout if rollout.get("rolloutId") not in (cold["rolloutId"], None) else None

    eventually(started, STARTED_WITHIN, "a rollout of the new template", every=0.1)
    print(f"planned {time.monotonic() - changed_at:.1f} s after the new template")
    final = eventually(
        lambda: completed(lab, name, cold["rolloutId"]), 240, "the rollout Completed"
    )
    assert_rolled_once(lab, name, final, REPLICAS)
    assert_truthful_end(lab, name, REPLICAS)
