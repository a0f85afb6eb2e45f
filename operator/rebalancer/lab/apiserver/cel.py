"""CEL `x-kubernetes-validations` rules, evaluated with cel-python the way kube does.

Values are converted by their schema (numbers become doubles, date-times timestamps) so rules
type-check as they would on a cluster; the few kube CEL library functions that CRDs commonly
use are added on top of the CEL standard library.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from . import errors
from .errors import FieldError
from .schemas import Schema, join

Body = dict[str, Any]

_MISSING = object()
BLOCKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def _str(fn: Callable[..., str]) -> Callable[..., celtypes.StringType]:
    return lambda *args: celtypes.StringType(fn(*(str(a) for a in args)))


def _list_fn(fn: Callable[[list[Any]], Any]) -> Callable[[Any], Any]:
    return lambda values: fn(list(values))


def _sum(values: list[Any]) -> Any:
    total: Any = celtypes.IntType(0)
    for value in values:
        total = total + value
    return total


# A small part of kube's CEL libraries (strings, lists, regex): the functions CRD rules use.
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "lowerAscii": _str(str.lower),
    "upperAscii": _str(str.upper),
    "trim": _str(str.strip),
    "replace": lambda s, a, b, n=None: celtypes.StringType(
        str(s).replace(str(a), str(b), -1 if n is None else int(n))
    ),
    "split": lambda s, sep: celtypes.ListType(
        [celtypes.StringType(p) for p in str(s).split(str(sep))]
    ),
    "join": lambda items, sep="": celtypes.StringType(str(sep).join(str(i) for i in items)),
    "substring": lambda s, a, b=None: celtypes.StringType(
        str(s)[int(a) :] if b is None else str(s)[int(a) : int(b)]
    ),
    "indexOf": lambda s, sub: celtypes.IntType(
        list(s).index(sub) if isinstance(s, list) and sub in s else str(s).find(str(sub))
    ),
    "charAt": lambda s, i: celtypes.StringType(str(s)[int(i) : int(i) + 1]),
    "isSorted": _list_fn(lambda v: celtypes.BoolType(v == sorted(v))),
    "sum": _list_fn(_sum),
    "min": lambda *a: min(list(a[0]) if len(a) == 1 else a),
    "max": lambda *a: max(list(a[0]) if len(a) == 1 else a),
    "find": lambda s, p: celtypes.StringType(
        m.group(0) if (m := re.search(str(p), str(s))) else ""
    ),
    "findAll": lambda s, p: celtypes.ListType(
        [celtypes.StringType(x.group(0)) for x in re.finditer(str(p), str(s))]
    ),
}

_ENV = celpy.Environment()


@functools.lru_cache(maxsize=1024)
def compile_rule(rule: str) -> celpy.Runner:
    """Compile once per rule text; raises CELParseError on a bad rule."""
    return _ENV.program(_ENV.compile(rule), functions=FUNCTIONS)


def compile_error(rule: str) -> str | None:
    try:
        compile_rule(rule)
    except CELParseError as exc:
        return str(exc).strip().splitlines()[0]
    return None


def to_cel(value: Any, schema: Schema | None) -> Any:
    """A JSON value as the CEL type its schema declares."""
    schema = schema or {}
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int | float) and schema.get("type") == "number":
        return celtypes.DoubleType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return _string(value, schema.get("format", ""))
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    return celtypes.MapType(
        {
            celtypes.StringType(k): to_cel(
                v, props.get(k, extra if isinstance(extra, dict) else None)
            )
            for k, v in value.items()
        }
    )


def _string(value: str, fmt: str) -> Any:
    try:
        if fmt in ("date-time", "datetime"):
            return celtypes.TimestampType(value)
        if fmt == "duration":
            return celtypes.DurationType(value)
        if fmt == "byte":
            return celtypes.BytesType(base64.b64decode(value))
    except (ValueError, TypeError):
        pass
    return celtypes.StringType(value)


def _type_name(schema: Schema) -> str:
    if schema.get("type"):
        return str(schema["type"])
    return "object" if "properties" in schema else ""


def _describe(exc: Exception) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    if match := re.match(r"no such member in mapping: '(.*)'", text):
        return f"no such key: {match.group(1)}"
    return text


def check(
    value: Any, schema: Schema, path: str, old: Any = _MISSING, *, root: bool = True
) -> list[FieldError]:
    """Evaluate every rule on every node present in `value`; `old` enables transition rules."""
    errs: list[FieldError] = []
    _check(value, schema, path, old, errs, root=root)
    return errs


def _check(
    value: Any, schema: Schema, path: str, old: Any, errs: list[FieldError], *, root: bool = False
) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        _evaluate(rule, value, schema, path, old, errs)
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                old_child = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                _check(child, sub, join(path, key), old_child, errs)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items: Schema = schema["items"]
        olds = _correlate(value, old, schema)
        for i, item in enumerate(value):
            _check(item, items, f"{path}[{i}]", olds[i], errs)


def _correlate(value: list[Any], old: Any, schema: Schema) -> list[Any]:
    """Old items matched by map keys; kube correlates only `x-kubernetes-list-type: map`."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return [_MISSING] * len(value)

    def ident(item: Any) -> str:
        return json.dumps([item.get(k) for k in keys]) if isinstance(item, dict) else ""

    by_key = {ident(item): item for item in old}
    return [by_key.get(ident(item), _MISSING) for item in value]


