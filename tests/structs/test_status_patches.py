"""A status patch is checked against the status model the CRD is rendered from: what the model
does not declare, or declares with another type, is left out and named, because the API server
would prune it without a word (or refuse the whole patch)."""

from __future__ import annotations

from typing import Any

import pytest

from rebalancer.structs.consumer_group_status import (
    ConditionEntry,
    MemberDetailStatus,
    ObservedGroupStatus,
    RolloutProgressStatus,
)
from rebalancer.structs.status_patches import StatusUndeclared, check_status_patch

READY = {"type": "Ready", "status": "True", "reason": "GroupStable", "observedGeneration": 3}


def paths(fields: dict[str, Any]) -> list[str]:
    return [violation.path for violation in check_status_patch(fields).violations]


def test_a_declared_patch_passes_whole() -> None:
    fields = {
        "observedGeneration": 3,
        "conditions": [READY],
        "group": {"state": "Stable", "members": 2, "sources": {"lag": "broker"}},
        "rollout": {"phase": "Idle", "batchSizes": [2, 1], "static": True},
        "enforcement": {"memory": {"anything": [1, {"goes": None}]}},
    }
    check = check_status_patch(fields)
    assert check.violations == ()
    assert check.fields == fields


def test_an_unknown_top_level_key_is_left_out_and_named() -> None:
    check = check_status_patch({"observedGeneration": 3, "observedGenration": 3})
    assert check.fields == {"observedGeneration": 3}
    (violation,) = check.violations
    assert violation.path == "status.observedGenration"
    assert "not declared in ResourceStatus" in violation.problem
    assert "did you mean observedGeneration?" in violation.fix
    assert "deploy/crd_gen.py" in violation.fix


def test_an_unknown_nested_key_leaves_its_siblings() -> None:
    check = check_status_patch({"group": {"members": 2, "observed_at": "2026-12-02T06:00:00Z"}})
    assert check.fields == {"group": {"members": 2}}
    (violation,) = check.violations
    assert violation.path == "status.group.observed_at"
    # A Python field name is not a wire name: the API server knows only the camelCase one.
    assert "did you mean observedAt?" in violation.fix


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"observedGeneration": "3"}, "status.observedGeneration"),
        ({"observedGeneration": 3.0}, "status.observedGeneration"),
        ({"group": {"members": True}}, "status.group.members"),
        ({"group": {"state": 1}}, "status.group.state"),
        ({"rollout": {"phase": "Rolling"}}, "status.rollout.phase"),
        ({"rollout": {"batchSizes": [2, "1"]}}, "status.rollout.batchSizes[1]"),
        ({"group": {"sources": {"lag": 1}}}, "status.group.sources[lag]"),
        ({"group": "Stable"}, "status.group"),
        ({"conditions": {"type": "Ready"}}, "status.conditions"),
    ],
)
def test_a_value_of_the_wrong_type_is_left_out(fields: dict[str, Any], path: str) -> None:
    check = check_status_patch(fields)
    assert [violation.path for violation in check.violations] == [path]
    top = next(iter(fields))
    assert check.fields.get(top) in (None, {}), check.fields


def test_a_wrong_type_names_the_value_it_got() -> None:
    (violation,) = check_status_patch({"rollout": {"batch": "2"}}).violations
    assert violation.problem == "input should be a valid integer (got '2')"


def test_null_deletes_at_any_level_and_is_kept() -> None:
    fields = {
        "group": None,
        "learning": {"lastAppliedTime": None, "recommended": {"batchSize": None}},
        "rollout": {"slots": None},
        "settings": {"groupConfigs": {"values": {"consumer.session.timeout.ms": None}}},
    }
    check = check_status_patch(fields)
    assert check.violations == ()
    assert check.fields == fields


def test_a_block_left_empty_is_not_written() -> None:
    # Written empty, status.group would replace the block in force with nothing.
    check = check_status_patch({"observedGeneration": 3, "group": {"membres": 2}})
    assert check.fields == {"observedGeneration": 3}
    assert check_status_patch({"group": {}}).fields == {"group": {}}


def test_null_does_not_excuse_an_undeclared_key() -> None:
    assert paths({"group": {"membres": None}}) == ["status.group.membres"]


def test_a_condition_with_an_unknown_key_keeps_the_condition() -> None:
    condition = {**READY, "lastTransitonTime": "2026-12-02T06:00:00Z"}
    check = check_status_patch({"conditions": [condition]})
    assert check.fields == {"conditions": [READY]}
    assert [violation.path for violation in check.violations] == [
        "status.conditions[0].lastTransitonTime"
    ]


def test_a_condition_without_a_required_field_is_left_out_of_the_list() -> None:
    # A JSON patch replaces the whole list; the API server refuses an item without `status`.
    degraded = {"type": "Degraded", "status": "Maybe"}
    check = check_status_patch({"conditions": [READY, degraded, {"status": "False"}]})
    assert check.fields == {"conditions": [READY]}
    assert [violation.path for violation in check.violations] == [
        "status.conditions[1].status",
        "status.conditions[1]",
        "status.conditions[2]",
    ]
    assert "lacks type" in check.violations[2].problem


def test_member_details_are_checked_item_by_item() -> None:
    members = [
        {"host": "orders-0", "partitions": 3, "source": "broker"},
        {"host": "orders-1", "partitons": 3},
        {"host": "orders-2", "generation": "7"},
    ]
    check = check_status_patch({"group": {"memberDetails": members}})
    assert check.fields == {
        "group": {"memberDetails": [members[0], {"host": "orders-1"}, {"host": "orders-2"}]}
    }
    assert [violation.field for violation in check.violations] == [
        "status.group.memberDetails.partitons",
        "status.group.memberDetails.generation",
    ]


def test_member_details_keep_the_models_bound() -> None:
    members = [{"host": f"orders-{index}"} for index in range(51)]
    assert paths({"group": {"memberDetails": members}}) == ["status.group.memberDetails"]
    assert paths({"group": {"memberDetails": members[:50]}}) == []


def test_a_map_of_blocks_is_checked_entry_by_entry() -> None:
    configs = {"consumer.session.timeout.ms": {"value": "45000", "sorce": "group-config"}}
    check = check_status_patch({"settings": {"perGroupConfigs": {"configs": configs}}})
    assert check.fields == {
        "settings": {
            "perGroupConfigs": {"configs": {"consumer.session.timeout.ms": {"value": "45000"}}}
        }
    }
    (violation,) = check.violations
    assert (
        violation.path
        == "status.settings.perGroupConfigs.configs[consumer.session.timeout.ms].sorce"
    )
    assert violation.field == "status.settings.perGroupConfigs.configs.sorce"


def test_blocks_built_from_the_model_pass() -> None:
    rollout = RolloutProgressStatus(phase="Completed", batch=2, batches=2, batch_sizes=[2, 1])
    group = ObservedGroupStatus(
        members=1, member_details=[MemberDetailStatus(host="orders-0", partitions=3)]
    )
    condition = ConditionEntry(type="Ready", status="True", reason="GroupStable")
    fields = {
        "rollout": rollout.model_dump(by_alias=True, exclude_none=True),
        "group": group.model_dump(by_alias=True, exclude_none=True),
        "conditions": [condition.model_dump(by_alias=True, exclude_none=True)],
    }
    assert check_status_patch(fields).violations == ()


def test_strict_mode_raises_with_every_violation() -> None:
    violations = check_status_patch({"bogus": 1, "group": {"members": "2"}}).violations
    error = StatusUndeclared(violations)
    assert "status.bogus" in str(error)
    assert "status.group.members" in str(error)
