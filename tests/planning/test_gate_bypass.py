"""The gate never strands pods: a bounded bypass by default, and every bypass told once."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.planning.rollout_world import T0, World, setup_for, with_pods
from tests.planning.test_rollouts_workload_views import pod

from rebalancer import metrics
from rebalancer.cli import main
from rebalancer.gate.verdicts import GateLimits, Verdict, decide
from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.planning.rollout_actions import NoteBypassedGates
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.planning.rollouts import step
from rebalancer.planning.workload_views import view_pod
from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import RolloutPolicy, parse_rollout_policy
from rebalancer.structs.specs import WorkloadKind

PASSED = {"terminated": {"exitCode": 0}}


def test_a_gate_lets_go_after_two_minutes_of_silence_by_default() -> None:
    assert DEFAULT_BYPASS_SECONDS == 120
    limits = GateLimits()
    assert decide({}, 119.0, 119.0, limits).verdict is Verdict.WAIT
    late = decide({}, 120.0, 120.0, limits)
    assert late.verdict is Verdict.BYPASS
    assert "bypassGateAfterSeconds" in late.message
    # Never, when asked for never.
    assert decide({}, 800.0, 800.0, GateLimits(bypass_after_s=0)).verdict is Verdict.WAIT


def test_the_injected_gate_carries_the_bypass() -> None:
    assert gate_container(GateOptions())["args"][-2:] == ["--bypass-after", "120"]


def test_an_unset_bypass_is_the_operators_and_a_set_one_wins() -> None:
    assert parse_rollout_policy({}).bypass_gate_after_seconds == 120
    assert parse_rollout_policy({}, bypass_default=300).bypass_gate_after_seconds == 300
    set_ = {"bypassGateAfterSeconds": 45}
    assert parse_rollout_policy(set_, bypass_default=300).bypass_gate_after_seconds == 45
    never = {"bypassGateAfterSeconds": 0}
    assert parse_rollout_policy(never, bypass_default=300).bypass_gate_after_seconds == 0
    with pytest.raises(SpecInvalid) as refused:
        parse_rollout_policy({"bypassGateAfterSeconds": 10})
    assert "spec.policy.rollout.bypassGateAfterSeconds" in refused.value.summary()


@pytest.mark.parametrize(
    ("kwargs", "bypassed"),
    [
        # Through its gate with no `open`: bypassed.
        ({"init": PASSED}, True),
        ({"init": PASSED, "running": True}, True),
        # Opened by the operator: not a bypass.
        ({"init": PASSED, "annotations": {"rebalancer.dev/gate": "open"}}, False),
        # Already told.
        ({"init": PASSED, "annotations": {"rebalancer.dev/gate-bypassed": "x"}}, False),
        # Still waiting, or timed out (exit 1: the kubelet runs the gate again).
        ({"init": {"running": {}}}, False),
        ({"init": {"terminated": {"exitCode": 1}}}, False),
        # No gate at all.
        ({"gate": False, "running": True}, False),
    ],
)
def test_a_pod_through_its_gate_without_open_was_bypassed(
    kwargs: dict[str, Any], bypassed: bool
) -> None:
    view = view_pod(pod("orders-0", **kwargs), "orders", WorkloadKind.STATEFULSET, "rev-2")
    assert view.bypassed is bypassed


def test_the_planner_tells_bypassed_pods_once_whatever_the_phase() -> None:
    world = with_pods(World(replicas=3), T0)
    setup = setup_for(RolloutPolicy(bypass_gate_after_seconds=150))
    observation = world.observe(setup, T0)
    assert observation.workload is not None
    pods = tuple(replace(p, bypassed=p.name != "orders-1") for p in observation.workload.pods)
    observation = replace(observation, workload=replace(observation.workload, pods=pods))
    _, actions = step(RolloutState(), observation, T0)
    [noted] = [a for a in actions if isinstance(a, NoteBypassedGates)]
    assert noted == NoteBypassedGates(("orders-0", "orders-2"), 150)
    assert "2 pods started without their batch" in noted.message
    assert "spec.policy.rollout.bypassGateAfterSeconds, 150 s now" in noted.message
    assert "orders-0, orders-2" in noted.message
    # Once marked (the actuator's annotation), the pods are not bypassed any more.
    told = tuple(replace(p, bypassed=False) for p in pods)
    observation = replace(observation, workload=replace(observation.workload, pods=told))
    _, actions = step(RolloutState(), observation, T0 + 1)
    assert not [a for a in actions if isinstance(a, NoteBypassedGates)]


BYPASSED = {"namespace": "ns", "consumergroup": "bypassed", "group_id": "orders"}


def test_bypasses_are_counted_per_group() -> None:
    before = metrics.REGISTRY.get_sample_value("rebalancer_gate_bypasses_total", BYPASSED)
    metrics.record_gate_bypasses("ns", "bypassed", "orders", 3)
    after = metrics.REGISTRY.get_sample_value("rebalancer_gate_bypasses_total", BYPASSED)
    assert (after or 0) - (before or 0) == 3
    metrics.forget_group("ns", "bypassed")
    assert metrics.REGISTRY.get_sample_value("rebalancer_gate_bypasses_total", BYPASSED) is None


def test_the_operator_refuses_a_bypass_too_short_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["operator", "--gate-bypass-after-seconds", "10"]) == 2
    error = capsys.readouterr().err
    assert "--gate-bypass-after-seconds 10 must be 0 (never bypass) or at least 30" in error
    assert "gate.bypassAfterSeconds" in error
