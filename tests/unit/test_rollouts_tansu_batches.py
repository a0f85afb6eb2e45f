"""Batch sizes on Tansu: joins must fit a window later joins do not extend; static members one
at a time, and the plan says why."""

from __future__ import annotations

from tests.unit.rollout_world import World, setup_for

from rebalancer.planning.rollout_plans import (
    Change,
    batch_limit,
    expected_join_spread_s,
    fixed_window_limit,
    plan_notes,
)
from rebalancer.planning.rollout_policies import RolloutPolicy
from rebalancer.planning.rollout_states import Mechanism, RolloutKind
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.workloads import WorkloadView

COLD = Change(RolloutKind.COLD_START, Mechanism.GATE_QUEUE, static=False)
STATIC_UPDATE = Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static=True)
DYNAMIC_UPDATE = Change(RolloutKind.ROLLING_UPDATE, Mechanism.STATEFULSET_REPLACE, static=False)


def workload(replicas: int) -> WorkloadView:
    return World(replicas=replicas).workload(0.0)


def test_a_cold_start_batch_fits_tansus_fixed_window() -> None:
    tansu = setup_for(profile=BrokerProfile.TANSU, window_s=3.0)
    limit = batch_limit(tansu, workload(40), COLD, 40)
    assert limit == fixed_window_limit(tansu)
    assert 1 <= limit < 40
    assert expected_join_spread_s(limit) <= 3.0
    assert expected_join_spread_s(limit + 4) > 3.0 * 0.75


def test_twelve_pods_are_one_batch_with_a_three_second_window() -> None:
    tansu = setup_for(profile=BrokerProfile.TANSU, window_s=3.0)
    assert batch_limit(tansu, workload(12), COLD, 12) >= 12
    assert not any("batches are at most" in note for note in plan_notes(tansu, workload(12), COLD))


def test_the_plan_says_why_a_short_window_splits_a_cold_start() -> None:
    short = setup_for(profile=BrokerProfile.TANSU, window_s=1.0)
    notes = plan_notes(short, workload(12), COLD)
    assert any("later joins do not extend it" in note for note in notes)


def test_a_short_window_takes_smaller_batches() -> None:
    short = setup_for(profile=BrokerProfile.TANSU, window_s=1.0)
    assert batch_limit(short, workload(12), COLD, 12) < 12


def test_kafkas_sliding_window_does_not_cap_a_batch() -> None:
    kafka = setup_for(profile=BrokerProfile.APACHE_KAFKA, window_s=3.0)
    assert fixed_window_limit(kafka) is None
    assert batch_limit(kafka, workload(40), COLD, 40) == 40


def test_static_members_are_replaced_one_at_a_time_on_tansu_and_the_plan_says_why() -> None:
    tansu = setup_for(profile=BrokerProfile.TANSU, window_s=15.0)
    view = workload(12)
    assert batch_limit(tansu, view, STATIC_UPDATE, 12) == 1
    assert any("one at a time" in note for note in plan_notes(tansu, view, STATIC_UPDATE))
    kafka = setup_for(profile=BrokerProfile.APACHE_KAFKA)
    assert batch_limit(kafka, view, STATIC_UPDATE, 12) == 3
    assert batch_limit(kafka, view, DYNAMIC_UPDATE, 12) == 3


def test_dynamic_members_are_replaced_one_at_a_time_on_tansu_and_the_plan_says_why() -> None:
    tansu = setup_for(profile=BrokerProfile.TANSU, window_s=3.0)
    view = workload(12)
    assert batch_limit(tansu, view, DYNAMIC_UPDATE, 12) == 1
    assert any("one pod at a time" in note for note in plan_notes(tansu, view, DYNAMIC_UPDATE))
    # Nobody leaves in a cold start: its batch is what fits the window.
    assert batch_limit(tansu, view, COLD, 12) > 1
    # A Deployment's controller takes old pods away one by one itself.
    deployment = Change(RolloutKind.ROLLING_UPDATE, Mechanism.DEPLOYMENT_STEPS, static=False)
    assert batch_limit(tansu, view, deployment, 12) > 1
    chosen = setup_for(RolloutPolicy(max_batch_size=3), profile=BrokerProfile.TANSU)
    assert batch_limit(chosen, view, DYNAMIC_UPDATE, 12) == 3
    assert any("1 is safe" in note for note in plan_notes(chosen, view, DYNAMIC_UPDATE))


def test_a_users_batch_size_wins_with_a_warning_for_static_members() -> None:
    policy = RolloutPolicy(max_batch_size=3)
    tansu = setup_for(policy, profile=BrokerProfile.TANSU, window_s=15.0)
    view = workload(12)
    assert batch_limit(tansu, view, STATIC_UPDATE, 12) == 3
    assert any("stalled" in note for note in plan_notes(tansu, view, STATIC_UPDATE))
