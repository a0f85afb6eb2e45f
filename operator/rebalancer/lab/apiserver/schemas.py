"""Structural schemas of custom resources: pruning, defaulting and OpenAPI validation.

Error wording and reasons follow kube-openapi's validator as apiextensions-apiserver converts
it to field errors, so clients see the same messages a real cluster would give.
"""

from __future__ import annotations

import base64
import copy
import functools
import ipaddress
import json
import re
import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from . import errors
from .errors import FieldError

Body = dict[str, Any]
Schema = dict[str, Any]

#: ObjectMeta's JSON fields; anything else under metadata is an unknown field.
OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
        "annotations", "ownerReferences", "finalizers", "managedFields",
    }
)  # fmt: skip


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def is_object_schema(schema: Schema) -> bool:
    return schema.get("type") == "object" or "properties" in schema


# Pruning ----------------------------------------------------------------------------------


def prune(value: Any, schema: Schema, path: str, unknown: list[str], *, root: bool = False) -> None:
    """Drop fields the schema does not declare (recording their paths) and non-nullable nulls."""
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            child = value[key]
            here = join(path, key)
            if embedded and key in ("apiVersion", "kind"):
                continue
            if embedded and key == "metadata":
                _prune_metadata(child, here, unknown)
                continue
            sub = props.get(key)
            if sub is None and isinstance(extra, dict):
                sub = extra
            if sub is None:
                if not (preserve or extra is True):
                    unknown.append(here)
                    del value[key]
                continue
            if child is None and not sub.get("nullable"):
                del value[key]
                continue
            prune(child, sub, here, unknown)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                prune(item, items, f"{path}[{i}]", unknown)


def _prune_metadata(meta: Any, path: str, unknown: list[str]) -> None:
    if isinstance(meta, dict):
        for key in list(meta):
            if key not in OBJECT_META_FIELDS:
                unknown.append(join(path, key))
                del meta[key]


# Defaulting -------------------------------------------------------------------------------


def apply_defaults(value: Any, schema: Schema, *, root: bool = False) -> None:
    """Fill in `default`s of absent properties, recursively, as kube does on write and read."""
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in value and "default" in sub and not (root and key == "metadata"):
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                apply_defaults(child, sub)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                apply_defaults(item, items)


# Validation -------------------------------------------------------------------------------


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_error(path: str, expected: str, actual: str) -> FieldError:
    detail = f'{path} in body must be of type {expected}: "{actual}"'
    return FieldError("FieldValueTypeInvalid", path, actual, detail)


def _bound(bound: float, value: Any) -> str:
    # kube-openapi compares integers against int64(bound) and prints that.
    if isinstance(value, int) or float(bound).is_integer():
        return str(int(bound))
    return errors.go_value(float(bound))


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w))+$")


def _valid_datetime(text: str) -> bool:
    if not _RFC3339.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return False
    return True


def _valid_ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False


def _valid_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


def _valid_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36


def _valid_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _valid_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


#: The string formats kube validates in CRDs; others (and int32/int64 bounds) are not checked.
FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _valid_datetime,
    "datetime": _valid_datetime,
    "date": _valid_date,
    "duration": lambda s: bool(_DURATION.match(s)),
    "ipv4": lambda s: _valid_ip(s, 4),
    "ipv6": lambda s: _valid_ip(s, 6),
    "cidr": _valid_cidr,
    "uuid": _valid_uuid,
    "hostname": lambda s: bool(_HOSTNAME.match(s)),
    "email": lambda s: bool(_EMAIL.match(s)),
    "byte": _valid_base64,
}


def validate(value: Any, schema: Schema, path: str = "") -> list[FieldError]:
    errs: list[FieldError] = []
    _validate(value, schema, path, errs)
    return errs


def _validate(value: Any, schema: Schema, path: str, errs: list[FieldError]) -> None:
    actual = json_type(value)
    expected = schema.get("type")
    if value is None:
        if not schema.get("nullable") and expected:
            errs.append(_type_error(path, expected, "null"))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            errs.append(_type_error(path, "integer,string", actual))
            return
    elif expected:
        fits = (
            actual == expected
            or (expected == "number" and actual == "integer")
            or (expected == "integer" and actual == "number" and float(value).is_integer())
        )
        if not fits:
            errs.append(_type_error(path, expected, actual))
            return

    if "enum" in schema and value not in schema["enum"]:
        allowed = [v if isinstance(v, str) else json.dumps(v) for v in schema["enum"]]
        quoted = ", ".join(json.dumps(v) for v in allowed)
        errs.append(
            FieldError("FieldValueNotSupported", path, value, f"supported values: {quoted}")
        )

    if actual == "string":
        _validate_string(value, schema, path, errs)
    elif actual in ("integer", "number"):
        _validate_number(value, schema, path, errs)
    elif actual == "array":
        _validate_array(value, schema, path, errs)
    elif actual == "object":
        _validate_object(value, schema, path, errs)

    for sub in schema.get("allOf") or ():
        _validate(value, sub, path, errs)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            passing = sum(1 for sub in options if not validate(value, sub, path))
            if passing == 0 or (key == "oneOf" and passing > 1):
                what = "any of" if key == "anyOf" else "exactly one of"
                errs.append(
                    errors.invalid(path, value, f"{path} in body must match {what} the schemas")
                )
    if "not" in schema and not validate(value, schema["not"], path):
        errs.append(errors.invalid(path, value, f"{path} in body must not match the schema"))


