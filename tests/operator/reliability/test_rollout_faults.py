"""Faults during managed rollouts, in the lab: the operator killed at each rollout state, a
consumer pod hard-killed during a batch, the enforcement sidecar unreachable, the broker
stopped mid-batch; and no message lost through a managed rolling update and scale-up.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a `rebalancer gate` init container, then a consumer process), the operator as
its own process.
For each fault the rollout must finish without repeating or skipping a batch, the workload
must never stay held without a condition saying why and how to resume, and status must say
what happened. The tests share one lab and run in the file's order; the broker goes last (it
comes back empty).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    events_for,
    eventually,
    free_port,
    get_cg,
    incarnations,
    kubectl,
    restart_operator,
    running_lab,
)
from tests.operator.reliability.rollout_fleets import (
    PARTITIONS,
    SESSION_MS,
    HoldWatch,
    assert_rolled_once,
    assert_truthful_end,
    at_phase,
    batches_opened,
    bump_template,
    completed,
    consumer_pid,
    event_names,
    fleet,
    group_of,
    hard_kill,
    managed,
    observed_since,
    patch_rollout,
    pods_of,
    rollout_of,
    settled,
)

from rebalancer.clients.kafka_admin import AdminGateway, KafkaGatewayError
from rebalancer_lab.ledgers import delivered, numbered_producer, recorded, summarize
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # Pods wait up to a second before their first container starts: not all at once.
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        own_broker=True,  # the last test stops it
        pods=True,
        jitter="uniform(0,1)",
        session_timeout_ms=SESSION_MS,
    ) as running:
        yield running


def cold_started(lab: Lab, name: str, replicas: int, **rollout: Any) -> dict[str, Any]:
    """A managed fleet of `replicas` pods, its cold start Completed and the group settled."""
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    record_dir = rollout.pop("record_dir", None)
    apply(
        lab,
        managed(lab, name, **rollout),
        fleet(lab, name, replicas, record_dir=record_dir),
    )
    done = eventually(lambda: completed(lab, name), 120, f"{name}: the cold start Completed")
    settled(lab, name, replicas)
    return done


# -- the operator killed at each rollout state -------------------------------------------------

KILL_NAME = "phases"
KILL_REPLICAS = 3


@pytest.fixture(scope="module")
def killed(lab: Lab) -> Iterator[dict[str, Any]]:
    """One rolling update of three pods in batches of one, the operator killed at each state in
    turn; what the kills share, and a watch on holds over all of it."""
    name = KILL_NAME
    # One batch for the cold start; settleSeconds 3: BatchSettling lasts long enough to be seen.
    cold = cold_started(lab, name, KILL_REPLICAS, maxBatchSize=KILL_REPLICAS, settleSeconds=3)
    pods = [f"{name}-consumer-{k}" for k in range(KILL_REPLICAS)]
    shared: dict[str, Any] = {
        "before": cold["rolloutId"],
        "seen": event_names(lab, name),
        "lives": {pod: incarnations(lab, pod) for pod in pods},
        "rollout": None,
        "kills": [],
    }
    with HoldWatch(lab, name) as watch:
        shared["watch"] = watch
        yield shared


def kill_at(lab: Lab, shared: dict[str, Any], phase: str, min_batch: int = 0) -> dict[str, Any]:
    """SIGKILL the operator as soon as status shows `phase` (at `min_batch` or later) for the
    rollout under test, start it again, and return status.rollout at the kill."""
    name = KILL_NAME

    def probe() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        ours = rollout.get("rolloutId") not in (shared["before"], None)
        if shared["rollout"] is not None:
            ours = rollout.get("rolloutId") == shared["rollout"]
        late = (rollout.get("batch") or 0) >= min_batch
        return rollout if ours and late and rollout.get("phase") == phase else None

    at_kill = eventually(probe, 120, f"{name}: rollout at {phase}", every=0.1)
    killed_at = time.time()
    restart_operator(lab)
    shared["kills"].append((phase, at_kill.get("batch")))
    eventually(lambda: observed_since(lab, name, killed_at), 60, "the restarted operator")
    after = rollout_of(lab, name)
    # Nothing of the rollout was forgotten: the same one, at the same batch or further.
    assert after["rolloutId"] == at_kill["rolloutId"], (at_kill, after)
    assert after["batch"] >= at_kill["batch"], (at_kill, after)
    return at_kill


# In the order one rollout goes through them. Planning is left out: it lasts one step, with no
# moment to kill in that status shows; Idle and Completed are where the rollout starts and ends.
@pytest.mark.parametrize(
    "phase", ["Failed", "Paused", "BatchOpening", "BatchJoining", "BatchSettling"]
)
def test_the_operator_killed_at(lab: Lab, killed: dict[str, Any], phase: str) -> None:
    name = KILL_NAME
    if phase == "Failed":
        # A batch deadline shorter than a batch needs (a join window and the rebalances around
        # it): the rollout fails at once, before touching a pod.
        patch_rollout(lab, name, maxBatchSize=1, batchDeadlineSeconds=5)
        bump_template(lab, name, "2")
        at_kill = kill_at(lab, killed, phase)
        body = get_cg(lab, name)
        assert body["status"]["rollout"]["phase"] == "Failed", body["status"]["rollout"]
        found = condition(body, "Degraded")
        assert found["status"] == "True" and "batchDeadlineSeconds" in found["message"], found
        assert "rebalancer.dev/resume-rollout" in found["message"], found
        lives = {pod: incarnations(lab, pod) for pod in killed["lives"]}
        assert lives == killed["lives"], "pods were replaced for a rollout that cannot be met"
        patch_rollout(lab, name, batchDeadlineSeconds=None)
        killed["before"] = at_kill["rolloutId"]
        return
    if phase == "Paused":
        batch = kill_at_joining_then_pause(lab, killed)
        body = get_cg(lab, name)
        assert body["status"]["rollout"]["phase"] == "Paused", body["status"]["rollout"]
        found = condition(body, "Progressing")
        assert found["reason"] == "RolloutPaused", found
        assert f"paused at batch {batch} of" in found["message"], found
        assert "spec.policy.rollout.paused" in found["message"], found
        patch_rollout(lab, name, paused=False)
        return
    kill_at(lab, killed, phase, min_batch=2)


def kill_at_joining_then_pause(lab: Lab, killed: dict[str, Any]) -> int:
    """Pause the rollout in its first batch, and kill the operator while it is paused."""
    name = KILL_NAME

    def joining() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        fresh = rollout.get("rolloutId") not in (killed["before"], None)
        return rollout if fresh and rollout.get("phase") == "BatchJoining" else None

    rollout = eventually(joining, 120, f"{name}: the first batch joining", every=0.1)
    killed["rollout"] = rollout["rolloutId"]
    patch_rollout(lab, name, paused=True)
    at_kill = kill_at(lab, killed, "Paused")
    return int(at_kill["batch"])


def test_the_rollout_killed_at_every_state_completed_once(lab: Lab, killed: dict[str, Any]) -> None:
    name = KILL_NAME
    assert [phase for phase, _ in killed["kills"]] == [
        "Failed", "Paused", "BatchOpening", "BatchJoining", "BatchSettling",
    ], killed["kills"]  # fmt: skip
    final = eventually(lambda: completed(lab, name, killed["before"]), 150, "the rollout Completed")
    assert final["rolloutId"] == killed["rollout"], (killed, final)
    assert_truthful_end(lab, name, KILL_REPLICAS)
    killed["watch"].assert_clean()
    assert final["kind"] == "rolling-update" and final["batches"] == KILL_REPLICAS, final
    assert final["membersJoined"] == KILL_REPLICAS, final
    numbers = batches_opened(lab, name, "rolling-update", killed["seen"])
    assert numbers == list(range(1, KILL_REPLICAS + 1)), f"batches opened: {numbers}"
    assert_rolled_once(lab, name, final, KILL_REPLICAS)
    replaced = {pod: incarnations(lab, pod) - lives for pod, lives in killed["lives"].items()}
    assert replaced == {pod: 1 for pod in replaced}, f"pods replaced: {replaced}"


# -- a consumer hard-killed, a managed scale-up, an unreachable sidecar: nothing lost ---------

FLOW = "flow"
FLOW_REPLICAS = 2
TOKEN = "flow-sidecar-token"


@pytest.fixture(scope="module")
def flow(lab: Lab) -> Iterator[dict[str, Any]]:
    """A fleet whose consumers record every message they process (at-least-once: recorded,
    then committed), and a producer writing numbered messages until the last flow test."""
    records = lab.config.state_dir / "flow-records"
    cold = cold_started(lab, FLOW, FLOW_REPLICAS, maxBatchSize=FLOW_REPLICAS, record_dir=records)
    producer = numbered_producer(lab, "flow-producer", FLOW, rate=50, count=0)
    producer.start()
    shared: dict[str, Any] = {"before": cold["rolloutId"], "records": records, "producer": producer}
    with HoldWatch(lab, FLOW) as watch:
        shared["watch"] = watch
        try:
            yield shared
        finally:
            producer.stop(grace=60)


def restarts(lab: Lab, pod: str) -> int:
    body = next(p for p in pods_of(lab, FLOW) if p["metadata"]["name"] == pod)
    statuses = body.get("status", {}).get("containerStatuses") or []
    return sum(int(item.get("restartCount") or 0) for item in statuses)


def test_a_consumer_hard_killed_during_a_batch(lab: Lab, flow: dict[str, Any]) -> None:
    name = FLOW
    seen = event_names(lab, name)
    pods = [f"{name}-consumer-{k}" for k in range(FLOW_REPLICAS)]
    lives = {pod: incarnations(lab, pod) for pod in pods}
    patch_rollout(lab, name, maxBatchSize=1)
    bump_template(lab, name, "2")
    # Batch 1 is the highest ordinal; its new consumer is killed once it runs, before the
    # group has settled with it: no LeaveGroup, no last commit; the kubelet restarts it after
    # its back-off, as it would a crashed container.
    victim = f"{name}-consumer-{FLOW_REPLICAS - 1}"
    joining = at_phase(lab, name, "BatchJoining", flow["before"])
    assert joining["batch"] == 1, joining
    pid = eventually(lambda: consumer_pid(lab, victim), 60, f"{victim}'s new consumer", every=0.1)
    assert rollout_of(lab, name)["phase"] == "BatchJoining", "the batch settled before the kill"
    hard_kill(lab, victim)
    # And the member that holds the partitions meanwhile, in the middle of its work.
    bystander = f"{name}-consumer-0"
    hard_kill(lab, bystander)
    for pod in (victim, bystander):
        eventually(lambda pod=pod: restarts(lab, pod) >= 1, 60, f"the kubelet to restart {pod}")
    final = eventually(lambda: completed(lab, name, flow["before"]), 150, "the rollout Completed")
    assert final["rolloutId"] == joining["rolloutId"], (joining, final)
    assert final["batches"] == FLOW_REPLICAS and final["membersJoined"] == FLOW_REPLICAS, final
    assert_truthful_end(lab, name, FLOW_REPLICAS)
    numbers = batches_opened(lab, name, "rolling-update", seen)
    assert numbers == list(range(1, FLOW_REPLICAS + 1)), f"batches opened: {numbers}"
    assert_rolled_once(lab, name, final, FLOW_REPLICAS)
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in pods}
    assert replaced == {pod: 1 for pod in pods}, f"pods replaced: {replaced}"
    assert consumer_pid(lab, victim) not in (None, pid), "the killed consumer did not come back"
    flow["before"] = final["rolloutId"]


def test_a_managed_scale_up(lab: Lab, flow: dict[str, Any]) -> None:
    name = FLOW
    seen = event_names(lab, name)
    kubectl(lab, "scale", "sts", f"{name}-consumer", f"--replicas={FLOW_REPLICAS + 1}")
    final = eventually(lambda: completed(lab, name, flow["before"]), 120, "the scale-up Completed")
    assert final["kind"] == "scale-up" and final["batches"] == 1, final
    assert final["membersJoined"] == 1, final
    assert_truthful_end(lab, name, FLOW_REPLICAS + 1)
    assert batches_opened(lab, name, "scale-up", seen) == [1]
    flow["before"] = final["rolloutId"]
    flow["watch"].assert_clean()


def test_an_unreachable_sidecar_is_reported_and_retried(lab: Lab, flow: dict[str, Any]) -> None:
    name = FLOW
    token_file = lab.config.state_dir / "flow-token"
    token_file.write_text(TOKEN)
    port = free_port()  # nothing listens there yet
    url = f"http://127.0.0.1:{port}"
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "flow-t", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    apply(lab, secret)
    generation = group_of(lab, name)["generation"]
    enforce = {
        "requestToken": "first",
        "sidecar": {"url": url, "tokenSecretRef": {"name": "flow-t"}},
    }
    kubectl(
        lab,
        "patch",
        "cg",
        name,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"policy": {"enforce": enforce}}}),
    )
    eventually(
        lambda: (get_cg(lab, name)["status"].get("enforcement") or {}).get("memory"),
        60,
        "the enforcement policy taken in",
    )
    seen = event_names(lab, name)
    patch = {"spec": {"policy": {"enforce": {"requestToken": "second"}}}}
    kubectl(lab, "patch", "cg", name, "--type=merge", "-p", json.dumps(patch))

    def failed() -> list[dict[str, Any]]:
        return [
            e for e in events_for(lab, name)
            if e["reason"] == "EnforceFailed" and e["metadata"]["name"] not in seen
        ]  # fmt: skip

    warnings = eventually(failed, 60, "an EnforceFailed Event")
    assert warnings[0]["type"] == "Warning"
    assert str(port) in warnings[0]["message"], warnings[0]

    def failed_in_status() -> dict[str, Any] | None:
        record = get_cg(lab, name)["status"].get("enforcement") or {}
        return record if record.get("lastStatus") == "failed" else None

    record = eventually(failed_in_status, 30, "status.enforcement to say the request failed")
    assert record.get("lastRequestId") and record.get("lastCause") == "on-demand", record
    assert lab.operator is not None and lab.operator.running
    # The sidecar comes up: the same request is sent again and carried out.
    lab.start_sidecar(f"{name}-consumer-0", name, token_file, port)

    def enforced() -> dict[str, Any] | None:
        status = get_cg(lab, name)["status"]
        done = (status.get("enforcement") or {}).get("lastStatus") == "enforced"
        return status if done and status["group"]["generation"] > generation else None

    status = eventually(enforced, 90, "the enforced rebalance once the sidecar answered")
    # The failed request was sent again, not replaced by a new one.
    assert status["enforcement"]["lastRequestId"] == record["lastRequestId"], status
    reasons = [e["reason"] for e in events_for(lab, name) if e["metadata"]["name"] not in seen]
    assert "RebalanceEnforced" in reasons, reasons


def test_no_message_lost_through_managed_rollouts(lab: Lab, flow: dict[str, Any]) -> None:
    producer = flow["producer"]
    # Its last deliveries may take a while on a busy machine: it says what it delivered.
    producer.stop(grace=60)
    produced = set(range(delivered(producer)))
    assert len(produced) > 1000, f"only {len(produced)} messages over the rollouts"
    files = lambda: sorted(flow["records"].glob("*.tsv"))  # noqa: E731

    def all_processed() -> bool:
        return produced <= set(recorded(files()))

    try:
        eventually(all_processed, 120, "every produced message processed", every=1)
    finally:
        seen = recorded(files())
    summary = summarize(produced, seen)
    print(summary)
    (lab.config.state_dir / "no-message-lost-rollouts.txt").write_text(summary + "\n")


def stalled(lab: Lab, name: str) -> str:
    """What status shows, and whether a new Kafka client gets answers the operator does not."""
    status = get_cg(lab, name).get("status", {})
    recent = [(e["reason"], e.get("message")) for e in events_for(lab, name)][-8:]

    async def fresh_client() -> str:
        gateway = AdminGateway({"bootstrap.servers": lab.bootstrap})
        started = time.monotonic()
        try:
            view = await gateway.describe_group(name)
            return f"{view.state} in {time.monotonic() - started:.2f} s"
        except KafkaGatewayError as error:
            return str(error)
        finally:
            gateway.close()

    return (
        f"no completion after the broker came back: rollout {status.get('rollout')}, group "
        f"{status.get('group')}, conditions {status.get('conditions')}, events {recent}; "
        f"a new client describes the group: {asyncio.run(fresh_client())}"
    )


# -- the broker stopped mid-batch: last, it comes back empty ----------------------------------


def test_a_broker_stopped_mid_batch(lab: Lab, killed: dict[str, Any]) -> None:
    name = KILL_NAME
    assert lab.broker is not None
    before = eventually(lambda: completed(lab, name), 60, f"{name} at rest")
    seen = event_names(lab, name)
    lives = {pod: incarnations(lab, pod) for pod in killed["lives"]}
    patch_rollout(lab, name, maxBatchSize=1)
    bump_template(lab, name, "3")

    seen_phases: list[tuple[Any, Any]] = []

    def second_batch_joining() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        step = (rollout.get("batch"), rollout.get("phase"))
        if not seen_phases or seen_phases[-1] != step:
            seen_phases.append(step)
        fresh = rollout.get("rolloutId") != before["rolloutId"]
        # Mid-batch: its pods released, the group not settled with them yet. A batch whose pods
        # come back within their session may pass from joining to settling between two looks.
        joining = rollout.get("phase") in ("BatchJoining", "BatchSettling")
        return rollout if fresh and joining and rollout.get("batch") == 2 else None

    try:
        during = eventually(second_batch_joining, 120, "batch 2 joining", every=0.1)
    except AssertionError:
        raise AssertionError(f"phases seen: {seen_phases}; {stalled(lab, name)}") from None
    lab.broker.stop()

    def unreachable() -> dict[str, Any] | None:
        body = get_cg(lab, name)
        found = condition(body, "Degraded")
        return body if found.get("reason") == "KafkaUnreachable" else None

    body = eventually(unreachable, 90, "Degraded KafkaUnreachable")
    # Status tells both: the broker is away, and the rollout waits in its batch (not failed,
    # not moved on without the group).
    rollout = body["status"]["rollout"]
    assert rollout["rolloutId"] == during["rolloutId"] and rollout["batch"] == 2, rollout
    assert rollout["phase"] in ("BatchJoining", "BatchSettling"), rollout
    assert condition(body, "Progressing")["status"] == "True", condition(body, "Progressing")
    # Memory storage: the broker comes back empty, as after losing its disks.
    lab.broker.start()
    for topic in (KILL_NAME, FLOW):
        asyncio.run(ensure_topic(lab.bootstrap, topic, PARTITIONS))
    try:
        final = eventually(
            lambda: completed(lab, name, before["rolloutId"]), 150, "the rollout Completed"
        )
    except AssertionError:
        raise AssertionError(stalled(lab, name)) from None
    assert final["rolloutId"] == during["rolloutId"], (during, final)
    assert final["membersJoined"] == KILL_REPLICAS, final
    assert_truthful_end(lab, name, KILL_REPLICAS)
    assert batches_opened(lab, name, "rolling-update", seen) == [1, 2, 3]
    assert_rolled_once(lab, name, final, KILL_REPLICAS)
    replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in lives}
    assert replaced == {pod: 1 for pod in lives}, f"pods replaced: {replaced}"
    killed["watch"].assert_clean()
