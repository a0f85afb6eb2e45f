"""Staggered rollouts through the operator, on the lab cluster with real consumer pods.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a `rebalancer gate` init container, then a `python -m rebalancer_lab.consumer`
process), and the
operator process (`rebalancer operator`), which observes the group from member reports and
drives the rollout daemon. Pods start seconds apart (the kubelet's jitter).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_deployment,
    consumer_group,
    consumer_log_generations,
    consumer_statefulset,
    events_for,
    eventually,
    get_cg,
    incarnations,
    kubectl,
    lab_context,
    restart_operator,
    running_lab,
)

from rebalancer.structs.gates import (
    GATE_BATCH_ANNOTATION,
    GATE_OPEN_AT_ANNOTATION,
    INSTANCE_ID_ANNOTATION,
    GateHold,
)
from rebalancer_lab.kubelet import START_DELAY_REASON
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
NS = "default"
SESSION_MS = 6000  # the least Kafka allows (group.min.session.timeout.ms)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # Pods wait 0, 2.5 or 5 s in turn before their first container starts, as on a busy node:
    # a schedule, not a random draw, so that any three pods in a row start at least 5 s apart
    # whichever tests ran before (a uniform(0,5) draw of four pods spread under 2 s one time
    # in five).
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        pods=True,
        jitter="cycle(0,2.5,5)",
        session_timeout_ms=SESSION_MS,
    ) as running:
        yield running


def consumers(
    lab: Lab, name: str, replicas: int, *, gated: bool, version: str = "1"
) -> dict[str, Any]:
    """A StatefulSet of lab consumers in group `name`, with the join gate when `gated`."""
    return consumer_statefulset(lab, name, replicas, gated=gated, version=version)


def managed(lab: Lab, name: str, **rollout: Any) -> dict[str, Any]:
    body = consumer_group(name, lab.bootstrap)
    body["spec"]["kafka"]["profile"] = "apache-kafka"
    body["spec"]["policy"]["rollout"] = {
        "enabled": True,
        "settleSeconds": 1,
        "consumers": {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": SESSION_MS // 3},
        **rollout,
    }
    return body


def rollout_of(lab: Lab, name: str) -> dict[str, Any]:
    return dict(get_cg(lab, name).get("status", {}).get("rollout") or {})


def pods_of(lab: Lab, name: str) -> list[dict[str, Any]]:
    out = kubectl(lab, "get", "pods", "-n", NS, "-l", f"app={name}", "-o", "json")
    return list(json.loads(out[: out.rindex("}") + 1])["items"])


def pod_logs(lab: Lab, pod: str) -> list[Path]:
    """Consumer logs of every incarnation of `pod`, oldest first."""
    root = lab.config.state_dir / "logs" / "pods"
    dirs = sorted(root.glob(f"{NS}_{pod}_*"), key=lambda path: path.stat().st_mtime)
    return [log for found in dirs for log in sorted((found / "consumer").glob("*.log"))]


def parse_time(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def start_delay(lab: Lab, pod: dict[str, Any]) -> float:
    """The start-up delay the lab kubelet recorded for this incarnation of `pod`."""
    uid = pod["metadata"]["uid"]
    for event in events_for(lab, pod["metadata"]["name"]):
        if event["reason"] == START_DELAY_REASON and event["involvedObject"].get("uid") == uid:
            return float(event["message"].split()[1])
    raise AssertionError(f"no {START_DELAY_REASON} event for {pod['metadata']['name']}")


def test_a_gathered_cold_start_costs_exactly_one_rebalance(lab: Lab) -> None:
    name = "cold"
    replicas = 4
    asyncio.run(ensure_topic(lab.bootstrap, name, 8))
    apply(lab, managed(lab, name, arrivalPlan="Gather"), consumers(lab, name, replicas, gated=True))

    def completed() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        return rollout if rollout.get("phase") == "Completed" else None

    rollout = eventually(completed, 90, "the cold start Completed")
    assert rollout["kind"] == "cold-start"
    assert rollout["batches"] == 1 and rollout["membersJoined"] == replicas, rollout
    # Named in the spec, and the model's own choice said beside it.
    assert rollout["plan"] == "Gather", rollout
    assert "spec.policy.rollout.arrivalPlan" in rollout["planReason"], rollout

    def settled() -> dict[str, Any] | None:
        group = get_cg(lab, name).get("status", {}).get("group") or {}
        done = group.get("members") == replicas and group.get("assignedPartitions") == 8
        return group if done and group.get("state") == "Stable" else None

    group = eventually(settled, 60, "four members, all partitions assigned")
    pods = pods_of(lab, name)
    # What the kubelet waited before each pod, as it recorded it: the schedule puts 5 s between
    # the first and the last of any three pods in a row.
    delays = sorted(start_delay(lab, pod) for pod in pods)
    assert delays[-1] - delays[0] >= 4.9, f"the jitter should spread the pods' starts: {delays}"
    assert {pod["metadata"]["annotations"][GATE_BATCH_ANNOTATION] for pod in pods} == {
        f"{rollout['rolloutId']}/1"
    }
    generations = [
        consumer_log_generations(log)
        for pod in pods
        for log in pod_logs(lab, pod["metadata"]["name"])
    ]
    # Every consumer saw one generation, the same one.
    assert len(generations) == replicas, generations
    assert len(set().union(*generations)) == 1 and all(len(g) == 1 for g in generations), (
        generations
    )
    rebalances = [e for e in events_for(lab, name) if e["reason"] == "Rebalance"]
    assert len(rebalances) == 1, [e["message"] for e in rebalances]
    assert group["rebalances"] == 1, group
    messages = [str(e["message"]) for e in events_for(lab, name)]
    assert any("batch 1 of 1 released (4 pods)" in m for m in messages), messages
    assert any(e["reason"] == "RolloutCompleted" for e in events_for(lab, name)), messages
    table = kubectl(lab, "get", "cg", name, "-o", "wide")
    header, row = table.splitlines()[:2]
    assert "ROLLOUT" in header and "BATCHES" in header, table
    assert "Completed" in row.split(), table


def test_a_gate_that_holds_only_the_join_starts_the_consumers_before_their_batch_opens(
    lab: Lab,
) -> None:
    """Gathered behind native-sidecar gates: the consumers run (started, connected) while the
    batch gathers, and still join in one generation once it opens."""
    name = "joinheld"
    replicas = 4
    asyncio.run(ensure_topic(lab.bootstrap, name, 8))
    fleet = consumer_statefulset(lab, name, replicas, gated=True, holds=GateHold.JOIN)
    apply(lab, managed(lab, name, arrivalPlan="Gather"), fleet)

    def completed() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        return rollout if rollout.get("phase") == "Completed" else None

    rollout = eventually(completed, 90, "the cold start Completed")
    assert rollout["batches"] == 1 and rollout["membersJoined"] == replicas, rollout
    assert "0.2 s after their gates open" in rollout["planReason"], rollout
    pods = pods_of(lab, name)
    (released,) = {float(pod["metadata"]["annotations"][GATE_OPEN_AT_ANNOTATION]) for pod in pods}
    started = sorted(
        parse_time(status["state"]["running"]["startedAt"])
        for pod in pods
        for status in pod["status"]["containerStatuses"]
        if status["name"] == "consumer"
    )
    # startedAt has whole seconds: the first consumers ran seconds before the batch let go.
    assert started[0] < released - 1.0, (started, released)
    generations = [
        consumer_log_generations(log)
        for pod in pods
        for log in pod_logs(lab, pod["metadata"]["name"])
    ]
    assert len(generations) == replicas, generations
    assert len(set().union(*generations)) == 1 and all(len(g) == 1 for g in generations), (
        generations
    )
    logs = [log.read_text() for pod in pods for log in pod_logs(lab, pod["metadata"]["name"])]
    assert all("holding the join until" in text and "the gate is open" in text for text in logs)


def test_a_kip848_cold_start_opens_each_pod_as_it_appears(lab: Lab) -> None:
    """A KIP-848 group has no join barrier: pods gathered at their gates would leave every
    partition unowned while they wait. The model says so, and each pod is let through as soon
    as it exists, its gate open before it runs."""
    name = "fresh848"
    replicas = 3
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    fleet = consumers(lab, name, replicas, gated=True)
    env = fleet["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "KAFKA_GROUP_PROTOCOL", "value": "consumer"})
    apply(lab, managed(lab, name), fleet)

    def completed() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        return rollout if rollout.get("phase") == "Completed" else None

    rollout = eventually(completed, 90, "the cold start Completed")
    assert rollout["kind"] == "cold-start", rollout
    assert (rollout["plan"], rollout["runnerUp"]) == ("OnArrival", "Gather"), rollout
    assert rollout["planCost"] < rollout["runnerUpCost"], rollout
    assert "KIP-848" in rollout["planReason"], rollout
    table = kubectl(lab, "get", "cg", name, "-o", "wide")
    header, row = table.splitlines()[:2]
    assert "PLAN" in header.split() and "OnArrival" in row.split(), table
    planned = [e for e in events_for(lab, name) if e["reason"] == "RolloutPlanned"]
    assert len(planned) == 1 and "OnArrival" in planned[0]["message"], planned

    def settled() -> dict[str, Any] | None:
        group = get_cg(lab, name).get("status", {}).get("group") or {}
        done = group.get("members") == replicas and group.get("assignedPartitions") == 6
        return group if done and group.get("state") == "Stable" else None

    eventually(settled, 60, "three members, all partitions assigned")
    # The pods the kubelet held longest were opened before their gates ran: each gate found
    # itself open at its first look.
    late = [pod for pod in pods_of(lab, name) if start_delay(lab, pod) >= 2.5]
    assert late, "the jitter should delay some pods"
    for pod in late:
        waited = gate_waits(lab, pod["metadata"]["name"])
        when = (pod["metadata"]["creationTimestamp"], rollout["startedAt"], rollout["openedAt"])
        assert waited and max(waited) < 1.0, (pod["metadata"]["name"], waited, when)


def gate_waits(lab: Lab, pod: str) -> list[float]:
    """How long each incarnation's gate waited for its opening, as the gate logged it."""
    root = lab.config.state_dir / "logs" / "pods"
    waits = []
    for found in root.glob(f"{NS}_{pod}_*"):
        for log in found.glob("rebalancer-gate/*.log"):
            for match in re.finditer(
                r"opened by the operator.* after ([0-9.]+) s", log.read_text()
            ):
                waits.append(float(match[1]))
    return waits


