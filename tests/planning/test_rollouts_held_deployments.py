"""A Deployment paused in its template write (settings, sidecar) is the planner's to step: it
takes the pause over, steps the new template batch by batch, and never leaves it paused."""

from __future__ import annotations

from dataclasses import replace

from tests.planning.rollout_world import T0, World, setup_for, with_pods

from rebalancer.planning.rollout_actions import PauseDeployment, ResumeDeployment, Wait
from rebalancer.planning.rollout_holds import hold_ops
from rebalancer.planning.rollout_states import Mechanism, RolloutPhase, RolloutState
from rebalancer.planning.rollouts import (
    CATCH_UP_RECHECK_SECONDS,
    GATHER_RECHECK_SECONDS,
    Observation,
    step,
)
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION, WorkloadView

SETUP = setup_for(RolloutPolicy(settle_seconds=1))


def deployment() -> World:
    world = World(kind=WorkloadKind.DEPLOYMENT, replicas=4, gate_installed=False, partition=None)
    return with_pods(world, T0)


def held(world: World, now: float, **changes: object) -> WorkloadView:
    """The Deployment as the API shows it right after a held template write: paused, marked,
    no ReplicaSet with the new template, so every pod still counts as updated."""
    view = replace(world.workload(now), paused=True, held_for_rollout=True, template_pending=True)
    return replace(view, updated_replicas=0, **changes)  # type: ignore[arg-type]


def look(view: WorkloadView, world: World, now: float, state: RolloutState) -> tuple:  # type: ignore[type-arg]
    return step(state, Observation(SETUP, view, world.group(now)), now)


def test_a_held_template_is_taken_over_planned_and_stepped_as_one_rollout() -> None:
    world = deployment()
    state, actions = look(held(world, T0), world, T0, RolloutState())
    assert state.phase is RolloutPhase.BATCH_OPENING
    assert state.mechanism is Mechanism.DEPLOYMENT_STEPS
    assert state.sizes == (1, 1, 1, 1)
    # Resumed for the first batch only: the planner pauses it again once that batch is in.
    assert ResumeDeployment() in actions
    planned = state.rollout_id
    # Resumed, the controller creates the new ReplicaSet: a new revision, one pod of it.
    world.revision = "r2"
    view = replace(world.workload(T0 + 2), updated_replicas=1)
    state, actions = look(view, world, T0 + 2, state)
    assert state.rollout_id == planned  # the same rollout, not planned again
    assert (state.phase, state.batch) == (RolloutPhase.BATCH_JOINING, 1)
    assert PauseDeployment() in actions and state.holding_deployment


def test_a_deployment_resumed_for_a_batch_is_looked_at_again_soon_to_be_paused_in_time() -> None:
    world = deployment()
    state, actions = look(held(world, T0), world, T0, RolloutState())
    assert ResumeDeployment() in actions and not state.holding_deployment
    assert Wait(T0 + GATHER_RECHECK_SECONDS) in actions
    # Paused again with the batch in: back to the usual pace.
    world.revision = "r2"
    view = replace(world.workload(T0 + 1), updated_replicas=1)
    state, actions = look(view, world, T0 + 1, state)
    assert state.holding_deployment
    assert Wait(T0 + 1 + GATHER_RECHECK_SECONDS) not in actions


def test_a_deployment_the_user_paused_is_left_paused() -> None:
    world = deployment()
    view = held(world, T0, held_for_rollout=False)
    state, actions = look(view, world, T0, RolloutState())
    assert state.phase is RolloutPhase.IDLE
    assert ResumeDeployment() not in actions


def test_a_held_deployment_with_nothing_to_roll_is_handed_back() -> None:
    world = deployment()
    view = held(world, T0, template_pending=False)
    state, actions = look(view, world, T0, RolloutState())
    assert state.phase is RolloutPhase.IDLE
    assert ResumeDeployment() in actions and not state.holding_deployment


def test_a_held_template_with_the_gate_is_resumed_for_the_gates_to_hold() -> None:
    world = deployment()
    view = held(world, T0, gate_installed=True)
    state, actions = look(view, world, T0, RolloutState())
    assert ResumeDeployment() in actions and not state.holding_deployment


def test_not_before_the_controller_has_seen_the_write() -> None:
    world = deployment()
    view = held(world, T0, generation=2, observed_generation=1)
    state, actions = look(view, world, T0, RolloutState())
    # Nothing done until it has; only a look again soon.
    assert state.phase is RolloutPhase.IDLE
    assert actions == (Wait(T0 + CATCH_UP_RECHECK_SECONDS),), actions


def test_turning_rollouts_off_resumes_a_held_deployment() -> None:
    world = deployment()
    off = setup_for(RolloutPolicy(enabled=False))
    _, actions = step(RolloutState(), Observation(off, held(world, T0), None), T0)
    assert ResumeDeployment() in actions


def test_the_template_write_pauses_and_marks_an_ungated_deployment() -> None:
    body = {"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": []}}}}
    assert hold_ops(body) == [
        {"op": "add", "path": "/spec/paused", "value": True},
        {"op": "add", "path": "/metadata/annotations", "value": {ROLLOUT_HOLD_ANNOTATION: "true"}},
    ]
    marked = {**body, "metadata": {"annotations": {"a": "b"}}}
    assert hold_ops(marked)[1] == {
        "op": "add",
        "path": "/metadata/annotations/rebalancer.dev~1held-for-rollout",
        "value": "true",
    }
    # Already held by the operator: nothing more to write.
    ours = {
        "metadata": {"annotations": {ROLLOUT_HOLD_ANNOTATION: "true"}},
        "spec": {"paused": True, "template": {}},
    }
    assert hold_ops(ours) == []


def test_the_template_write_leaves_a_users_pause_and_gated_pods_alone() -> None:
    users = {"spec": {"paused": True, "template": {"spec": {"containers": []}}}}
    assert hold_ops(users) == []
    gated = {"spec": {"template": {"spec": {"initContainers": [{"name": "rebalancer-gate"}]}}}}
    assert hold_ops(gated) == []
