"""The one RFC 3339 reader and writer: "Z", offsets, fractions, and no offset taken as UTC."""

from __future__ import annotations

import pytest

from rebalancer.structs.times import format_rfc3339, parse_rfc3339, read_rfc3339

NOON = 1772366400.0  # 2026-03-01T12:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T12:00:00Z", NOON),
        ("2026-03-01T12:00:00.250Z", NOON + 0.25),
        ("2026-03-01T12:00:00+00:00", NOON),
        ("2026-03-01T14:00:00+02:00", NOON),
        ("2026-03-01T12:00:00.123456+00:00", NOON + 0.123456),
        ("2026-03-01T12:00:00", NOON),
    ],
)
def test_every_writer_s_form_reads_as_the_same_moment(text: str, expected: float) -> None:
    assert parse_rfc3339(text) == pytest.approx(expected)
    assert read_rfc3339(text) == pytest.approx(expected)


def test_what_is_not_a_time_raises_or_reads_as_none() -> None:
    with pytest.raises(ValueError):
        parse_rfc3339("yesterday")
    for value in (None, "", "yesterday", 1772366400, True, b"2026-03-01T12:00:00Z"):
        assert read_rfc3339(value) is None


def test_times_are_written_in_utc_with_z_in_seconds_or_milliseconds() -> None:
    assert format_rfc3339(NOON + 0.25) == "2026-03-01T12:00:00Z"
    assert format_rfc3339(NOON + 0.25, milliseconds=True) == "2026-03-01T12:00:00.250Z"
    assert parse_rfc3339(format_rfc3339(NOON + 0.25, milliseconds=True)) == NOON + 0.25
