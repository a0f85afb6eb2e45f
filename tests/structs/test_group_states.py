"""GroupState as the snapshot carries it: read back from status by value, and its rebalancing
states."""

from __future__ import annotations

from rebalancer.planning.rebalances import REBALANCING_STATES
from rebalancer.structs.brokers import GroupState


def test_a_status_value_reads_back_as_its_state_and_anything_else_as_unknown() -> None:
    for state in GroupState:
        assert GroupState.named(state.value) is state
    for other in (None, "", "stable", "Rebalancing", 3):
        assert GroupState.named(other) is GroupState.UNKNOWN


def test_the_rebalancing_states_are_the_four_of_both_protocols() -> None:
    expected = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}
    assert set(REBALANCING_STATES) == expected
