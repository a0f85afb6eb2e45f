"""Faults during managed Deployment rollouts, in the lab: the operator killed and restarted
mid-rollout, and a consumer pod hard-killed during a batch.

A settings change on the ConsumerGroup is written to the Deployment's template paused, with the
rebalancer.dev/held-for-rollout annotation; the planner takes the hold over and steps the
Deployment batch by batch, resuming it for a batch and pausing it again once the batch's pods
are in, until the group has settled with them. Real parts: Apache Kafka, Kubernetes' control
plane (its Deployment and ReplicaSet controllers), the lab's kubelet, the operator as its own
process.

For each fault the rollout must open every batch once and in order, replace every pod once, end
with the Deployment unpaused and the hold annotation gone, say at rest that nothing progresses
and nothing is degraded, and never leave the Deployment paused without a condition saying why.
The tests share one fleet and run in the file's order.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    eventually,
    get_cg,
    kubectl,
    restart_operator,
)
from tests.operator.reliability.rollout_fleets import (
    BATCH_OUT,
    PARTITIONS,
    HoldWatch,
    assert_truthful_end,
    at_phase,
    batches_opened,
    completed,
    consumer_pid,
    deployment_fleet,
    event_names,
    hard_kill,
    managed,
    observed_since,
    pods_lab,
    pods_of,
    rollout_of,
    settled,
    workload_body,
)

from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
NAME = "dsteps"
# Three pods in batches of one. The Deployment's own rolling update (maxSurge 1,
# maxUnavailable 0, minReadySeconds 8: see deployment_fleet) removes an old pod only once its
# replacement has been Ready for 8 s, so at most one pod leaves at a time, and between batches
# none leaves at all (the Deployment is paused). Without minReadySeconds all three pods went
# within a second of the first resume, before the operator's pause landed.
REPLICAS = 3
KIND = "Deployment"
# The settings guard refuses sessions below Kafka's default group.min.session.timeout.ms (6 s),
# so the fleet runs at 6 s from the start.
SESSION_MS = 6000


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


def settings(fetch_wait_ms: int) -> dict[str, Any]:
    """spec.policy.settings with the fleet's timings; each new value is a template change."""
    return {
        "sessionTimeoutMs": SESSION_MS,
        "heartbeatIntervalMs": SESSION_MS // 3,
        "properties": {"fetch.wait.max.ms": str(fetch_wait_ms)},
    }


# A new value for each change, a rerun's included: each is a new template, so a new rollout.
FETCH_WAITS = itertools.count(100, 10)


def change_settings(lab: Lab) -> None:
    patch = {"spec": {"policy": {"settings": settings(next(FETCH_WAITS))}}}
    kubectl(lab, "patch", "cg", NAME, "--type=merge", "-p", json.dumps(patch))