def _evaluate(
    rule: Body, value: Any, schema: Schema, path: str, old: Any, errs: list[FieldError]
) -> None:
    text = str(rule.get("rule", ""))
    transition = "oldSelf" in text
    if transition and (old is _MISSING or old is None) and not rule.get("optionalOldSelf"):
        return
    field_path = str(rule.get("fieldPath", "")).lstrip(".")
    where = join(path, field_path) if field_path else path
    activation: dict[str, Any] = {"self": to_cel(value, schema)}
    if transition:
        activation["oldSelf"] = to_cel(None if old is _MISSING else old, schema)
    type_name = _type_name(schema)
    try:
        result = compile_rule(text).evaluate(activation)
        if isinstance(result, Exception):
            raise result
    except CELEvalError as exc:
        errs.append(
            errors.invalid(where, type_name, f"{_describe(exc)} evaluating rule: {text.strip()}")
        )
        return
    except CELParseError as exc:
        errs.append(errors.invalid(where, type_name, f"compilation failed: {exc}"))
        return
    if isinstance(result, celtypes.BoolType) and bool(result):
        return
    message = _message(rule, activation)
    reason = rule.get("reason")
    if reason == "FieldValueForbidden":
        errs.append(errors.forbidden_field(where, message))
    elif reason == "FieldValueRequired":
        errs.append(errors.required(where, message))
    elif reason == "FieldValueDuplicate":
        errs.append(FieldError("FieldValueDuplicate", where, type_name))
    else:
        errs.append(errors.invalid(where, type_name, message))


def _message(rule: Body, activation: dict[str, Any]) -> str:
    expression = rule.get("messageExpression")
    if expression:
        try:
            text = compile_rule(str(expression)).evaluate(activation)
            if isinstance(text, str) and text.strip():
                return text.strip()
        except (CELEvalError, CELParseError):
            pass
    if rule.get("message"):
        return str(rule["message"]).strip()
    return f"failed rule: {str(rule.get('rule', '')).strip()}"


def rules_in(schema: Any, path: str) -> list[tuple[str, str]]:
    """Every (path, expression) in a schema, for compiling them when a CRD is admitted."""
    found: list[tuple[str, str]] = []
    if not isinstance(schema, dict):
        return found
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        found.append((f"{path}.x-kubernetes-validations[{i}].rule", str(rule.get("rule", ""))))
        if rule.get("messageExpression"):
            found.append(
                (
                    f"{path}.x-kubernetes-validations[{i}].messageExpression",
                    str(rule["messageExpression"]),
                )
            )
    for key, sub in (schema.get("properties") or {}).items():
        found += rules_in(sub, f"{path}.properties[{key}]")
    found += rules_in(schema.get("items"), f"{path}.items")
    found += rules_in(schema.get("additionalProperties"), f"{path}.additionalProperties")
    return found
