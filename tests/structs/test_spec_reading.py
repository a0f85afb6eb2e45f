"""read_spec: a block validated by its model, each problem told with field path and fix."""

from __future__ import annotations

import pytest

from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.rollout_policy import RolloutPolicy, parse_rollout_policy
from rebalancer.structs.rollout_spec import RolloutSpec
from rebalancer.structs.spec_models import read_spec

PATH = "spec.policy.rollout"


def test_every_bad_field_of_a_block_is_told_at_once() -> None:
    with pytest.raises(SpecInvalid) as caught:
        read_spec(RolloutSpec, {"maxBatchSize": 0, "consumers": {"sessionTimeoutMs": "45s"}}, PATH)
    assert [(p.path, p.message, p.fix) for p in caught.value.problems] == [
        (
            f"{PATH}.maxBatchSize",
            "must be between 1 and 10000, got 0",
            "set a value from 1 to 10000",
        ),
        (f"{PATH}.consumers.sessionTimeoutMs", "must be an integer", "use a number"),
    ]


def test_a_null_is_an_unset_field_as_the_api_server_prunes_it() -> None:
    raw = {"gatherSeconds": None, "consumers": None, "maxBatchSize": None}
    assert parse_rollout_policy(raw) == RolloutPolicy()


def test_the_crds_bounds_are_the_parsers() -> None:
    # The CRD's maxLength, which the hand parser did not copy.
    with pytest.raises(SpecInvalid) as caught:
        parse_rollout_policy({"gateImage": "r/" + "x" * 511})
    assert caught.value.problems[0].path == f"{PATH}.gateImage"
    assert parse_rollout_policy({"gateImage": "r/" + "x" * 510}).gate_image


def test_a_name_other_than_the_crds_is_ignored_as_the_api_server_prunes_it() -> None:
    assert parse_rollout_policy({"park_stateful_sets": False, "unknown": 1}) == RolloutPolicy()
