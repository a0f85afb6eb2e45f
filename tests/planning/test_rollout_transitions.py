"""The rollout planner's transition table: a rule for every phase, each a plain function of
the state, the observation and the time."""

from __future__ import annotations

from tests.planning.rollout_world import T0, World, setup_for, with_pods

from rebalancer.planning.rollout_phases.transitions import PHASE_RULES, advance
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState, allowed
from rebalancer.planning.rollouts import step
from rebalancer.structs.rollout_policy import RolloutPolicy


def test_every_phase_has_a_rule() -> None:
    assert set(PHASE_RULES) == set(RolloutPhase)


def test_a_rule_keeps_nothing_between_calls() -> None:
    """The same state, observation and time give the same transition, however often and in
    whatever order they are asked: no rule keeps a state of its own."""
    world = with_pods(World(replicas=4, partition=4), T0)
    world.revision = "r2"
    setup = setup_for(RolloutPolicy(max_batch_size=2, settle_seconds=2))
    state = RolloutState()
    for index in range(200):
        now = T0 + index
        world.tick(now)
        observation = world.observe(setup, now)
        first = advance(state, observation, now)
        again = advance(state, observation, now)
        assert first == again
        after, _ = first
        assert allowed(state.phase, after.phase), f"{state.phase} -> {after.phase}"
        state, actions = step(state, observation, now)
        world.apply(actions, now)
    assert state.phase is RolloutPhase.COMPLETED