def _validate_string(value: str, schema: Schema, path: str, errs: list[FieldError]) -> None:
    length = len(value)
    if "maxLength" in schema and length > schema["maxLength"]:
        limit = int(schema["maxLength"])
        unit = "byte" if limit == 1 else "bytes"
        errs.append(
            FieldError("FieldValueTooLong", path, "", f"may not be more than {limit} {unit}")
        )
    if "minLength" in schema and length < schema["minLength"]:
        errs.append(
            errors.invalid(
                path, value, f"{path} in body should be at least {schema['minLength']} chars long"
            )
        )
    if "pattern" in schema:
        regex = _regex(schema["pattern"])
        if regex is not None and not regex.search(value):
            errs.append(
                errors.invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )
    check = FORMATS.get(schema.get("format", ""))
    if check is not None and not check(value):
        errs.append(
            FieldError(
                "FieldValueTypeInvalid",
                path,
                value,
                f"{path} in body must be of type {schema['format']}: {json.dumps(value)}",
            )
        )


def _validate_number(value: float, schema: Schema, path: str, errs: list[FieldError]) -> None:
    if "minimum" in schema:
        low, exclusive = schema["minimum"], bool(schema.get("exclusiveMinimum"))
        if value < low or (exclusive and value == low):
            words = "greater than" if exclusive else "greater than or equal to"
            errs.append(
                errors.invalid(
                    path, value, f"{path} in body should be {words} {_bound(low, value)}"
                )
            )
    if "maximum" in schema:
        high, exclusive = schema["maximum"], bool(schema.get("exclusiveMaximum"))
        if value > high or (exclusive and value == high):
            words = "less than" if exclusive else "less than or equal to"
            errs.append(
                errors.invalid(
                    path, value, f"{path} in body should be {words} {_bound(high, value)}"
                )
            )
    factor = schema.get("multipleOf")
    if factor and (value / factor) != int(value / factor):
        errs.append(
            errors.invalid(
                path, value, f"{path} in body should be a multiple of {_bound(factor, value)}"
            )
        )


def _validate_array(value: list[Any], schema: Schema, path: str, errs: list[FieldError]) -> None:
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", errs)
    if "minItems" in schema and len(value) < schema["minItems"]:
        errs.append(
            errors.invalid(
                path, len(value), f"{path} in body should have at least {schema['minItems']} items"
            )
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        limit = int(schema["maxItems"])
        errs.append(
            FieldError(
                "FieldValueTooMany",
                path,
                len(value),
                f"must have at most {limit} item{'s' if limit != 1 else ''}",
            )
        )
    if schema.get("uniqueItems"):
        seen: list[str] = []
        for item in value:
            key = json.dumps(item, sort_keys=True)
            if key in seen:
                errs.append(
                    errors.invalid(path, "", f"{path} in body shouldn't contain duplicates")
                )
                break
            seen.append(key)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen_set: set[str] = set()
        for i, item in enumerate(value):
            key = json.dumps(item, sort_keys=True)
            if key in seen_set:
                errs.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", item))
            seen_set.add(key)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_map: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            ident = {k: item.get(k) for k in keys if k in item}
            key = json.dumps(ident, sort_keys=True)
            if key in seen_map:
                errs.append(FieldError("FieldValueDuplicate", f"{path}[{i}]", ident))
            seen_map.add(key)


def _validate_object(value: Body, schema: Schema, path: str, errs: list[FieldError]) -> None:
    for name in schema.get("required") or ():
        if name not in value:
            errs.append(errors.required(join(path, name)))
    props: Schema = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, child in value.items():
        if not path and key in ("apiVersion", "kind", "metadata"):
            continue
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        if sub is not None:
            _validate(child, sub, join(path, key), errs)
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errs.append(
            errors.invalid(
                path,
                len(value),
                f"{path} in body should have at least {schema['minProperties']} properties",
            )
        )
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errs.append(
            FieldError(
                "FieldValueTooMany",
                path,
                len(value),
                f"must have at most {schema['maxProperties']} items",
            )
        )


# Schema checks at CRD admission -----------------------------------------------------------


def check_structural(schema: Any, path: str) -> list[FieldError]:
    """The subset of kube's structural-schema rules that catches real mistakes early."""
    errs: list[FieldError] = []
    if not isinstance(schema, dict):
        return [errors.required(path, "schemas are required")]
    _check_node(schema, path, errs, root=True)
    return errs


def _check_node(schema: Schema, path: str, errs: list[FieldError], *, root: bool = False) -> None:
    typ = schema.get("type")
    if root and typ != "object":
        errs.append(
            FieldError(
                "FieldValueNotSupported", f"{path}.type", typ or "", 'supported values: "object"'
            )
        )
    if schema.get("uniqueItems") is True:
        errs.append(
            errors.forbidden_field(
                f"{path}.uniqueItems",
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        )
    if (
        not typ
        and not schema.get("x-kubernetes-int-or-string")
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and not root
        and ("properties" in schema or "items" in schema)
    ):
        errs.append(
            errors.required(f"{path}.type", "must not be empty for specified object fields")
        )
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            _check_node(sub, f"{path}.properties[{key}]", errs)
    if isinstance(schema.get("items"), dict):
        _check_node(schema["items"], f"{path}.items", errs)
    if isinstance(schema.get("additionalProperties"), dict):
        _check_node(schema["additionalProperties"], f"{path}.additionalProperties", errs)