def test_a_policy_that_cannot_be_met_is_degraded_with_the_fix(lab: Lab) -> None:
    name = "toobig"
    asyncio.run(ensure_topic(lab.bootstrap, name, 4))
    # A deadline shorter than a cold start's join window and rebalance (3 s delay, one more
    # step of it for the second join, the protocol: 6.2 s).
    apply(lab, managed(lab, name, batchDeadlineSeconds=5), consumers(lab, name, 2, gated=True))

    def degraded() -> dict[str, Any] | None:
        found = condition(get_cg(lab, name), "Degraded")
        # Applied with the StatefulSet, the ConsumerGroup can be seen first: Degraded with
        # WorkloadNotFound until the StatefulSet is there.
        missing = found.get("reason") == "WorkloadNotFound"
        return found if found.get("status") == "True" and not missing else None

    found = eventually(degraded, 60, "a Degraded condition other than WorkloadNotFound")
    assert found["reason"] == "PolicyCannotBeMet", found
    assert "spec.policy.rollout.batchDeadlineSeconds (5) is shorter than" in found["message"]
    assert "set batchDeadlineSeconds to at least 13" in found["message"], found
    # The pods wait at their gates: the condition must say how to let them go.
    assert "rebalancer.dev/resume-rollout" in found["message"], found
    warnings = [e for e in events_for(lab, name) if e["type"] == "Warning"]
    assert any("batchDeadlineSeconds" in str(e["message"]) for e in warnings), warnings
    assert rollout_of(lab, name)["phase"] == "Failed"

    # The fix named in the message lets the held pods join, in one generation.
    kubectl(
        lab, "patch", "cg", name, "--type=merge",
        "-p", '{"spec":{"policy":{"rollout":{"batchDeadlineSeconds":13}}}}',
    )  # fmt: skip

    def recovered() -> dict[str, Any] | None:
        body = get_cg(lab, name)
        rollout = body.get("status", {}).get("rollout") or {}
        calm = condition(body, "Degraded").get("status") != "True"
        return body if calm and rollout.get("phase") == "Completed" else None

    eventually(recovered, 60, "the rollout Completed once the policy was fixed")

    # A deadline shorter than a batch needs. Ungated pods join as they start: the second is
    # started only once the first has been Ready for 8 s (OrderedReady, minReadySeconds), so
    # the batch cannot settle within the least deadline the CRD allows (5 s), however soon the
    # planner looks.
    late = "late"
    body = managed(
        lab, late, batchDeadlineSeconds=5,
        consumers={"sessionTimeoutMs": 20000, "heartbeatIntervalMs": 3000},
    )  # fmt: skip
    fleet = consumers(lab, late, 2, gated=False)
    fleet["spec"]["podManagementPolicy"] = "OrderedReady"
    fleet["spec"]["minReadySeconds"] = 8
    apply(lab, body, fleet)

    def late_degraded() -> dict[str, Any] | None:
        found = condition(get_cg(lab, late), "Degraded")
        return found if found.get("status") == "True" else None

    found = eventually(late_degraded, 60, "a Degraded condition for the deadline")
    assert "spec.policy.rollout.batchDeadlineSeconds (5) is shorter than" in found["message"]
    assert "set batchDeadlineSeconds to at least" in found["message"], found
    assert any("batchDeadlineSeconds" in str(e["message"]) for e in events_for(lab, late))
    sts = json.loads(kubectl(lab, "get", "sts", f"{late}-consumer", "-o", "json"))
    partition = sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
    # Parked (the operator's rest position for a StatefulSet) only with the condition up.
    assert partition in (0, 2), sts["spec"]["updateStrategy"]
    assert partition == 0 or condition(get_cg(lab, late), "Degraded")["status"] == "True"


