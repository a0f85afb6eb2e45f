"""Hypothesis strategies of hostile values, and small helpers of the bad-input tests."""

from __future__ import annotations

import copy
import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from hypothesis import strategies as st

HUGE = [2**63, 2**64, 10**30, -(10**30), -(2**63) - 1]

# Values that a user, a script or an attacker could put anywhere in a JSON or YAML document.
huge_numbers = st.sampled_from(HUGE) | st.integers(min_value=-(10**40), max_value=10**40)
negative_numbers = st.integers(max_value=-1) | st.floats(max_value=-1e-9, allow_nan=False)
odd_floats = st.sampled_from([math.nan, math.inf, -math.inf, 0.5, -0.0, 1e308])
unicode_text = st.text(min_size=1, max_size=40)
long_text = st.sampled_from(["a" * 300, "é" * 5000, "x" * 100_000, "🙂" * 2000, "a\x00b", ""])
scalars = (
    huge_numbers
    | negative_numbers
    | odd_floats
    | unicode_text
    | long_text
    | st.booleans()
    | st.none()
)
json_like = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
hostile = (
    scalars | st.lists(scalars, max_size=3) | st.dictionaries(unicode_text, scalars, max_size=2)
)

# Patterns built from the characters that make regular expressions backtrack.
regex_text = st.text(alphabet="a()|*+?{}[].\\^$12,!-w", max_size=24)

# Patterns that backtrack exponentially or with a high polynomial on a 249-character topic name.
SLOW_PATTERNS = [
    r"(a+)+$",
    r"((a)+)+$",
    r"(a|a)*$",
    r"(a|aa)*$",
    r"(\w+\s?)*$",
    r"(.*a){20}$",
    r"(?:a*)*b",
    r"([a-z]+)*!",
    r"(x+x+)+y",
    r".*.*.*.*.*.*.*!",
    r"(?:(?:a)*)*$",
]


def valid_spec(name: str = "orders") -> dict[str, Any]:
    return {
        "groupId": name,
        "kafka": {
            "bootstrapServers": ["kafka-0.kafka:9092"],
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "usernameSecretRef": {"name": "creds", "key": "username"},
                "passwordSecretRef": {"name": "creds", "key": "password"},
            },
        },
        "subscription": {"topics": [name]},
        "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
        "policy": {
            "protocol": "auto",
            "observe": {"intervalSeconds": 10, "reportTtlSeconds": 60},
            "history": {"enabled": True},
            "enforce": {"scheduleSeconds": 600},
        },
    }


# Every field of valid_spec() a user can set, as a path of keys and list indexes.
SPEC_FIELDS: list[tuple[str | int, ...]] = [
    ("groupId",),
    ("kafka",),
    ("kafka", "bootstrapServers"),
    ("kafka", "bootstrapServers", 0),
    ("kafka", "profile"),
    ("kafka", "requestTimeoutSeconds"),
    ("kafka", "sasl"),
    ("kafka", "sasl", "mechanism"),
    ("kafka", "sasl", "usernameSecretRef"),
    ("kafka", "sasl", "passwordSecretRef", "name"),
    ("kafka", "sasl", "passwordSecretRef", "key"),
    ("kafka", "tls"),
    ("subscription",),
    ("subscription", "topics"),
    ("subscription", "topics", 0),
    ("subscription", "pattern"),
    ("workload",),
    ("workload", "kind"),
    ("workload", "name"),
    ("workload", "container"),
    ("policy",),
    ("policy", "protocol"),
    ("policy", "observe"),
    ("policy", "observe", "intervalSeconds"),
    ("policy", "observe", "reportTtlSeconds"),
    ("policy", "history", "enabled"),
    ("policy", "enforce"),
    ("policy", "enforce", "scheduleSeconds"),
    ("policy", "enforce", "requestToken"),
    ("policy", "settings"),
    ("policy", "brokerDelay"),
]


def dotted(path: tuple[str | int, ...], root: str = "spec") -> str:
    text = root
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def with_value(base: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """A copy of BASE with the field at PATH set to VALUE (parents created as needed)."""
    body = copy.deepcopy(base)
    node: Any = body
    for part in path[:-1]:
        if isinstance(part, int):
            node = node[part]
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return body
    node[path[-1]] = value
    if path == ("subscription", "pattern"):
        body["subscription"].pop("topics", None)
    return body


def related(problem_path: str, field_path: str) -> bool:
    """Whether a problem reported at PROBLEM_PATH is about FIELD_PATH (itself, a parent, a child,
    or a sibling rule such as exactly-one-of)."""
    parent = field_path.rsplit(".", 1)[0].split("[", 1)[0]
    return (
        problem_path == field_path
        or problem_path.startswith(field_path)
        or field_path.startswith(problem_path)
        or problem_path.startswith(parent)
    )


class TimedOut(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimedOut after SECONDS; Python's regex engine checks signals while it backtracks."""

    def expire(_signum: int, _frame: FrameType | None) -> None:
        raise TimedOut(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
