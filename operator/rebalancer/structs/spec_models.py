"""The base of the typed ConsumerGroup model: one definition that validates and describes.

Each block of the spec is a pydantic model (structs/rollout_spec.py is the first). A field's type,
description, default, bounds, enum and CEL rules are written once, on the model; the CRD's schema
is rendered from it (structs/structural_schemas.py, `make crd`) and the operator validates the
resource with it (`read_spec`), so the two cannot drift apart.

Why pydantic v2 rather than hand-written parsers or another library: it is the well-kept
validation library next to kopf (the kubernetes client already depends on it); it renders a JSON
Schema from the same type hints it validates with, so bounds and enums are not copied by hand;
its errors carry a location (`loc`) that becomes the field path of a FieldProblem; and it is
pure (no I/O), so it may live in structs/. Hand-written parsers are what this replaces (bounds
copied from the CRD by hand, five styles of parsing). attrs/cattrs render no schema; msgspec does,
but stops at the first error, where a user should see every problem of a block at once;
marshmallow's schemas are untyped for mypy and its JSON Schema is a third-party add-on.

What a model must say for the CRD (the rules of a structural schema): every field a description,
a default where the API server should fill one in, bounds with `ge`/`le`, lengths with
`min_length`/`max_length`, choices as a StrEnum, and CEL rules with `cel()` beside a `problems`
method that tells the same rule with its fix (the API server runs the CEL, the operator the
Python: a cluster may run an older CRD).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Strict, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

from rebalancer.structs.problems import FieldProblem, SpecInvalid, kind_of

# JSON's types, checked as the API server checks them: "3" is no integer and 1 no boolean. A
# number accepts integers (JSON has one number type); a StrEnum accepts its values.
Int = Annotated[int, Strict()]
Number = Annotated[float, Strict()]
Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]

M = TypeVar("M", bound="SpecModel")


def cel(
    rule: str, message: str, field_path: str | None = None, reason: str | None = None
) -> dict[str, str]:
    """One x-kubernetes-validations entry, in the order the CRD writes its keys.

    `reason` is the API server's error type for a failing rule (FieldValueForbidden, ...)."""
    entry = {"rule": rule, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry


class Wording:
    """How a field's problems are told when the generic wording would not help the user.

    Annotate a field with it (`Annotated[Str, Field(...), Wording(...)]`): `message` replaces
    what is said of a bad value (`{value}` in it stands for the value, quoted and cut short),
    `fix` what the user is told to do. `when` limits it to some kinds of pydantic error
    ("string_pattern_mismatch", "too_short", ...); `items` to the problems of a list's items
    rather than of the field itself. A field may carry several. Not part of the schema."""

    def __init__(
        self,
        message: str | None = None,
        fix: str | None = None,
        *,
        when: tuple[str, ...] | None = None,
        items: bool = False,
    ) -> None:
        self.message = message
        self.fix = fix
        self.when = when
        self.items = items

    def applies(self, kind: str, at_item: bool) -> bool:
        return self.items == at_item and (self.when is None or kind in self.when)


PROBLEM = "spec_problem"


def problem(message: str, fix: str, field: str = "") -> PydanticCustomError:
    """A problem a validator of the model raises, told with its fix.

    `field` (".heartbeatIntervalMs") names the field under the validated block the problem is
    about. Raised from a model_validator it is reported with every other problem of the spec,
    where a `problems` method runs only once the whole spec has validated."""
    return PydanticCustomError(PROBLEM, "{message}", {"message": message, "fix": fix, "at": field})


class SpecModel(BaseModel):
    """A block of the ConsumerGroup spec: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        # Only the CRD's names: the API server would prune a snake_case key, so must we.
        validate_by_name=False,
        validate_by_alias=True,
        frozen=True,
        # The API server prunes unknown fields; an older operator reading a newer CRD ignores them.
        extra="ignore",
    )

    def problems(self, path: str) -> list[FieldProblem]:
        """Problems between this block's fields (the Python twin of its CEL rules)."""
        return []


def read_spec(model: type[M], raw: object, path: str) -> M:
    """Validate one block of the spec (None for its defaults), or raise SpecInvalid.

    Every problem names its field path under `path`, what is wrong and the fix. Nulls are
    dropped first, as the API server prunes them before defaulting."""
    if raw is None:
        raw = {}
    try:
        spec = model.model_validate(_without_nulls(raw))
    except ValidationError as error:
        raise SpecInvalid(
            tuple(_problem(model, path, detail) for detail in error.errors())
        ) from None
    problems = _cross_field_problems(spec, path)
    if problems:
        raise SpecInvalid(tuple(problems))
    return spec


def _without_nulls(raw: object) -> object:
    if isinstance(raw, Mapping):
        return {key: _without_nulls(value) for key, value in raw.items() if value is not None}
    return raw


def _cross_field_problems(spec: SpecModel, path: str) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    for name, info in type(spec).model_fields.items():
        value = getattr(spec, name)
        if isinstance(value, SpecModel):
            problems.extend(_cross_field_problems(value, f"{path}.{info.alias or name}"))
    problems.extend(spec.problems(path))
    return problems


def _problem(model: type[SpecModel], path: str, detail: ErrorDetails) -> FieldProblem:
    where, field, at_item = _locate(model, path, detail["loc"])
    kind = detail["type"]
    if kind == PROBLEM:
        context = detail.get("ctx", {})
        return FieldProblem(where + context["at"], context["message"], context["fix"])
    value = detail["input"]
    message, fix = _wording(kind, field, detail, where)
    for extra in field.metadata if field is not None else ():
        if isinstance(extra, Wording) and extra.applies(kind, at_item):
            message = (extra.message or message).replace("{value}", _quoted(value))
            fix = extra.fix or fix
    return FieldProblem(where, message, fix)


def _locate(
    model: type[SpecModel], path: str, loc: Sequence[int | str]
) -> tuple[str, FieldInfo | None, bool]:
    """Where an error is (spec.kafka.bootstrapServers[0], properties[fetch.min.bytes]), the
    deepest field of the model on the way, and whether the error is about one of that field's
    items (a list's or a map's) rather than the field itself."""
    current: type[SpecModel] | None = model
    field: FieldInfo | None = None
    at_item = False
    for part in loc:
        found = None
        if current is not None and isinstance(part, str):
            found = next(
                (info for name, info in current.model_fields.items() if part in (name, info.alias)),
                None,
            )
        if found is not None:
            field, at_item = found, False
            current = _model_of(found.annotation)
            path += f".{found.alias or part}"
        elif part != "[key]":
            # A list's index or a map's key (pydantic adds "[key]" when the key itself is wrong).
            at_item = True
            current = None
            path += f"[{part}]"
    return path, field, at_item


def _quoted(value: object) -> str:
    return repr(value[:80] if isinstance(value, str) else value)


# What is said of a value of the wrong kind or shape, by pydantic's error type: the problem and
# its fix, from the value, the field's path and the error's context.
_Told = Callable[[object, str, Mapping[str, Any]], tuple[str, str]]
_PLAIN_WORDING: dict[str, _Told] = {
    "missing": lambda _, where, __: ("is required", f"add {where} to the ConsumerGroup"),
    "model_type": lambda _, where, __: ("must be an object", f"write {where} as a mapping"),
    "model_attributes_type": lambda _, where, __: (
        "must be an object",
        f"write {where} as a mapping",
    ),
    "dict_type": lambda _, where, __: ("must be an object", f"write {where} as a mapping"),
    "list_type": lambda value, _, __: (
        f"must be a list, got {kind_of(value)}",
        "write a YAML list",
    ),
    "too_short": lambda _, where, __: ("must not be empty", f"list at least one item in {where}"),
    "too_long": lambda _, __, ctx: (f"has more than {ctx.get('max_length')} items", "list fewer"),
    "string_pattern_mismatch": lambda value, _, ctx: (
        f"{_quoted(value)} does not match {ctx.get('pattern')}",
        "write a value the pattern accepts",
    ),
    "value_error": lambda _, __, ctx: (str(ctx.get("error", "is invalid")), "correct the value"),
    "bool_type": lambda _, __, ___: ("must be true or false", "use a bool"),
    "int_type": lambda _, __, ___: ("must be an integer", "use a number"),
    "string_type": lambda _, __, ___: ("must be a string", "quote the value"),
    "string_too_long": lambda _, __, ctx: (
        f"is longer than {ctx.get('max_length')} characters",
        f"shorten it to {ctx.get('max_length')} characters",
    ),
    "string_too_short": lambda _, where, __: (
        "must not be empty",
        f"fill in {where} or leave it out",
    ),
}


def _wording(
    kind: str, field: FieldInfo | None, detail: ErrorDetails, where: str
) -> tuple[str, str]:
    value = detail["input"]
    plain = _PLAIN_WORDING.get(kind)
    if plain is not None:
        return plain(value, where, detail.get("ctx", {}))
    if kind in ("literal_error", "enum") and field is not None:
        allowed = [str(choice) for choice in _choices(field)]
        return f"unsupported value {value!r}", "use one of: " + ", ".join(allowed)
    low, high = _bounds(field)
    if _is_number(field):
        return f"must be a number from {low} to {high}, got {value!r}", (
            f"use a number from {low} to {high}"
        )
    if kind in ("greater_than_equal", "less_than_equal"):
        return f"must be between {low} and {high}, got {value}", f"set a value from {low} to {high}"
    return f"is invalid: {kind}", "check the field against the CRD (kubectl explain)"


def _unwrapped(annotation: Any) -> list[Any]:
    """The types an annotation allows, Optional and Annotated taken off."""
    if get_origin(annotation) is Annotated:
        return _unwrapped(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return [kind for arg in get_args(annotation) for kind in _unwrapped(arg)]
    return [annotation]


def _model_of(annotation: Any) -> type[SpecModel] | None:
    for kind in _unwrapped(annotation):
        if isinstance(kind, type) and issubclass(kind, SpecModel):
            return kind
    return None


def _choices(field: FieldInfo) -> tuple[object, ...]:
    """The values a StrEnum or Literal field allows."""
    for kind in _unwrapped(field.annotation):
        if get_origin(kind) is Literal:
            return get_args(kind)
        if isinstance(kind, type) and issubclass(kind, StrEnum):
            return tuple(member.value for member in kind)
    return ()


def _is_number(field: FieldInfo | None) -> bool:
    return field is not None and float in _unwrapped(field.annotation)


def _bounds(field: FieldInfo | None) -> tuple[object, object]:
    low: object = None
    high: object = None
    for bound in field.metadata if field is not None else ():
        # pydantic keeps Field(ge=..., le=...) as annotated-types' Ge and Le.
        low = getattr(bound, "ge", low)
        high = getattr(bound, "le", high)
    return low, high
