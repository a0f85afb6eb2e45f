"""Check a ConsumerGroup status patch against the typed status model before it is written.

The API server prunes, without an error, every status field the CRD's structural schema does not
declare: a misspelt or undeclared key would be lost at the next read. Every status write passes
through `check_status_patch` (clients/patching.py calls it), which keeps what the model
(structs/consumer_group_status.py, the CRD's source) declares with its type, and names the rest.

A patch is partial: every field of the model is optional, and a null sets nothing (it deletes
the key, as in a merge patch). A list of objects (conditions, memberDetails) replaces the whole
list, so each of its items must be whole: an item without a required field is left out.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from rebalancer.structs.consumer_group_status import ResourceStatus
from rebalancer.structs.errors import RebalancerError
from rebalancer.structs.problems import kind_of

MODEL_FILE = "operator/rebalancer/structs/consumer_group_status.py"
_KEY_SEGMENT = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True)
class StatusViolation:
    """One key of a status patch that the status model does not allow, and how to fix it."""

    path: str
    problem: str
    fix: str

    @property
    def field(self) -> str:
        """The path without list indexes and map keys: a bounded name for a metric label."""
        return _KEY_SEGMENT.sub("", self.path)

    def __str__(self) -> str:
        return f"{self.path} {self.problem}; fix: {self.fix}"


@dataclass(frozen=True)
class StatusCheck:
    """A status patch as it may be written (`fields`), and what was left out of it."""

    fields: dict[str, object]
    violations: tuple[StatusViolation, ...]


class StatusUndeclared(RebalancerError, ValueError):
    """A status patch with keys the status model does not declare or values of the wrong type."""

    def __init__(self, violations: tuple[StatusViolation, ...]) -> None:
        self.violations = violations
        super().__init__("; ".join(str(violation) for violation in violations))


def check_status_patch(fields: Mapping[str, object]) -> StatusCheck:
    """Check the top-level status fields of a patch against ResourceStatus.

    Returns the patch without the offending keys (a list item without a required field goes as
    a whole), and one violation per key or item left out, naming its path under `status`."""
    violations: list[StatusViolation] = []
    kept = _check_block(ResourceStatus, fields, "status", violations)
    return StatusCheck(kept, tuple(violations))


def _check_block(
    model: type[BaseModel], block: Mapping[str, object], path: str, out: list[StatusViolation]
) -> dict[str, object]:
    declared = _fields_by_alias(model)
    kept: dict[str, object] = {}
    for key, value in block.items():
        where = f"{path}.{key}"
        field = declared.get(key)
        if field is None:
            out.append(_undeclared(model, key, where))
        elif value is None:
            kept[key] = None
        else:
            checked = _check_value(model, field, value, where, out)
            if checked is not None:
                kept[key] = checked
    return kept


def _check_value(
    model: type[BaseModel],
    field: tuple[str, FieldInfo],
    value: object,
    path: str,
    out: list[StatusViolation],
) -> object | None:
    """The value as it may be written, or None when it must be left out (told in `out`)."""
    name, info = field
    shape, inner = _shape(info.annotation)
    if shape == "object" and inner is not None:
        if not isinstance(value, Mapping):
            out.append(_wrong_kind(path, "an object", value))
            return None
        block = _check_block(inner, value, path, out)
        # Written empty, it would replace the block in force with nothing.
        return block if block or not value else None
    if shape == "map" and inner is not None:
        return _check_map(inner, value, path, out)
    if shape == "list" and inner is not None:
        if not isinstance(value, list | tuple):
            out.append(_wrong_kind(path, "a list", value))
            return None
        if not _fits(_list_adapter(model, name), value, path, out):
            return None
        return _check_items(inner, value, path, out)
    return (
        value
        if _fits(_leaf_adapter(model, name), _without_null_entries(value), path, out)
        else None
    )


def _check_map(
    model: type[BaseModel], value: object, path: str, out: list[StatusViolation]
) -> dict[str, object] | None:
    if not isinstance(value, Mapping):
        out.append(_wrong_kind(path, "an object", value))
        return None
    kept: dict[str, object] = {}
    for key, item in value.items():
        if item is None:
            kept[key] = None
        elif isinstance(item, Mapping):
            kept[key] = _check_block(model, item, f"{path}[{key}]", out)
        else:
            out.append(_wrong_kind(f"{path}[{key}]", "an object", item))
    return kept


def _check_items(
    model: type[BaseModel],
    items: list[Any] | tuple[Any, ...],
    path: str,
    out: list[StatusViolation],
) -> list[object]:
    kept: list[object] = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            out.append(_wrong_kind(where, "an object", item))
            continue
        block = _check_block(model, item, where, out)
        missing = [
            alias
            for alias, (_, info) in _fields_by_alias(model).items()
            if info.is_required() and block.get(alias) is None
        ]
        if missing:
            out.append(
                StatusViolation(
                    where,
                    f"lacks {', '.join(missing)}, which {model.__name__} requires: the API server"
                    " would refuse the whole patch",
                    "set every required field of the item; the item is left out",
                )
            )
            continue
        kept.append(block)
    return kept


def _fits(adapter: TypeAdapter[Any], value: object, path: str, out: list[StatusViolation]) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError as error:
        for detail in error.errors(include_url=False):
            where = path + "".join(f"[{part}]" for part in detail["loc"])
            out.append(
                StatusViolation(
                    where,
                    f"{detail['msg'][:1].lower()}{detail['msg'][1:]} (got {_quoted(detail)})",
                    f"write the type {MODEL_FILE} declares; the key is left out",
                )
            )
        return False
    return True


def _quoted(detail: ErrorDetails) -> str:
    """The offending value, cut short: a status value may be a long message."""
    shown = repr(detail["input"])
    return shown if len(shown) <= 60 else f"a {kind_of(detail['input'])} of {len(shown)} characters"


def _without_null_entries(value: object) -> object:
    """A map with its null entries taken out: a null deletes a map's key, as in a merge patch."""
    if isinstance(value, Mapping):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _undeclared(model: type[BaseModel], key: str, path: str) -> StatusViolation:
    declared = _fields_by_alias(model)
    by_name = {name: alias for alias, (name, _) in declared.items()}
    close = by_name.get(key) or next(iter(difflib.get_close_matches(key, declared, n=1)), None)
    hint = f"did you mean {close}? Otherwise " if close else ""
    return StatusViolation(
        path,
        f"is not declared in {model.__name__}: the API server would prune it without an error",
        f"{hint}declare it in {MODEL_FILE} (then run deploy/crd_gen.py), or do not write it",
    )


