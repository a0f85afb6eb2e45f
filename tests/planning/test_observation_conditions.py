"""The observer's conditions are set by type: Degraded says what else the observation found."""

from __future__ import annotations

from tests.planning.test_scaled_to_zero import snapshot

from rebalancer.planning.statuses import observation_conditions, set_condition
from rebalancer.structs.conditions import Condition, ConditionStatus, ConditionType

REFUSED = Condition(
    ConditionType.DEGRADED, ConditionStatus.TRUE, "TopicAuthorizationFailed", "may not describe"
)


def by_type(conditions: list[Condition]) -> dict[ConditionType, Condition]:
    return {condition.type: condition for condition in conditions}


def test_a_condition_replaces_the_one_of_its_type_wherever_it_is() -> None:
    ready, progressing, degraded = observation_conditions(snapshot("Stable", 2))
    shuffled = [degraded, ready, progressing]
    assert set_condition(shuffled, REFUSED) == [REFUSED, ready, progressing]
    assert set_condition([ready], REFUSED) == [ready, REFUSED]


def test_a_clean_observation_is_not_degraded() -> None:
    degraded = by_type(observation_conditions(snapshot("Stable", 2)))[ConditionType.DEGRADED]
    assert (degraded.status, degraded.reason) == (ConditionStatus.FALSE, "Observed")


def test_a_missing_workload_is_said_before_refused_topics() -> None:
    conditions = observation_conditions(
        snapshot("Empty", 0),
        workload_missing="StatefulSet default/orders",
        topics_refused=REFUSED,
    )
    assert [c.type for c in conditions] == [
        ConditionType.READY,
        ConditionType.PROGRESSING,
        ConditionType.DEGRADED,
    ]
    degraded = by_type(conditions)[ConditionType.DEGRADED]
    assert degraded.reason == "WorkloadNotFound"
    assert degraded.message == (
        "StatefulSet default/orders not found; create it or fix spec.workload.name"
    )
    refused = observation_conditions(snapshot("Stable", 2), topics_refused=REFUSED)
    assert by_type(refused)[ConditionType.DEGRADED] == REFUSED
