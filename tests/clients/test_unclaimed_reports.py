"""Reports for a Kafka group nobody observes are kept, counted, and named once in the log."""

from __future__ import annotations

import logging

import pytest

from rebalancer import metrics
from rebalancer.clients.receiving import ReportHub
from rebalancer.structs.reports import parse_report


def _report(group: str, host: str = "orders-0") -> dict[str, object]:
    return {
        "version": 1,
        "groupId": group,
        "member": {"clientId": "c", "memberId": "m-1", "instanceId": None, "host": host},
        "event": "heartbeat",
        "generation": 1,
        "protocol": "classic",
        "assignmentStrategy": "cooperative-sticky",
        "partitions": [],
        "timestamp": 100.0,
    }


def _unclaimed() -> float:
    value = metrics.REGISTRY.get_sample_value("rebalancer_member_reports_unclaimed_total")
    return value or 0.0


def test_unobserved_group_is_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    hub = ReportHub()
    before = _unclaimed()
    with caplog.at_level(logging.WARNING, logger="rebalancer.clients.receiving"):
        hub.add(parse_report(_report("typo-group"), 100.0))
        hub.add(parse_report(_report("typo-group", "orders-1"), 100.0))
    assert _unclaimed() == before + 2
    warnings = [r.getMessage() for r in caplog.records if "typo-group" in r.getMessage()]
    assert len(warnings) == 1
    assert "spec.groupId" in warnings[0]
    # Kept for an observer that starts later.
    assert set(hub.book("typo-group").latest) == {"orders-0", "orders-1"}


def test_observed_group_is_not_unclaimed(caplog: pytest.LogCaptureFixture) -> None:
    hub = ReportHub()
    hub.wakeup("orders")
    before = _unclaimed()
    with caplog.at_level(logging.WARNING, logger="rebalancer.clients.receiving"):
        hub.add(parse_report(_report("orders"), 100.0))
    assert _unclaimed() == before
    assert not caplog.records
    assert hub.wakeup("orders").is_set()


def test_forgetting_a_group_lets_it_be_named_again(caplog: pytest.LogCaptureFixture) -> None:
    hub = ReportHub()
    hub.add(parse_report(_report("gone"), 100.0))
    hub.forget("gone")
    with caplog.at_level(logging.WARNING, logger="rebalancer.clients.receiving"):
        hub.add(parse_report(_report("gone"), 100.0))
    assert any("gone" in r.getMessage() for r in caplog.records)
