"""Reading one block of a ConsumerGroup spec: every problem collected with its field path and fix.

The policy parsers (structs/consumer_settings_policy.py, structs/broker_delay_policy.py) share it,
so that a wrong type or an out-of-range number is told the same way wherever it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from rebalancer.structs.problems import FieldProblem

E = TypeVar("E", bound=StrEnum)


class FieldReader:
    """Collects the problems of one block (`path`) instead of stopping at the first."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[FieldProblem] = []

    def fail(self, key: str, message: str, fix: str) -> None:
        self.problems.append(FieldProblem(f"{self.path}.{key}" if key else self.path, message, fix))

    def mapping(self, raw: object, key: str) -> Mapping[str, object]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.fail(key, "must be an object", f"write {self.path}.{key} as a mapping")
            return {}
        return raw

    def integer(
        self, raw: Mapping[str, object], key: str, default: int | None, low: int, high: int
    ) -> int | None:
        value = raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, "must be an integer", "use a number of milliseconds")
            return default
        if not low <= value <= high:
            self.fail(key, f"must be between {low} and {high}, got {value}", "use a value in range")
            return default
        return value

    def boolean(self, raw: Mapping[str, object], key: str, default: bool) -> bool:
        value = raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, "must be true or false", "use a bool")
            return default
        return value

    def choice(self, raw: Mapping[str, object], key: str, enum: type[E], default: E) -> E:
        value = raw.get(key)
        if value is None:
            return default
        allowed = [member.value for member in enum]
        if value not in allowed:
            self.fail(key, f"unsupported value {value!r}", "use one of: " + ", ".join(allowed))
            return default
        return enum(value)

    def string(self, raw: Mapping[str, object], key: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(key, "must be a string", "quote the value")
            return None
        return value


def required_int(reader: FieldReader, raw: Mapping[str, object], key: str, *args: int) -> int:
    default, low, high = args
    value = reader.integer(raw, key, default, low, high)
    return default if value is None else value
