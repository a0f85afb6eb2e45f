"""Generated ConsumerGroup specs: the parser never crashes, never hangs, and every refusal names
the field to fix."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.operator.reliability.strategies import (
    SLOW_PATTERNS,
    SPEC_FIELDS,
    dotted,
    hostile,
    json_like,
    regex_text,
    related,
    time_limit,
    valid_spec,
    with_value,
)

from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.specs import MAX_PATTERN_LENGTH, check_pattern, parse_spec

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

# A 249-character topic name is the longest Kafka allows; what fails at the end is the worst case.
LONGEST_TOPIC = "a" * 248 + "!"
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse_quickly(raw: object) -> SpecInvalid | None:
    started = time.monotonic()
    try:
        with time_limit(2.0):
            parse_spec(raw)
    except SpecInvalid as error:
        return error
    finally:
        assert time.monotonic() - started < 2.0
    return None


def test_the_base_spec_is_valid() -> None:
    assert parse_quickly(valid_spec()) is None


@FAST
@given(field=st.sampled_from(SPEC_FIELDS), value=hostile)
def test_a_hostile_value_in_any_field_is_refused_by_name_or_accepted(
    field: tuple[str | int, ...], value: object
) -> None:
    error = parse_quickly(with_value(valid_spec(), field, value))
    if error is None:
        return
    name = dotted(field)
    assert error.problems
    for problem in error.problems:
        assert problem.path.startswith("spec"), problem
        assert problem.message and problem.fix, problem
    assert any(related(problem.path, name) for problem in error.problems), (name, error)
    # The summary goes into status and an Event: a 100 kB value must not be copied into it.
    assert len(error.summary()) < 2000, error.summary()[:300]


@FAST
@given(raw=json_like)
def test_any_json_document_is_a_spec_or_a_list_of_problems(raw: object) -> None:
    error = parse_quickly(raw)
    if error is not None:
        assert all(problem.path.startswith("spec") for problem in error.problems)


@FAST
@given(raw=st.dictionaries(st.sampled_from(list(valid_spec())), json_like, max_size=5))
def test_partial_specs_name_each_missing_or_wrong_section(raw: dict[str, object]) -> None:
    error = parse_quickly(raw)
    assert error is not None or {"groupId", "kafka", "subscription", "workload"} <= set(raw)
    if error is not None:
        for section in ("groupId", "kafka", "subscription", "workload"):
            if section not in raw:
                assert any(p.path.startswith(f"spec.{section}") for p in error.problems), section


@pytest.mark.parametrize("pattern", SLOW_PATTERNS)
def test_a_catastrophically_slow_pattern_is_refused_fast(pattern: str) -> None:
    spec = with_value(valid_spec(), ("subscription", "pattern"), pattern)
    started = time.monotonic()
    error = parse_quickly(spec)
    assert time.monotonic() - started < 0.5
    assert error is not None, f"{pattern} accepted"
    assert [p.path for p in error.problems] == ["spec.subscription.pattern"]
    assert "backtrack" in error.problems[0].message


@pytest.mark.parametrize("pattern", ["(unclosed", "*orders", "a{2,1}", "(?P<x>a)(?P<x>b)", "\\"])
def test_an_invalid_pattern_is_refused_with_the_reason(pattern: str) -> None:
    error = parse_quickly(with_value(valid_spec(), ("subscription", "pattern"), pattern))
    assert error is not None
    assert error.problems[0].path == "spec.subscription.pattern"
    assert "not a valid regular expression" in error.problems[0].message


def test_a_very_long_pattern_is_refused_without_compiling_it() -> None:
    pattern = "a" * (MAX_PATTERN_LENGTH + 1)
    error = parse_quickly(with_value(valid_spec(), ("subscription", "pattern"), pattern))
    assert error is not None and "longer than" in error.problems[0].message


@settings(max_examples=600, deadline=None)
@given(pattern=regex_text)
def test_every_accepted_pattern_matches_the_longest_topic_name_quickly(pattern: str) -> None:
    """What check_pattern lets through, the observer runs against every topic of the cluster."""
    with time_limit(1.0):
        trouble = check_pattern(pattern)
    if trouble is not None:
        return
    with time_limit(1.0):
        for topic in (LONGEST_TOPIC, "a" * 249, "aaaaaaaaab" * 24):
            re.match(pattern, topic)
