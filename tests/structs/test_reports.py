from __future__ import annotations

from typing import Any

import pytest

from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.reports import ReportBook, ReportEvent, ReportInvalid, parse_report


def report(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "version": 1,
        "groupId": "orders",
        "member": {"clientId": "c", "memberId": "m-1", "instanceId": None, "host": "orders-0"},
        "event": "assigned",
        "generation": 3,
        "protocol": "classic",
        "assignmentStrategy": "cooperative-sticky",
        "partitions": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}],
        "lag": 7,
        "timestamp": 100.0,
    }
    body.update(overrides)
    return body


def test_valid_report_is_parsed() -> None:
    parsed = parse_report(report(), received_at=101.0)
    assert parsed.identity == "orders-0"
    assert parsed.event is ReportEvent.ASSIGNED
    assert parsed.partitions == (TopicPartition("orders", 0), TopicPartition("orders", 1))
    assert parsed.received_at == 101.0


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"groupId": None}, "groupId"),
        ({"event": "exploded"}, "event"),
        ({"generation": "three"}, "generation"),
        ({"generation": -7}, "generation"),
        ({"partitions": [{"topic": "t"}]}, "partitions[0]"),
        ({"partitions": "t-0"}, "partitions"),
        ({"member": "orders-0"}, "member"),
        ({"member": {}}, "member.host"),
        ({"version": 2}, "version"),
        ({"timestamp": "now"}, "timestamp"),
        ({"lag": 1.5}, "lag"),
    ],
)
def test_bad_reports_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ReportInvalid) as caught:
        parse_report(report(**overrides), received_at=1.0)
    assert field in [problem.path for problem in caught.value.problems]


def test_non_object_body_is_refused() -> None:
    with pytest.raises(ReportInvalid, match="body"):
        parse_report([1, 2], received_at=1.0)


def test_book_tracks_generations_and_expires_members() -> None:
    book = ReportBook()
    book.add(parse_report(report(), received_at=10.0))
    book.add(parse_report(report(member={"host": "orders-1"}), received_at=11.0))
    book.add(parse_report(report(generation=4), received_at=20.0))
    sightings = book.generations_after(2)
    assert [(s.generation, s.first_seen, len(s.members)) for s in sightings] == [
        (3, 10.0, 2),
        (4, 20.0, 1),
    ]
    assert [s.generation for s in book.generations_after(3)] == [4]
    live = book.live_members(now=40.0, ttl=25.0)
    assert [member.host for member in live] == ["orders-0"]


def test_stopped_members_are_not_live() -> None:
    book = ReportBook()
    book.add(parse_report(report(), received_at=10.0))
    book.add(parse_report(report(event="stopped", partitions=[]), received_at=12.0))
    assert book.live_members(now=13.0, ttl=60.0) == []
