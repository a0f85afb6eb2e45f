"""The part of kubectl's JSONPath that printer columns use.

Supports `.field`, `['field']`, `[n]`, `[a:b]`, `[*]`, `.*`, `..field` and filters such as
`[?(@.type=="Ready")]` with ==, !=, <, <=, >, >= or a bare existence test.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

Step = Callable[[list[Any]], list[Any]]

_TOKEN = re.compile(
    r"""\.\.(?P<deep>[A-Za-z0-9_$-]+)
      | \.(?P<field>[A-Za-z0-9_$-]+)
      | \.\*(?P<star>)
      | \[\s*\?\(\s*(?P<filter>.*?)\s*\)\s*\]
      | \[\s*(?P<quoted>'[^']*'|"[^"]*")\s*\]
      | \[\s*(?P<slice>-?\d*\s*:\s*-?\d*)\s*\]
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*\*\s*\](?P<all>)
    """,
    re.VERBOSE,
)
_FILTER = re.compile(r"^@((?:\.[A-Za-z0-9_$-]+|\['[^']*'\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+))?$")


class JSONPathError(ValueError):
    pass


def _children(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if isinstance(value, dict):
            out.extend(value.values())
        elif isinstance(value, list):
            out.extend(value)
    return out


def _descendants(value: Any) -> list[Any]:
    out = [value]
    for child in _children([value]):
        out.extend(_descendants(child))
    return out


def _literal(text: str) -> Any:
    text = text.strip()
    if text[:1] in ("'", '"') and text[-1:] == text[:1]:
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    try:
        return bool(
            {
                "<": left < right,
                ">": left > right,
                "<=": left <= right,
                ">=": left >= right,
            }[op]
        )
    except TypeError:
        return False


def _filter_step(expression: str) -> Step:
    match = _FILTER.match(expression)
    if not match:
        raise JSONPathError(f"unsupported filter: {expression}")
    sub_path, op, literal = match.groups()
    getter = compile_path(sub_path) if sub_path else (lambda v: [v])
    wanted = _literal(literal) if op else None

    def step(values: list[Any]) -> list[Any]:
        kept = []
        for item in _children(values):
            found = getter(item)
            if op is None:
                if found:
                    kept.append(item)
            elif found and _compare(found[0], op, wanted):
                kept.append(item)
        return kept

    return step


def _field_step(name: str) -> Step:
    return lambda values: [v[name] for v in values if isinstance(v, dict) and name in v]


def _deep_step(name: str) -> Step:
    return lambda values: [
        d[name] for v in values for d in _descendants(v) if isinstance(d, dict) and name in d
    ]


def _index_step(index: int) -> Step:
    def step(values: list[Any]) -> list[Any]:
        out = []
        for value in values:
            if isinstance(value, list) and -len(value) <= index < len(value):
                out.append(value[index])
        return out

    return step


def _slice_step(text: str) -> Step:
    start_text, end_text = (p.strip() for p in text.split(":"))
    start = int(start_text) if start_text else None
    end = int(end_text) if end_text else None
    return lambda values: [x for v in values if isinstance(v, list) for x in v[start:end]]


@functools.lru_cache(maxsize=256)
def compile_path(path: str) -> Callable[[Any], list[Any]]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[Step] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            raise JSONPathError(f"unrecognized JSONPath at {text[position:]!r} in {path!r}")
        position = match.end()
        group = match.lastgroup
        value = match.group(group) if group else ""
        if group == "deep":
            steps.append(_deep_step(value))
        elif group == "field":
            steps.append(_field_step(value))
        elif group == "quoted":
            steps.append(_field_step(value[1:-1]))
        elif group in ("star", "all"):
            steps.append(_children)
        elif group == "filter":
            steps.append(_filter_step(value))
        elif group == "slice":
            steps.append(_slice_step(value))
        elif group == "index":
            steps.append(_index_step(int(value)))

    def evaluate(obj: Any) -> list[Any]:
        values = [obj]
        for step in steps:
            values = step(values)
        return values

    return evaluate


def find(obj: Any, path: str) -> list[Any]:
    return compile_path(path)(obj)
