"""spec.policy.rollout.costWeights and arrivalPlan: parsed, with errors that name field and fix."""

from __future__ import annotations

import pytest

from rebalancer.structs.gates import GateHold
from rebalancer.structs.plan_costs import ArrivalPlan, CostWeights
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import parse_rollout_policy


def test_defaults_weigh_both_costs_and_let_the_model_choose() -> None:
    policy = parse_rollout_policy({})
    assert policy.cost_weights == CostWeights(1.0, 1.0)
    assert policy.arrival_plan is None
    assert parse_rollout_policy({"arrivalPlan": "Auto"}).arrival_plan is None


def test_weights_and_plan_are_read() -> None:
    policy = parse_rollout_policy(
        {
            "costWeights": {"unownedPartitionSeconds": 2, "stopTheWorldPartitionSeconds": 0.5},
            "arrivalPlan": "Gather",
        }
    )
    assert policy.cost_weights == CostWeights(2.0, 0.5)
    assert policy.arrival_plan is ArrivalPlan.GATHER


@pytest.mark.parametrize(
    ("raw", "path", "fix"),
    [
        ({"costWeights": {"unownedPartitionSeconds": -1}}, "costWeights.unownedPartitionSeconds",
         "use a weight"),
        ({"costWeights": {"stopTheWorldPartitionSeconds": "high"}},
         "costWeights.stopTheWorldPartitionSeconds", "use a weight"),
        ({"costWeights": {"unownedPartitionSeconds": 0, "stopTheWorldPartitionSeconds": 0}},
         "costWeights", "give unownedPartitionSeconds"),
        ({"costWeights": 3}, "costWeights", "as a mapping"),
        ({"arrivalPlan": "Eventually"}, "arrivalPlan", "OnArrival"),
    ],
)  # fmt: skip
def test_bad_values_name_the_field_and_the_fix(raw: dict[str, object], path: str, fix: str) -> None:
    with pytest.raises(SpecInvalid) as caught:
        parse_rollout_policy(raw)
    problems = caught.value.problems
    assert [problem.path for problem in problems] == [f"spec.policy.rollout.{path}"]
    assert fix in problems[0].fix


def test_what_the_gate_holds_is_read_and_an_unknown_hold_named() -> None:
    assert parse_rollout_policy({}).gate_holds is GateHold.POD
    assert parse_rollout_policy({"gateHolds": "Join"}).gate_holds is GateHold.JOIN
    with pytest.raises(SpecInvalid) as raised:
        parse_rollout_policy({"gateHolds": "Consumer"})
    (problem,) = raised.value.problems
    assert problem.path.endswith("rollout.gateHolds")
    assert "Pod, Join" in problem.fix
