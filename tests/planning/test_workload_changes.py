"""Which workload events wake the rollout planner: a spec its controller has not observed."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.planning.workload_changes import spec_unobserved


def body(generation: object, observed: object = None) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed}
    return {"metadata": {"generation": generation}, "status": status}


@pytest.mark.parametrize(
    ("workload", "wakes"),
    [
        (body(1), True),  # just created: no controller has looked yet
        (body(4, 3), True),  # a new template, replica count or pause
        (body(4, 4), False),  # a status update: the controller caught up
        (body(4, 5), False),  # never seen, but not a change to act on
        ({"metadata": {}}, False),  # no generation: nothing to compare
        (body("4", 3), False),  # not a number
    ],
)
def test_only_a_spec_change_its_controller_has_not_observed_wakes(
    workload: dict[str, Any], wakes: bool
) -> None:
    assert spec_unobserved(workload) is wakes
