"""Whether a subscription pattern can be used: it compiles and cannot backtrack for minutes.

The CRD cannot check that a regex compiles or how it backtracks; the spec model
(consumer_group_spec.TopicSubscriptionSpec) runs this on spec.subscription.pattern.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

MAX_PATTERN_LENGTH = 1024
MAX_OPEN_REPEATS = 4
# Nested quantifiers such as (a+)+ backtrack exponentially in Python's re and in librdkafka's
# regex engine alike; refusing them up front keeps one bad resource from stalling a consumer.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:[^()\\]|\\.)*\)\s*[+*{]")
# The textual check above misses nesting through inner groups, ((a)+)+, and alternation under a
# repetition, (a|a)*: both took over a second on 25 characters and run for hours on a 249-character
# topic name, inside the observer's event loop. The parse tree shows both shapes whatever the
# spelling. re._parser has no stubs, hence the untyped import.
_SRE: Any = importlib.import_module("re._parser")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def check_pattern(pattern: str) -> str | None:
    """Why a subscription pattern cannot be used, or None when it can."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"is longer than {MAX_PATTERN_LENGTH} characters"
    try:
        re.compile(pattern)
    except re.error as error:
        return f"is not a valid regular expression: {error}"
    if _NESTED_QUANTIFIER.search(pattern):
        return "nests a repeated group inside a repetition, which can backtrack for minutes"
    tree = _SRE.parse(pattern)
    trouble = _backtracking_shape(tree, inside_repeat=False)
    if trouble is None and _open_repeats(tree) > MAX_OPEN_REPEATS:
        # k of them in a row cost n**k steps on a failing name: a*a*a*a*a*! took about a minute
        # on one 249-character topic name, four take 0.2 s.
        trouble = (
            f"has more than {MAX_OPEN_REPEATS} repetitions such as .* or +, which can "
            "backtrack for minutes on a long topic name"
        )
    return trouble


def _open_repeats(items: Any) -> int:
    count = 0
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            low, high, sub = av
            count += int(high > max(low, 1)) + _open_repeats(sub)
        elif name == "BRANCH":
            count += sum(_open_repeats(branch) for branch in av[1])
        elif name == "SUBPATTERN":
            count += _open_repeats(av[-1])
        elif name in {"ASSERT", "ASSERT_NOT"}:
            count += _open_repeats(av[1])
    return count


def _backtracking_shape(items: Any, *, inside_repeat: bool) -> str | None:
    for op, av in items:
        name = str(op)
        children: list[Any] = []
        repeat = False
        if name in _REPEATS:
            low, high, sub = av
            # A fixed count such as (\d{3})+ offers no choice of how to split the input, and
            # an outer ? none of how often to repeat.
            repeat = high != low and high > 1
            if high != low and inside_repeat:
                return "nests a repeated group inside a repetition, which can backtrack for minutes"
            children = [sub]
        elif name == "BRANCH":
            if inside_repeat:
                return (
                    "repeats an alternation such as (a|ab)*, which can backtrack for minutes; "
                    "use a character class or list the topics"
                )
            children = list(av[1])
        elif name == "SUBPATTERN":
            children = [av[-1]]
        elif name in {"ASSERT", "ASSERT_NOT"}:
            children = [av[1]]
        elif name == "GROUPREF_EXISTS":
            children = [branch for branch in av[1:] if branch is not None]
        for child in children:
            trouble = _backtracking_shape(child, inside_repeat=inside_repeat or repeat)
            if trouble is not None:
                return trouble
    return None
