"""The join gate never strands pods: with the operator down, a rollout still starts its pods.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a `rebalancer gate` init container, then a consumer process), the operator as
its own process. The ConsumerGroup exists and rollouts are managed; the operator is stopped (as a
crash of its one replica would), then a StatefulSet of gated consumers is created. Its gates use
the default bypass (nothing sets one): they hold their pods for two minutes, then let them go;
the group forms on its own. The operator, started again, finds the group Stable, tells each
bypass once (a GateBypassed Warning Event, rebalancer_gate_bypasses_total) and not again after
another restart.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    events_for,
    eventually,
    get_cg,
    restart_operator,
)
from tests.operator.reliability.rollout_fleets import (
    PARTITIONS,
    fleet,
    managed,
    pods_lab,
    pods_of,
    rollout_of,
    settled,
)

from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS, GATE_CONTAINER
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NAME = "bypass"
REPLICAS = 3


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


def stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def gate_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = pod.get("status", {}).get("initContainerStatuses") or []
    return next((s for s in statuses if s["name"] == GATE_CONTAINER), {})


def consumer_started(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return any("running" in (s.get("state") or {}) for s in statuses)


def bypasses_metric(lab: Lab) -> float | None:
    """rebalancer_gate_bypasses_total of the group; None while the operator does not answer."""
    url = f"http://{lab.config.host}:{lab.config.reports_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    # Labels come sorted: consumergroup, group_id, namespace.
    prefix = f'rebalancer_gate_bypasses_total{{consumergroup="{NAME}",group_id='
    values = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(prefix) and 'namespace="default"}' in line
    ]
    return sum(values)


def bypass_events(lab: Lab) -> list[dict[str, Any]]:
    return [e for e in events_for(lab, NAME) if e.get("reason") == "GateBypassed"]


def test_pods_start_after_the_bypass_while_the_operator_is_down(lab: Lab) -> None:
    assert lab.operator is not None
    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    # Managed rollouts, whole cold start in one batch; no bypassGateAfterSeconds anywhere.
    apply(lab, managed(lab, NAME, maxBatchSize=REPLICAS))
    eventually(lambda: get_cg(lab, NAME).get("status"), 60, "the operator to see the group")
    lab.operator.stop(grace=15)

    body = fleet(lab, NAME, REPLICAS)
    gate_args = body["spec"]["template"]["spec"]["initContainers"][0]["args"]
    assert gate_args[gate_args.index("--bypass-after") + 1] == str(DEFAULT_BYPASS_SECONDS)
    apply(lab, body)

    def all_waiting() -> list[dict[str, Any]] | None:
        pods = pods_of(lab, NAME)
        waiting = [p for p in pods if "running" in (gate_status(p).get("state") or {})]
        return pods if len(waiting) == REPLICAS else None

    eventually(all_waiting, 90, "every pod holding at its gate")
    # Held, not let go early: well into the wait nobody has started its consumer.
    asyncio.run(asyncio.sleep(DEFAULT_BYPASS_SECONDS / 2))
    held = pods_of(lab, NAME)
    assert not [p["metadata"]["name"] for p in held if consumer_started(p)]
    assert all("running" in (gate_status(p).get("state") or {}) for p in held)

    def all_started() -> list[dict[str, Any]] | None:
        pods = pods_of(lab, NAME)
        started = [p for p in pods if consumer_started(p)]
        return pods if len(started) == REPLICAS else None

    pods = eventually(all_started, DEFAULT_BYPASS_SECONDS + 90, "every consumer after the bypass")
    waits = {}
    for pod in pods:
        terminated = gate_status(pod)["state"]["terminated"]
        assert terminated["exitCode"] == 0
        waits[pod["metadata"]["name"]] = stamp(terminated["finishedAt"]) - stamp(
            terminated["startedAt"]
        )
        # Nobody opened it: the operator was down all along.
        assert pod["metadata"].get("annotations", {}).get("rebalancer.dev/gate") != "open"
    # The API server keeps whole seconds: each gate let go 120 s after it started, give or take
    # the rounding and a busy machine.
    print(f"\ngate waits before the bypass (s): {json.dumps(waits)}")
    assert all(
        DEFAULT_BYPASS_SECONDS - 1 <= wait <= DEFAULT_BYPASS_SECONDS + 10 for wait in waits.values()
    ), waits

    lab.start_operator()
    group = settled(lab, NAME, REPLICAS)
    assert group["state"] == "Stable"
    ready = eventually(
        lambda: condition(get_cg(lab, NAME), "Ready").get("status") == "True" and get_cg(lab, NAME),
        90,
        "the group Ready",
    )
    assert condition(ready, "Degraded").get("status") != "True", condition(ready, "Degraded")
    assert rollout_of(lab, NAME).get("phase") != "Failed", rollout_of(lab, NAME)

    [event] = eventually(lambda: bypass_events(lab), 60, "a GateBypassed Event")
    assert event["type"] == "Warning"
    message = event["message"]
    assert f"{REPLICAS} pods started without their batch" in message
    for k in range(REPLICAS):
        assert f"{NAME}-consumer-{k}" in message
    assert "spec.policy.rollout.bypassGateAfterSeconds" in message
    assert eventually(lambda: bypasses_metric(lab) == REPLICAS, 30, "the bypass counter")
    for pod in pods_of(lab, NAME):
        assert "rebalancer.dev/gate-bypassed" in pod["metadata"]["annotations"]

    # Told once: a restarted operator finds the pods marked and says nothing more.
    restart_operator(lab)
    eventually(lambda: bypasses_metric(lab) == 0, 60, "the restarted operator serving metrics")
    asyncio.run(asyncio.sleep(10))
    assert len(bypass_events(lab)) == 1
    assert bypasses_metric(lab) == 0
