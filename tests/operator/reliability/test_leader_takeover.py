"""Two operator replicas elect a leader; the leader SIGKILLed mid-rollout, the standby finishes it.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a `rebalancer gate` init container, then a consumer process), and two
`rebalancer operator --peering` processes sharing one ClusterKopfPeering, as the chart's two
replicas do, each as if in its pod (POD_NAME, a Pending pod it labels). The older one leads;
the other waits paused. A rolling update of a gated
StatefulSet of three, in batches of one, is under way when the leader is killed (no goodbye in
the peering object, as a node failure would leave it). The standby must take over within 15 s
(it says so on /metrics, labels its pod active for the Services and starts writing status),
finish the same rollout once, every pod replaced once, and the killed replica started again in
its pod must unlabel it and join as a standby, not take the lead back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from tests.operator.e2e.support import apply, eventually, free_port, kubectl
from tests.operator.reliability.rollout_fleets import (
    PARTITIONS,
    assert_rolled_once,
    assert_truthful_end,
    bump_template,
    completed,
    fleet,
    managed,
    observed_since,
    pods_lab,
    rollout_of,
    settled,
)

from rebalancer_lab.operator_replicas import PeeringReplica as Replica
from rebalancer_lab.operator_replicas import prepare_peering
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NAME = "takeover"
REPLICAS = 3
PEERING = "rebalancer"
NS = "default"
# The operator's default (--peering-lifetime 10): a takeover within it plus a resume.
TAKEOVER_LIMIT_S = 15.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="module")
def replicas(lab: Lab) -> Iterator[dict[str, Replica]]:
    """The lab's own operator (standalone) stopped; two peering replicas instead, `first`
    started before `second` and so its leader. `first` serves the lab's report port, where the
    lab's consumers report."""
    assert lab.operator is not None
    lab.operator.stop(grace=15)
    prepare_peering(lab, PEERING, ["operator-0", "operator-1"])
    first = Replica(lab, "first", lab.config.reports_port, "operator-0", PEERING).start()
    eventually(lambda: first.leader() == 1.0, 60, "the first replica leading")
    second = Replica(lab, "second", free_port(), "operator-1", PEERING).start()
    eventually(lambda: second.leader() == 0.0, 60, "the second replica standing by")
    group = {"first": first, "second": second}
    try:
        yield group
    finally:
        for replica in group.values():
            replica.child.stop(grace=15)


def test_the_standby_finishes_a_rollout_its_leader_was_killed_in(
    lab: Lab, replicas: dict[str, Replica]
) -> None:
    first, second = replicas["first"], replicas["second"]
    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    apply(lab, managed(lab, NAME), fleet(lab, NAME, REPLICAS))
    cold = eventually(lambda: completed(lab, NAME), 120, "the cold start Completed")
    settled(lab, NAME, REPLICAS)
    assert first.leader() == 1.0 and second.leader() == 0.0
    assert (first.active(), second.active()) == ("true", "false")
    # kopf keeps the standby paused: no watch, no handler, no daemon of its own.
    assert "kopf.objects" not in second.log(), second.log()[-3000:]

    bump_template(lab, NAME, "2")

    def mid_rollout() -> dict[str, object] | None:
        rollout = rollout_of(lab, NAME)
        fresh = rollout.get("rolloutId") not in (cold["rolloutId"], None)
        return rollout if fresh and rollout.get("phase") == "BatchJoining" else None

    at_kill = eventually(mid_rollout, 120, "the rollout's first batch joining", every=0.1)
    killed_wall, killed = time.time(), time.monotonic()
    first.kill()

    eventually(lambda: second.leader() == 1.0, 30, "the standby leading", every=0.2)
    leading_s = time.monotonic() - killed
    # The Services' pick follows: the new leader's pod is labelled active.
    eventually(lambda: second.active() == "true", 10, "the new leader's pod labelled", every=0.2)
    eventually(lambda: observed_since(lab, NAME, killed_wall), 30, "status written", every=0.2)
    acting_s = time.monotonic() - killed
    print(f"takeover: leader after {leading_s:.1f} s, status written after {acting_s:.1f} s")
    assert acting_s < TAKEOVER_LIMIT_S, (leading_s, acting_s)

    final = eventually(
        lambda: completed(lab, NAME, cold["rolloutId"]), 180, "the rollout Completed"
    )
    # The same rollout, finished by the standby, every pod replaced once in its batch.
    assert final["rolloutId"] == at_kill["rolloutId"], (at_kill, final)
    assert_rolled_once(lab, NAME, final, REPLICAS)
    assert_truthful_end(lab, NAME, REPLICAS)
    assert "Resuming operations" in second.log(), second.log()[-3000:]

    # The new leader released the later batches at their gates: their pods' waits, and the
    # rollout's end, are in its metrics.
    # The phase series follow status.rollout at the observer's next pass (observe interval).
    def completed_in_metrics() -> dict[str, list[tuple[dict[str, str], float]]] | None:
        found = second.samples(NAME)
        phases = {labels["phase"]: v for labels, v in found.get("rebalancer_rollout_phase", [])}
        return found if phases.get("Completed") == 1 and sum(phases.values()) == 1 else None

    series = eventually(completed_in_metrics, 30, "rollout phase Completed in the metrics")
    (waits,) = [v for _, v in series["rebalancer_gate_wait_seconds_count"]]
    assert waits >= 1, series
    (planned,) = [v for _, v in series["rebalancer_rollout_batches"]]
    (done,) = [v for _, v in series["rebalancer_rollout_batches_done"]]
    assert planned == done == len(final["batchSizes"]), (planned, done, final)

    # Started again in its pod, as a container restart would, the killed replica unlabels its
    # pod (it still said active) and joins behind the one that took over.
    restarted = Replica(lab, "first-again", free_port(), "operator-0", PEERING).start()
    replicas["first-again"] = restarted
    eventually(lambda: restarted.leader() == 0.0, 60, "the restarted replica standing by")
    time.sleep(5)
    assert second.leader() == 1.0 and restarted.leader() == 0.0
    assert (restarted.active(), second.active()) == ("false", "true")
    peering = kubectl(lab, "get", "clusterkopfpeering", PEERING, "-o", "yaml")
    assert "lastseen" in peering, peering
