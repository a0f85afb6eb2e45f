"""Autoscalers beside managed rollouts: the operator pauses KEDA for a rollout and resumes it
after, and gathers an HPA's quick steps into one join wave.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller, and its HPA
controller for the HPA case), the lab's kubelet (each pod a gate, then a consumer process), the
operator as its own process, and KEDA's own ScaledObject CRD (tests/data/keda/). No KEDA
controller runs: a stand-in (tests/autoscaler_support.py) scales the workload through the scale
subresource as KEDA does, unless the ScaledObject is paused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests.autoscaler_support import (
    KEDA_CRD,
    KedaStandIn,
    annotations_of,
    paused,
    scaled_object,
)
from tests.operator.e2e.support import apply, condition, events_for, eventually, get_cg, kubectl
from tests.operator.reliability.rollout_fleets import (
    BATCH_OUT,
    PARTITIONS,
    assert_truthful_end,
    at_phase,
    bump_template,
    completed,
    fleet,
    managed,
    pods_lab,
    pods_of,
    rollout_of,
    settled,
    workload_body,
    workload_of,
)

from rebalancer.structs.autoscalers import PAUSED_FOR_ROLLOUT_ANNOTATION
from rebalancer.structs.gates import GATE_BATCH_ANNOTATION, GateState
from rebalancer_lab.crd_install import install_crds
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NS = "default"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


def api(lab: Lab) -> client.ApiClient:
    assert lab.api_client is not None
    return lab.api_client


def test_keda_is_paused_during_a_rollout_and_resumed_after(lab: Lab) -> None:
    name = "keda"
    target = f"{name}-consumer"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    # maxBatchSize 2 above the single replica KEDA may activate the fleet at: capped, not
    # refused (it used to fail the rollout as PolicyCannotBeMet).
    apply(lab, managed(lab, name, maxBatchSize=2), fleet(lab, name, 3))
    cold = eventually(lambda: completed(lab, name), 150, "the cold start Completed")
    # No KEDA installed (no ScaledObject resource at all): a normal state, nothing said.
    assert "autoscaler" not in cold, cold
    assert condition(get_cg(lab, name), "Degraded").get("status") != "True"

    install_crds(api(lab), [KEDA_CRD])
    apply(lab, scaled_object(f"{name}-so", target, lab.bootstrap, name))
    eventually(
        lambda: "KEDA ScaledObject keda-so" in str(rollout_of(lab, name).get("autoscaler")),
        60,
        "status.rollout.autoscaler naming the ScaledObject",
    )
    with KedaStandIn(api(lab), NS, f"{name}-so", target, demand=3) as keda:
        bump_template(lab, name, "2")
        joining = at_phase(lab, name, BATCH_OUT, cold["rolloutId"])
        # Paused before the first batch was released, with the operator's mark.
        marks = annotations_of(api(lab), NS, f"{name}-so")
        assert paused(marks), marks
        assert marks[PAUSED_FOR_ROLLOUT_ANNOTATION] == joining["rolloutId"], (marks, joining)
        # The lag grows: KEDA would scale now, but is paused.
        keda.demand = 4
        update_id = joining["rolloutId"]

        def over() -> dict[str, Any] | None:
            # Completed, or already followed by the scale-up: KEDA, resumed in the step that
            # completes the rollout, may scale before a look here sees Completed, and the
            # workload watch starts the next rollout at once.
            rollout = rollout_of(lab, name)
            if rollout.get("rolloutId") == update_id:
                return rollout if rollout.get("phase") == "Completed" else None
            return rollout if rollout.get("rolloutId") not in (cold["rolloutId"], None) else None

        eventually(over, 180, "the rolling update Completed", every=0.2)
        done_at = time.time()
        # Completed as a rolling update, and KEDA did not scale under it: nothing superseded it
        # (the completion's Event names any interference in brackets).
        events = events_for(lab, name)
        done = [str(e["message"]) for e in events if e["reason"] == "RolloutCompleted"]
        assert any(m.startswith("rolling-update rollout completed") for m in done), done
        assert not any("(" in m for m in done), done
        assert "RolloutSuperseded" not in [e["reason"] for e in events], events
        # Resumed: KEDA scales to 4; the scale-up is a rollout of its own, paused again.
        eventually(
            lambda: workload_body(lab, name)["spec"]["replicas"] == 4, 60, "KEDA scaled to 4"
        )
        # Read once the scale is seen: the stand-in looks on its own schedule, and may scale
        # only after the test has seen the rollout Completed.
        scaled = keda.scaled_at()
        print("stand-in scaled at", scaled, "rollout completed seen at", done_at)
        assert scaled, keda.log
        grown = eventually(lambda: completed(lab, name, update_id), 150, "the scale-up Completed")
        assert grown["kind"] == "scale-up", grown
        eventually(
            lambda: not paused(annotations_of(api(lab), NS, f"{name}-so")),
            30,
            "the ScaledObject resumed after the scale-up",
        )
    final = annotations_of(api(lab), NS, f"{name}-so")
    assert PAUSED_FOR_ROLLOUT_ANNOTATION not in final, final
    # While the rollout held the pause, the stand-in never scaled: its first scale came once
    # the ScaledObject was resumed, which the operator does in the step that completes it.
    held = [entry for entry in keda.log if entry[1]]
    assert held and all(did == "paused" for _, _, _, did in held), held
    reasons = [e["reason"] for e in events_for(lab, name)]
    assert reasons.count("AutoscalerPaused") == 2, reasons
    assert reasons.count("AutoscalerResumed") == 2, reasons
    assert_truthful_end(lab, name, 4)


def hpa(name: str, target: str, minimum: int, maximum: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": target},
            "minReplicas": minimum,
            "maxReplicas": maximum,
        },
    }


def test_an_hpas_quick_steps_join_as_one_wave(lab: Lab) -> None:
    """Kubernetes' own HPA controller scales the StatefulSet 2 -> 4 -> 6 (each step its
    minReplicas raised: the lab has no metrics, and the controller brings replicas up to
    minReplicas without them). The operator releases the four new pods as one batch."""
    name = "hpa"
    target = f"{name}-consumer"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    # A window with room for the operator's resting poll (10 s) before it plans the first
    # step, the pods' way to their gates and the wait below, on a busy machine.
    window = 30
    group = managed(lab, name, autoscalerWindowSeconds=window)
    del group["spec"]["policy"]["rollout"]["maxBatchSize"]  # a scale-up in one batch
    apply(lab, group, fleet(lab, name, 2))
    cold = eventually(lambda: completed(lab, name), 150, "the cold start Completed")
    apply(lab, hpa(name, target, 2, 6))
    eventually(
        lambda: "HorizontalPodAutoscaler hpa" in str(rollout_of(lab, name).get("autoscaler")),
        60,
        "status.rollout.autoscaler naming the HPA",
    )

    def raise_minimum(replicas: int) -> None:
        patch = json.dumps({"spec": {"minReplicas": replicas}})
        kubectl(lab, "patch", "hpa", name, "--type=merge", "-p", patch)
        eventually(
            lambda: workload_body(lab, name)["spec"]["replicas"] == replicas,
            40,
            f"the HPA scaling to {replicas}",
            every=0.2,
        )

    raise_minimum(4)
    first_step = time.time()

    def waiting() -> list[str]:
        view = workload_of(lab, name)
        return [pod.name for pod in view.live_pods if pod.gate is GateState.WAITING]

    def arrived() -> int:
        view = workload_of(lab, name)
        return sum(1 for pod in view.live_pods if pod.gate is not GateState.PENDING)

    def gathering() -> dict[str, Any] | None:
        rollout = rollout_of(lab, name)
        fresh = rollout.get("rolloutId") != cold["rolloutId"]
        planned = rollout.get("batchSizes") == [2]
        return rollout if fresh and planned and arrived() == 4 else None

    # The operator planned the first step's scale-up and its pods all wait at their gates:
    # without the window it would release them now (a batch opens once its pods have
    # gathered, looked at every half second), a rebalance of their own.
    first = eventually(gathering, 60, "the first step's batch planned, its pods arrived")
    time.sleep(3)
    held = rollout_of(lab, name)
    assert (held.get("rolloutId"), held.get("phase")) == (first["rolloutId"], "BatchOpening"), held
    assert len(waiting()) == 2, "the first step's pods were released on their own"
    raise_minimum(6)
    second_step = time.time()
    print(f"HPA steps seen {second_step - first_step:.1f} s apart")
    final = eventually(lambda: completed(lab, name, cold["rolloutId"]), 150, "the scale-up")
    assert final["kind"] == "scale-up", final
    assert final["batchSizes"] == [4], final
    labels = {
        pod["metadata"]["name"]: (pod["metadata"].get("annotations") or {}).get(
            GATE_BATCH_ANNOTATION
        )
        for pod in pods_of(lab, name)
    }
    wave = {labels[f"{target}-{ordinal}"] for ordinal in range(2, 6)}
    assert wave == {f"{final['rolloutId']}/1"}, labels
    assert "HorizontalPodAutoscaler hpa" in final["autoscaler"], final
    settled(lab, name, 6)
    assert_truthful_end(lab, name, 6)
