"""Faults during managed rollouts, in the lab: the operator killed at each rollout state, a
consumer pod hard-killed during a batch, the enforcement sidecar unreachable, the broker
stopped mid-batch; and no message lost through a managed rolling update and scale-up.

Real parts: Tansu, the API emulator, the lab's StatefulSet controller and kubelet (each pod a
`rebalancer gate` init container, then a consumer process), the operator as its own process.
For each fault the rollout must finish without repeating or skipping a batch, the workload
must never stay held without a condition saying why and how to resume, and status must say
what happened. The tests share one lab and run in the file's order; the broker goes last (it
comes back empty).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.support import (
    apply,
    condition,
    eventually,
    free_port,
    get_cg,
)
from tests.reliability.rollout_fleets import (
    SESSION_MS,
    HoldWatch,
    assert_rolled_once,
    batches_opened,
    bump_template,
    completed,
    event_names,
    fleet,
    group_of,
    incarnations,
    managed,
    patch_rollout,
    restart_operator,
    rollout_of,
)

from rebalancer.lab.producer import ensure_topic
from rebalancer.lab.running import Lab, LabConfig
from rebalancer.planning.rollout_states import parse_time

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
PARTITIONS = 4
VERSIONS = itertools.count(2)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("lab"),
        broker_port=free_port(),
        api_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
        session_timeout_ms=SESSION_MS,
    )
    running = Lab(config)
    try:
        # Pods wait up to a second before their first container starts: not all at once.
        running.start(fleet=False, pods=True, jitter="uniform(0,1)")
        yield running
    finally:
        running.stop()


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


def settled(lab: Lab, name: str, members: int) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        group = group_of(lab, name)
        whole = group.get("assignedPartitions") == PARTITIONS and group.get("state") == "Stable"
        return group if whole and group.get("members") == members else None

    return eventually(probe, 90, f"{name}: {members} members, every partition assigned")


def at_phase(lab: Lab, name: str, phase: str, before: str | None) -> dict[str, Any]:
    """status.rollout as soon as a rollout other than `before` shows `phase`."""

    def probe() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        fresh = rollout.get("rolloutId") != before
        return rollout if fresh and rollout.get("phase") == phase else None

    return eventually(probe, 90, f"{name}: rollout at {phase}", every=0.1)


def observed_since(lab: Lab, name: str, moment: float) -> bool:
    """Whether the operator has written status.group since `moment` (epoch seconds)."""
    stamp = group_of(lab, name).get("observedAt")
    if not isinstance(stamp, str):
        return False
    return parse_time(stamp) > moment


def assert_truthful_end(lab: Lab, name: str, replicas: int) -> dict[str, Any]:
    """At rest after a rollout: nothing claims progress or trouble, the figures add up."""
    group = settled(lab, name, replicas)
    body = get_cg(lab, name)
    assert condition(body, "Progressing").get("status") != "True", condition(body, "Progressing")
    assert condition(body, "Degraded").get("status") != "True", condition(body, "Degraded")
    rollout = body["status"]["rollout"]
    assert rollout["batch"] == rollout["batches"], rollout
    return group


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
        # Batches larger than the fleet: the rollout fails at once, before touching a pod.
        patch_rollout(lab, name, maxBatchSize=KILL_REPLICAS + 3)
        bump_template(lab, name, "2")
        at_kill = kill_at(lab, killed, phase)
        body = get_cg(lab, name)
        assert body["status"]["rollout"]["phase"] == "Failed", body["status"]["rollout"]
        found = condition(body, "Degraded")
        assert found["status"] == "True" and "maxBatchSize" in found["message"], found
        assert "rebalancer.dev/resume-rollout" in found["message"], found
        lives = {pod: incarnations(lab, pod) for pod in killed["lives"]}
        assert lives == killed["lives"], "pods were replaced for a rollout that cannot be met"
        patch_rollout(lab, name, maxBatchSize=1)
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
