"""Autoscalers of a managed workload: which ones target it, and what rollouts do about them.

Plain tables and the rollout world (tests/planning/rollout_world.py): KEDA paused while a rollout is
active and resumed in every way one ends, an owner's pause left alone, an HPA's quick steps
gathered into one join wave, no scale steps under an HPA.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.planning.rollout_world import T0, World, roundtrip, setup_for, with_pods

from rebalancer.planning.autoscalers import (
    autoscaler_actions,
    describe_autoscalers,
    hpa_quiet_at,
    view_autoscalers,
)
from rebalancer.planning.rollout_actions import (
    Action,
    OpenGate,
    PauseScaledObject,
    ResumeScaledObject,
)
from rebalancer.planning.rollout_plans import classify
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.planning.rollouts import Observation, step
from rebalancer.structs.autoscalers import (
    KEDA_PAUSED_ANNOTATION,
    KEDA_PAUSED_REPLICAS_ANNOTATION,
    PAUSED_FOR_ROLLOUT_ANNOTATION,
    Autoscalers,
    HpaView,
    ScaledObjectView,
)
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import WorkloadKind

STS = WorkloadKind.STATEFULSET


def scaled_object(
    name: str = "orders-so",
    target: str = "orders",
    kind: str | None = "StatefulSet",
    annotations: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": target}
    if kind is not None:
        ref["kind"] = kind
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "7",
            "creationTimestamp": created,
            "annotations": annotations or {},
        },
        "spec": {"scaleTargetRef": ref},
    }


def hpa(
    name: str = "orders-hpa",
    target: str = "orders",
    kind: str = "StatefulSet",
    last_scale: str | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target}},
        "status": {"lastScaleTime": last_scale} if last_scale else {},
    }
    if owner is not None:
        body["metadata"]["ownerReferences"] = [{"kind": "ScaledObject", "name": owner}]
    return body


@pytest.mark.parametrize(
    ("objects", "kind", "expected"),
    [
        ([], STS, None),
        ([scaled_object()], STS, ScaledObjectView("orders-so", "7", None, False)),
        # KEDA's scaleTargetRef.kind defaults to Deployment.
        ([scaled_object(kind=None)], STS, None),
        (
            [scaled_object(kind=None)],
            WorkloadKind.DEPLOYMENT,
            ScaledObjectView("orders-so", "7", None, False),
        ),
        ([scaled_object(target="payments")], STS, None),
        (
            [scaled_object(annotations={KEDA_PAUSED_ANNOTATION: "true"})],
            STS,
            ScaledObjectView("orders-so", "7", None, True),
        ),
        (
            [scaled_object(annotations={KEDA_PAUSED_REPLICAS_ANNOTATION: "0"})],
            STS,
            ScaledObjectView("orders-so", "7", None, True),
        ),
        # KEDA reads "false" as no pause.
        (
            [scaled_object(annotations={KEDA_PAUSED_ANNOTATION: "false"})],
            STS,
            ScaledObjectView("orders-so", "7", None, False),
        ),
        (
            [
                scaled_object(
                    annotations={
                        KEDA_PAUSED_ANNOTATION: "true",
                        PAUSED_FOR_ROLLOUT_ANNOTATION: "ab12",
                    }
                )
            ],
            STS,
            ScaledObjectView("orders-so", "7", "ab12", False),
        ),
        # Two on one workload (KEDA refuses the second): the oldest.
        (
            [
                scaled_object("late", created="2026-02-01T00:00:00Z"),
                scaled_object("early", created="2026-01-01T00:00:00Z"),
            ],
            STS,
            ScaledObjectView("early", "7", None, False),
        ),
    ],
)  # fmt: skip
def test_the_scaled_object_that_targets_the_workload(
    objects: list[dict[str, Any]], kind: WorkloadKind, expected: ScaledObjectView | None
) -> None:
    assert view_autoscalers(objects, [], kind, "orders").scaled_object == expected


def test_the_hpa_that_targets_the_workload() -> None:
    found = view_autoscalers(
        [],
        [hpa("other", target="payments"), hpa(last_scale="2023-11-14T22:13:20Z", owner="so")],
        STS,
        "orders",
    )
    assert found.hpa == HpaView("orders-hpa", "ScaledObject/so", 1_700_000_000.0)
    assert view_autoscalers([], [hpa(kind="Deployment")], STS, "orders").hpa is None


SO = ScaledObjectView("orders-so", "7", None, False)
OURS = replace(SO, paused_for="ab12")
OWNERS = replace(SO, paused_by_owner=True)


@pytest.mark.parametrize(
    ("active", "scaled", "expected"),
    [
        (True, SO, [PauseScaledObject("orders-so", "cd34", "7")]),
        (True, OURS, []),
        (False, OURS, [ResumeScaledObject("orders-so", "ab12", "7")]),
        (False, SO, []),
        # The owner's pause: never taken over, never removed.
        (True, OWNERS, []),
        (False, OWNERS, []),
        (True, None, []),
    ],
)
def test_keda_is_paused_while_a_rollout_is_active(
    active: bool, scaled: ScaledObjectView | None, expected: list[Action]
) -> None:
    assert autoscaler_actions(active, "cd34", Autoscalers(scaled_object=scaled)) == expected


def keda(paused_for: str | None) -> Autoscalers:
    return Autoscalers(scaled_object=replace(SO, paused_for=paused_for))


def test_a_rolling_update_pauses_keda_first_and_resumes_it_when_it_completes() -> None:
    world = with_pods(World(replicas=3, partition=3), T0)
    setup = setup_for(RolloutPolicy(max_batch_size=3, settle_seconds=1))
    state, _ = step(RolloutState(), world.observe(setup, T0, autoscalers=keda(None)), T0)
    world.revision = "r2"
    state, actions = step(state, world.observe(setup, T0 + 1, autoscalers=keda(None)), T0 + 1)
    assert state.phase.active
    # Before anything that moves the workload.
    assert isinstance(actions[0], PauseScaledObject), actions
    assert actions[0].rollout_id == state.rollout_id
    assert "paused by the operator during each rollout" in str(state.autoscaler)
    paused = keda(state.rollout_id)
    now = T0 + 1
    while state.phase.active and now < T0 + 200:
        now += 1
        world.tick(now)
        world.apply(actions, now)
        state, actions = step(state, world.observe(setup, now, autoscalers=paused), now)
        assert not any(isinstance(a, PauseScaledObject | ResumeScaledObject) for a in actions) or (
            not state.phase.active
        )
    assert state.phase is RolloutPhase.COMPLETED
    assert ResumeScaledObject("orders-so", str(state.rollout_id), "7") in actions
    assert roundtrip(state).autoscaler == state.autoscaler


@pytest.mark.parametrize(
    ("how", "phase"),
    [
        ("failed", RolloutPhase.FAILED),
        ("paused", RolloutPhase.PAUSED),
        ("disabled", RolloutPhase.IDLE),
    ],
)
def test_keda_is_resumed_however_a_rollout_ends(how: str, phase: RolloutPhase) -> None:
    world = with_pods(World(replicas=3, partition=3), T0)
    world.revision = "r2"
    active = RolloutState(phase=RolloutPhase.BATCH_JOINING, batch=1, sizes=(3,), rollout_id="ab12")
    policy = RolloutPolicy(
        paused=how == "paused", enabled=how != "disabled", batch_deadline_seconds=30
    )
    observation = world.observe(setup_for(policy), T0, autoscalers=keda("ab12"))
    if how == "failed":
        # The workload was deleted mid-rollout: the rollout fails.
        observation = Observation(setup_for(policy), None, None, autoscalers=keda("ab12"))
    state, actions = step(active, observation, T0)
    assert state.phase is phase
    assert ResumeScaledObject("orders-so", "ab12", "7") in actions


def test_a_workload_without_autoscalers_says_nothing() -> None:
    world = with_pods(World(replicas=3, partition=3), T0)
    state, actions = step(RolloutState(), world.observe(setup_for(), T0), T0)
    assert state.autoscaler is None
    assert not any(isinstance(a, PauseScaledObject | ResumeScaledObject) for a in actions)


def stepping_hpa(last_scale: float) -> Autoscalers:
    return Autoscalers(hpa=HpaView("orders-hpa", None, last_scale))


def run_scale_up(window: int) -> list[tuple[float, tuple[str, ...]]]:
    """An HPA scales 2 -> 4 at T0 and 4 -> 6 fifteen seconds later (its next sync); the gate
    batches what it can. Returns each opening: (when, pods)."""
    world = with_pods(World(replicas=2, partition=2), T0 - 200)
    setup = setup_for(RolloutPolicy(autoscaler_window_seconds=window, settle_seconds=1))
    state = RolloutState()
    last_scale = T0 - 1000.0
    openings: list[tuple[float, tuple[str, ...]]] = []
    now = T0 - 5
    while now < T0 + 120:
        if now == T0:
            world.scale_to(4, now)
            last_scale = now
        if now == T0 + 15:
            world.scale_to(6, now)
            last_scale = now
        world.tick(now)
        observation = world.observe(setup, now, autoscalers=stepping_hpa(last_scale))
        state, actions = step(state, observation, now)
        world.apply(actions, now)
        openings += [(now, a.pods) for a in actions if isinstance(a, OpenGate)]
        now += 1
    assert world.group(now).members == 6
    return openings


def test_an_hpas_quick_steps_join_as_one_wave() -> None:
    openings = run_scale_up(20)
    assert len(openings) == 1, openings
    when, pods = openings[0]
    assert sorted(pods) == ["orders-2", "orders-3", "orders-4", "orders-5"]
    assert when >= T0 + 15 + 20  # the HPA left the replicas alone for the window


def test_without_the_window_each_step_is_a_wave_of_its_own() -> None:
    openings = run_scale_up(0)
    assert [sorted(pods) for _, pods in openings] == [
        ["orders-2", "orders-3"],
        ["orders-4", "orders-5"],
    ]


def test_an_hpa_that_keeps_stepping_is_not_waited_for_past_gather_seconds() -> None:
    world = with_pods(World(replicas=2, partition=2), T0 - 200)
    setup = setup_for(RolloutPolicy(gather_seconds=10, autoscaler_window_seconds=60))
    world.scale_to(3, T0)
    state = RolloutState()
    opened_at = None
    for now in range(int(T0), int(T0) + 30):
        world.tick(now)
        # Scaled a second ago, every second: never quiet.
        observed = world.observe(setup, now, autoscalers=stepping_hpa(now - 1))
        state, actions = step(state, observed, now)
        world.apply(actions, now)
        if opened_at is None and any(isinstance(a, OpenGate) for a in actions):
            opened_at = now
    assert opened_at is not None and T0 + 10 <= opened_at <= T0 + 12, opened_at


def test_no_scale_steps_under_an_hpa() -> None:
    world = with_pods(World(replicas=2, partition=2, gate_installed=False), T0 - 200)
    setup = setup_for(RolloutPolicy(scale_steps=True, gate_joins=False))
    world.scale_to(4, T0)
    workload = world.workload(T0)
    assert classify(setup, workload, world.group(T0), 2) is not None
    assert classify(setup, workload, world.group(T0), 2, autoscaled=True) is None
    observation = Observation(setup, workload, world.group(T0), autoscalers=stepping_hpa(T0))
    state, _ = step(RolloutState(phase=RolloutPhase.IDLE, steady_replicas=2), observation, T0)
    assert state.phase is RolloutPhase.IDLE
    assert "scaleSteps is not used" in str(state.autoscaler)


def test_keda_s_own_hpa_is_not_waited_for_once_keda_is_paused() -> None:
    own = HpaView("keda-hpa-orders-so", "ScaledObject/orders-so", T0)
    assert hpa_quiet_at(Autoscalers(scaled_object=SO, hpa=own), 20) == T0 + 20
    assert hpa_quiet_at(Autoscalers(scaled_object=OURS, hpa=own), 20) is None
    # A user's HPA beside a paused ScaledObject still steps.
    theirs = HpaView("orders-hpa", None, T0)
    assert hpa_quiet_at(Autoscalers(scaled_object=OURS, hpa=theirs), 20) == T0 + 20


def test_keda_s_own_hpa_is_told_as_keda() -> None:
    found = Autoscalers(
        scaled_object=SO, hpa=HpaView("keda-hpa-orders-so", "ScaledObject/orders-so", None)
    )
    text = describe_autoscalers(found, 20)
    assert text is not None and text.startswith("KEDA ScaledObject orders-so")
    assert "HorizontalPodAutoscaler" not in text
