"""Label and field selectors, parsed with kube's grammar and error messages."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.raw_fields import field_at

from . import errors

Body = dict[str, Any]


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !exists, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        try:
            number, bound = int(value or ""), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == "gt" else number < bound


_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SET_TERM = re.compile(r"^\s*(!?)\s*([^\s!=<>(),]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_CMP_TERM = re.compile(r"^\s*([^\s!=<>(),]+)\s*(==|=|!=|>|<)\s*([^\s,]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses (`a in (x,y),b` is two terms)."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _bad(why: str) -> errors.ApiError:
    return errors.bad_request(f"unable to parse requirement: {why}")


def _check_key(key: str) -> None:
    if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise _bad(
            f'<nil>: Invalid value: "{key}": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character"
        )


def _check_value(value: str) -> None:
    if not _LABEL_VALUE.match(value) or len(value) > 63:
        raise _bad(
            f'values[0]: Invalid value: "{value}": a valid label must be an empty '
            "string or consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )


def parse_labels(text: str | None) -> list[Requirement]:
    if not text or not text.strip():
        return []
    result: list[Requirement] = []
    for term in _split_terms(text):
        if not term.strip():
            raise errors.bad_request(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        if match := _CMP_TERM.match(term):
            key, op, value = match.groups()
            _check_key(key)
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", value):
                    raise _bad(
                        f"for 'Gt', 'Lt' operators, the value must be an integer: \"{value}\""
                    )
                result.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
                continue
            _check_value(value)
            result.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
        elif match := _SET_TERM.match(term):
            negated, key, op, values = match.groups()
            _check_key(key)
            if op:
                if negated:
                    raise _bad(f"found '(', expected: ',' or end of string in {term.strip()!r}")
                items = tuple(v.strip() for v in values.split(",") if v.strip())
                for item in items:
                    _check_value(item)
                result.append(Requirement(key, op, items))
            else:
                result.append(Requirement(key, "!exists" if negated else "exists"))
        else:
            raise _bad(
                f"found '{term.strip()}', expected: identifier, '!', 'in', 'notin', "
                "'=', '==', '!=', 'gt', 'lt' or end of string"
            )
    return result


def labels_match(requirements: list[Requirement], obj: Body) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True)
class FieldTerm:
    key: str
    value: str
    negated: bool


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_fields(
    text: str | None, supported: Mapping[str, Callable[[Body], Any]]
) -> list[FieldTerm]:
    if not text or not text.strip():
        return []
    terms: list[FieldTerm] = []
    for part in re.split(r"(?<!\\),", text):
        match = re.match(r"^\s*([^=!]+?)\s*(==|=|!=)(.*)$", part)
        if not match:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        key, op, value = match.groups()
        if key not in supported:
            raise errors.bad_request(f"field label not supported: {key}")
        terms.append(FieldTerm(key, _unescape(value.strip()), op == "!="))
    return terms


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fields_match(
    terms: list[FieldTerm], obj: Body, supported: Mapping[str, Callable[[Body], Any]]
) -> bool:
    for term in terms:
        actual = _render(supported[term.key](obj))
        if (actual == term.value) == term.negated:
            return False
    return True


def path_getter(path: str) -> Callable[[Body], Any]:
    """A getter for a dotted path, the form field labels take (`involvedObject.kind`)."""
    parts = tuple(path.split("."))

    def get(obj: Body) -> Any:
        return field_at(obj, *parts)

    return get


#: Field labels every resource supports.
COMMON_FIELDS: dict[str, Callable[[Body], Any]] = {
    "metadata.name": path_getter("metadata.name"),
    "metadata.namespace": path_getter("metadata.namespace"),
}