def _wrong_kind(path: str, wanted: str, value: object) -> StatusViolation:
    return StatusViolation(
        path,
        f"must be {wanted}, not a {kind_of(value)}",
        f"write the type {MODEL_FILE} declares; it is left out",
    )


@cache
def _fields_by_alias(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    return {(info.alias or name): (name, info) for name, info in model.model_fields.items()}


def _shape(annotation: Any) -> tuple[str, type[BaseModel] | None]:
    """Whether a field holds a block ("object"), a map or list of blocks, or a plain value."""
    kind = _without_none(annotation)
    args = get_args(kind)
    if _is_block(kind):
        return "object", kind
    if get_origin(kind) is dict and _is_block(args[1]):
        return "map", args[1]
    if get_origin(kind) is list and _is_block(args[0]):
        return "list", args[0]
    return "value", None


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [kind for kind in get_args(annotation) if kind is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
    return annotation


def _is_block(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel)


@cache
def _leaf_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    return _adapter(info.annotation, info.metadata)


@cache
def _list_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    """The field's list constraints (maxLength) without its items, checked item by item."""
    return _adapter(list[Any], model.model_fields[name].metadata)


def _adapter(kind: Any, metadata: list[Any]) -> TypeAdapter[Any]:
    return TypeAdapter(Annotated[kind, *metadata] if metadata else kind)