@pytest.fixture(scope="module")
def fleet(lab: Lab) -> Iterator[dict[str, Any]]:
    """The Deployment running and its group settled (an ungated cold start is no managed
    rollout), and a watch on holds over every test."""
    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    timings = {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": SESSION_MS // 3}
    group = managed(lab, NAME, settleSeconds=3, consumers=timings)
    group["spec"]["workload"] = {"kind": KIND, "name": f"{NAME}-consumer"}
    apply(lab, group, deployment_fleet(lab, NAME, REPLICAS))
    settled(lab, NAME, REPLICAS)
    shared: dict[str, Any] = {}
    with HoldWatch(lab, NAME, kind=KIND) as watch:
        shared["watch"] = watch
        yield shared


def live_pods(lab: Lab) -> dict[str, dict[str, Any]]:
    return {
        pod["metadata"]["name"]: pod
        for pod in pods_of(lab, NAME)
        if pod["metadata"].get("deletionTimestamp") is None
    }


def pod_runs(lab: Lab) -> set[str]:
    """Every pod the lab's kubelet has run for the fleet (one log directory per pod uid)."""
    folder = lab.config.state_dir / "logs" / "pods"
    return {path.name for path in folder.glob(f"default_{NAME}-consumer-*")}


def held(lab: Lab) -> dict[str, Any] | None:
    """The Deployment, while it is paused with the operator's hold annotation."""
    body = workload_body(lab, NAME, KIND)
    annotations = body["metadata"].get("annotations") or {}
    ours = ROLLOUT_HOLD_ANNOTATION in annotations
    return body if body["spec"].get("paused") and ours else None


def assert_stepped(lab: Lab, before: dict[str, Any], rollout: dict[str, Any]) -> None:
    """A batch that is in holds the Deployment paused with exactly its pods: the controller
    did not run ahead of the planner. `base` counts pods updated before the plan was made (a
    restarted operator plans again from the pods it finds)."""
    new = sorted(set(live_pods(lab)) - before["pods"])
    expected = int(rollout.get("base") or 0) + sum(rollout["batchSizes"][: rollout["batch"]])
    assert len(new) == expected, (rollout, new)
    assert held(lab) is not None, (rollout, workload_body(lab, NAME, KIND)["spec"])


def assert_rolled_once(
    lab: Lab, before: dict[str, Any], runs: set[str], final: dict[str, Any]
) -> None:
    """Every batch opened once, in order; every old pod replaced, each by one new pod; the
    Deployment handed back; status at rest says so."""
    assert final["kind"] == "rolling-update", final
    assert final["batches"] == REPLICAS and final["membersJoined"] == REPLICAS, final
    numbers = batches_opened(lab, NAME, "rolling-update", before["seen"])
    assert numbers == list(range(1, REPLICAS + 1)), f"batches opened: {numbers}"

    # The old pods are gone once the Deployment's controller has scaled the old ReplicaSet down.
    def replaced() -> dict[str, dict[str, Any]] | None:
        pods = live_pods(lab)
        return pods if len(pods) == REPLICAS and not set(pods) & before["pods"] else None

    pods = eventually(replaced, 60, "every old pod replaced")
    new_runs = pod_runs(lab) - runs
    assert len(new_runs) == REPLICAS, f"pods run for the rollout: {sorted(new_runs)}"
    assert {run.split("_")[1] for run in new_runs} == set(pods), (new_runs, sorted(pods))
    body = workload_body(lab, NAME, KIND)
    assert not body["spec"].get("paused"), body["spec"]
    annotations = body["metadata"].get("annotations") or {}
    assert ROLLOUT_HOLD_ANNOTATION not in annotations, annotations
    assert_truthful_end(lab, NAME, REPLICAS)
    status = get_cg(lab, NAME)
    assert condition(status, "Progressing").get("status") == "False", condition(
        status, "Progressing"
    )


def starting(lab: Lab) -> dict[str, Any]:
    """What a rollout is measured against, taken with the fleet at rest (a rerun waits out the
    rollout its failed attempt left): Event names, pods, pod runs and the last rollout."""

    def at_rest() -> tuple[dict[str, Any]] | None:
        rollout = rollout_of(lab, NAME)
        idle = rollout.get("phase") in (None, "Idle", "Completed", "Failed")
        return (rollout,) if idle and len(live_pods(lab)) == REPLICAS else None

    (last,) = eventually(at_rest, 180, f"{NAME} at rest before the rollout")
    settled(lab, NAME, REPLICAS)
    return {
        "seen": event_names(lab, NAME),
        "pods": set(live_pods(lab)),
        "runs": pod_runs(lab),
        "rolloutId": last.get("rolloutId"),
    }


def test_the_operator_killed_and_restarted_mid_rollout(lab: Lab, fleet: dict[str, Any]) -> None:
    before = starting(lab)
    change_settings(lab)
    kills: list[tuple[str, int | None]] = []

    def kill(phase: str | None, min_batch: int = 0) -> dict[str, Any]:
        """SIGKILL the operator once the rollout shows `phase` (None: once the Deployment is
        held, taken over or not), start it again, and check that nothing was forgotten."""
        if phase is None:
            eventually(lambda: held(lab), 60, "the Deployment held for the rollout", every=0.1)
            at_kill = rollout_of(lab, NAME)
        else:

            def probe() -> dict[str, Any] | None:
                rollout = rollout_of(lab, NAME)
                fresh = rollout.get("rolloutId") not in (before["rolloutId"], None)
                late = (rollout.get("batch") or 0) >= min_batch
                return rollout if fresh and late and rollout.get("phase") == phase else None

            at_kill = eventually(probe, 120, f"the rollout at {phase}", every=0.1)
            if phase == "BatchSettling" and at_kill["batch"] < REPLICAS:
                assert_stepped(lab, before, at_kill)
        killed_at = time.time()
        restart_operator(lab)
        kills.append((phase or "Held", at_kill.get("batch")))
        eventually(lambda: observed_since(lab, NAME, killed_at), 60, "the restarted operator")
        if phase is not None:
            after = rollout_of(lab, NAME)
            assert after["rolloutId"] == at_kill["rolloutId"], (at_kill, after)
            assert after["batch"] >= at_kill["batch"], (at_kill, after)
        return at_kill

    # Held by the settings write (the planner may or may not have taken it over yet); the
    # Deployment resumed for batch 2 and rolling; batch 2 in, the Deployment paused again.
    kill(None)
    opening = kill("BatchOpening", min_batch=2)
    kill("BatchSettling", min_batch=int(opening["batch"]))
    assert [phase for phase, _ in kills] == ["Held", "BatchOpening", "BatchSettling"], kills
    final = eventually(
        lambda: completed(lab, NAME, before["rolloutId"]), 150, "the rollout Completed"
    )
    assert final["rolloutId"] == opening["rolloutId"], (opening, final)
    assert_rolled_once(lab, before, before["runs"], final)


def restarts(lab: Lab, pod: str) -> int:
    body = live_pods(lab).get(pod) or {}
    statuses = body.get("status", {}).get("containerStatuses") or []
    return sum(int(item.get("restartCount") or 0) for item in statuses)


def test_a_consumer_hard_killed_during_a_batch(lab: Lab, fleet: dict[str, Any]) -> None:
    before = starting(lab)
    change_settings(lab)
    joining = at_phase(lab, NAME, "BatchJoining", before["rolloutId"])
    assert joining["batch"] == 1, joining
    assert_stepped(lab, before, joining)

    def new_consumer() -> tuple[str, int] | None:
        for pod in live_pods(lab):
            if pod not in before["pods"] and (pid := consumer_pid(lab, pod)) is not None:
                return pod, pid
        return None

    # Batch 1's new consumer is killed once it runs, while its batch is out (joining, or on a
    # busy machine already joined and held for the settle time): no LeaveGroup, no last
    # commit; the kubelet restarts it after its back-off, as it would a crashed container. The
    # Deployment is paused meanwhile: no other pod comes or goes.
    victim, pid = eventually(new_consumer, 60, "batch 1's new consumer", every=0.1)
    at_kill = rollout_of(lab, NAME)
    assert at_kill["phase"] in BATCH_OUT and at_kill["batch"] == 1, at_kill
    hard_kill(lab, victim)
    # And an old member that holds partitions meanwhile, in the middle of its work.
    bystander = sorted(before["pods"])[0]
    hard_kill(lab, bystander)
    for pod in (victim, bystander):
        eventually(lambda pod=pod: restarts(lab, pod) >= 1, 60, f"the kubelet to restart {pod}")
    final = eventually(
        lambda: completed(lab, NAME, before["rolloutId"]), 150, "the rollout Completed"
    )
    assert final["rolloutId"] == joining["rolloutId"], (joining, final)
    assert_rolled_once(lab, before, before["runs"], final)
    assert consumer_pid(lab, victim) not in (None, pid), "the killed consumer did not come back"


def test_the_deployment_was_never_held_unexplained(fleet: dict[str, Any]) -> None:
    fleet["watch"].assert_clean()
