"""Which groups share a request: split by coordinator, looked up once, forgotten when moved."""

from __future__ import annotations

from rebalancer.planning.coordinator_batches import (
    CLASSIC_FALLBACK,
    COORDINATOR_GONE,
    CoordinatorBatches,
    batch_by_coordinator,
    error_name,
    remembered,
)


def test_known_coordinators_share_a_batch_and_unknown_ones_are_looked_up_together() -> None:
    batches = batch_by_coordinator(["a", "b", "c", "d", "b"], {"a": 2, "b": 1, "d": 2, "other": 3})
    assert batches == CoordinatorBatches(lookups=("c",), by_node={1: ("b",), 2: ("a", "d")})


def test_a_batch_of_unknown_groups_is_one_lookup() -> None:
    assert batch_by_coordinator(["x", "y"], {}) == CoordinatorBatches(("x", "y"), {})


def test_answers_teach_and_unteach_coordinators() -> None:
    known = remembered({"a": 1, "b": 1}, {"a": None, "c": 2})
    assert known == {"b": 1, "c": 2}
    # A moved group is looked up at the next batch; the others are not.
    assert batch_by_coordinator(["a", "b", "c"], known).lookups == ("a",)


def test_which_answers_forget_a_coordinator_or_fall_back_to_describe_groups() -> None:
    assert {error_name(code) for code in COORDINATOR_GONE} == {
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
    }
    assert {error_name(code) for code in CLASSIC_FALLBACK} == {
        "GROUP_ID_NOT_FOUND",
        "UNSUPPORTED_VERSION",
    }
    assert error_name(30) == "GROUP_AUTHORIZATION_FAILED"
    assert error_name(999) == "error code 999"
