"""status.rollout as the planner writes it fits the status model the CRD is rendered from.

The API server prunes a status field its CRD does not declare, silently: a RolloutState field
written under a name the model lacks would be lost at the next read, and a restarted operator
would repeat or skip a batch. These tests fail first.
"""

from __future__ import annotations

import types
from dataclasses import fields
from enum import Enum
from typing import Any, Union, get_args, get_origin, get_type_hints

from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.consumer_group_status import RolloutProgressStatus
from rebalancer.structs.structural_schemas import structural_schema

SCHEMA = structural_schema(RolloutProgressStatus)
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}


def sample(kind: Any) -> Any:
    """A value of `kind` other than its default: every field of the state is then written."""
    if get_origin(kind) in (Union, types.UnionType):
        return sample(next(arg for arg in get_args(kind) if arg is not type(None)))
    if get_origin(kind) is tuple:
        return (sample(get_args(kind)[0]),) * 2
    if isinstance(kind, type) and issubclass(kind, Enum):
        return list(kind)[-1]
    return {bool: True, int: 3, float: 1_780_000_000.5, str: "x"}[kind]


def every_field_set() -> RolloutState:
    hints = get_type_hints(RolloutState)
    return RolloutState(**{item.name: sample(hints[item.name]) for item in fields(RolloutState)})


def test_every_field_the_planner_writes_is_declared_with_its_type() -> None:
    written = every_field_set().to_status()
    undeclared = sorted(set(written) - set(SCHEMA["properties"]))
    assert not undeclared, f"status.rollout fields the CRD would prune: {undeclared}"
    for key, value in written.items():
        declared = SCHEMA["properties"][key]["type"]
        told = JSON_TYPES[type(value)]
        assert told == declared or (told, declared) == ("integer", "number"), key


def test_every_declared_field_is_written_by_the_planner_or_named_here() -> None:
    # The check above means something only if the sample writes the fields; completedRevision
    # is added by reconcilers/rollouts.py when a rollout completes.
    written = every_field_set().to_status()
    assert set(SCHEMA["properties"]) - set(written) == {"completedRevision"}


def test_the_phases_are_the_crds_enum() -> None:
    assert SCHEMA["properties"]["phase"]["enum"] == [phase.value for phase in RolloutPhase]
