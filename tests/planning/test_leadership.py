"""Who leads, from kopf's peering status: the same rule kopf pauses replicas by."""

from __future__ import annotations

import datetime

import pytest

from rebalancer.planning.leadership import leads, peer_entries, priority_for_start

NOW = 1_800_000_000.0


def entry(priority: int, seen_ago: float, lifetime: int = 10) -> dict[str, object]:
    seen = datetime.datetime.fromtimestamp(NOW - seen_ago, datetime.UTC)
    return {"priority": priority, "lifetime": lifetime, "lastseen": seen.isoformat()}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"a": entry(5, 1)}, True),  # alone
        ({"a": entry(5, 1), "b": entry(3, 1)}, True),  # highest live
        ({"a": entry(3, 1), "b": entry(5, 1)}, False),  # a higher one is live
        ({"a": entry(3, 1), "b": entry(5, 11)}, True),  # the higher one is dead
        ({"a": entry(5, 1), "b": entry(5, 1)}, False),  # a tie: kopf pauses both
        ({"a": entry(5, 11)}, False),  # own entry dead (a stalled keep-alive)
        ({"b": entry(5, 1)}, False),  # not in the peering yet
        ({"a": entry(5, 1), "b": "garbage", "c": {"priority": 9}}, True),  # not kopf's shape
        (None, False),
    ],
)
def test_leads(status: dict[str, object] | None, expected: bool) -> None:
    assert leads(peer_entries(status), "a", NOW) is expected


def test_the_earlier_start_ranks_higher_and_the_tail_breaks_ties() -> None:
    assert priority_for_start(100.0, 0) > priority_for_start(100.001, 999)
    assert priority_for_start(100.0, 1) != priority_for_start(100.0, 2)
    with pytest.raises(ValueError, match="tail"):
        priority_for_start(100.0, 1000)


def test_kopf_naive_timestamps_are_utc() -> None:
    status = {"a": {"priority": 0, "lifetime": 10, "lastseen": "2027-01-15T08:00:00"}}
    (found,) = peer_entries(status)
    assert found.deadline == NOW + 10