def test_the_operator_resumes_a_rollout_after_being_killed(lab: Lab) -> None:
    name = "resumed"
    replicas = 3
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    apply(lab, managed(lab, name), consumers(lab, name, replicas, gated=True))

    def completed() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        return rollout if rollout.get("phase") == "Completed" else None

    first = eventually(completed, 90, "the cold start Completed")
    # A template change in batches of one pod, highest ordinal first.
    kubectl(
        lab, "patch", "cg", name, "--type=merge",
        "-p", '{"spec":{"policy":{"rollout":{"maxBatchSize":1}}}}',
    )  # fmt: skip
    # Only the template: an apply of the whole object would also reset the parked partition.
    env = [{"name": "APP_VERSION", "value": "2"}]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "consumer", "env": env}]}}}}
    kubectl(lab, "patch", "sts", f"{name}-consumer", "-p", json.dumps(patch))

    def second_batch() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        moving = rollout.get("rolloutId") != first["rolloutId"]
        return rollout if moving and (rollout.get("batch") or 0) >= 2 else None

    during = eventually(second_batch, 60, "the rolling update at batch 2", every=0.2)
    assert during["kind"] == "rolling-update" and during["batches"] == replicas, during
    restart_operator(lab)

    def finished() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        done = rollout.get("rolloutId") == during["rolloutId"]
        return rollout if done and rollout.get("phase") == "Completed" else None

    final = eventually(finished, 120, "the rolling update Completed after the restart")
    assert final["membersJoined"] == replicas, final
    pods = {pod["metadata"]["name"]: pod for pod in pods_of(lab, name)}
    batches = {
        name_: pod["metadata"]["annotations"].get(GATE_BATCH_ANNOTATION)
        for name_, pod in pods.items()
    }
    rollout_id = final["rolloutId"]
    # Highest ordinal first, one pod per batch, every batch once.
    assert batches == {
        f"{name}-consumer-{replicas - 1 - k}": f"{rollout_id}/{k + 1}" for k in range(replicas)
    }
    # Each pod was replaced exactly once: its first incarnation and the updated one.
    for pod in pods:
        assert incarnations(lab, pod) == 2, (pod, incarnations(lab, pod))
    envs = {
        pod["metadata"]["name"]: {
            e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]
        }
        for pod in pods.values()
    }
    assert all(env["APP_VERSION"] == "2" for env in envs.values()), envs
    group = get_cg(lab, name)["status"]["group"]
    assert group["members"] == replicas and group["assignedPartitions"] == 6, group


def test_a_deployment_update_hands_each_identity_over_without_a_rebalance(lab: Lab) -> None:
    """A Deployment's new pods take the group.instance.id of the old pods the operator retires
    in the same step, so the coordinator swaps the members and the generation stays."""
    name = "slots"
    replicas = 3
    session_ms = 20000  # covers a swap (an old consumer's stop to its successor's join)
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    body = managed(
        lab, name, consumers={"sessionTimeoutMs": session_ms, "heartbeatIntervalMs": 3000}
    )
    body["spec"]["workload"] = {"kind": "Deployment", "name": f"{name}-consumer"}
    fleet = consumer_deployment(lab, name, replicas, session_ms=session_ms)
    apply(lab, body, fleet)

    def completed(kind: str) -> Callable[[], dict[str, Any] | None]:
        def probe() -> dict[str, Any] | None:
            rollout = rollout_of(lab, name)
            done = rollout.get("phase") == "Completed" and rollout.get("kind") == kind
            return rollout if done else None

        return probe

    eventually(completed("cold-start"), 90, "the cold start Completed")

    def settled() -> dict[str, Any] | None:
        group = get_cg(lab, name).get("status", {}).get("group") or {}
        done = group.get("members") == replicas and group.get("assignedPartitions") == 6
        return group if done and group.get("state") == "Stable" else None

    before = eventually(settled, 60, "three members, every partition assigned")
    first = {pod["metadata"]["name"]: slot_of(pod) for pod in pods_of(lab, name)}
    assert sorted(first.values()) == [f"{name}-consumer-{k}" for k in range(replicas)], first
    rebalances = before["rebalances"]

    env = [{"name": "APP_VERSION", "value": "2"}]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "consumer", "env": env}]}}}}
    kubectl(lab, "patch", "deployment", f"{name}-consumer", "-p", json.dumps(patch))
    rollout = eventually(
        completed("rolling-update"),
        120,
        "the rolling update Completed",
        context=lab_context(lab, name),
    )
    assert rollout.get("static") is True, rollout

    def replaced() -> list[dict[str, Any]] | None:
        pods = pods_of(lab, name)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        fresh = all(p["metadata"]["name"] not in first for p in live)
        return live if len(live) == replicas and fresh else None

    live = eventually(replaced, 60, "only new pods left")
    after = eventually(settled, 60, "the group settled after the update")
    # Every identity carried over, none shared, none new.
    assert sorted(slot_of(pod) for pod in live) == sorted(first.values()), live
    # No rebalance: the generation the cold start made is the one the new members joined.
    assert after["rebalances"] == rebalances, (before, after)
    assert after["generation"] == before["generation"], (before, after)
    # Each new consumer was assigned its partitions in that very generation.
    for pod in live:
        [log] = pod_logs(lab, pod["metadata"]["name"])
        assert consumer_log_generations(log) == {before["generation"]}, log.read_text()


def slot_of(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(INSTANCE_ID_ANNOTATION)
