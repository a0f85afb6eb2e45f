"""The lab consumer asks librdkafka nothing inside close(): its revoke callback there reports
what it knew last (a memberid() asked from that callback can block until the process is killed:
measured with librdkafka 2.16, 4 closes in 48 hung)."""

from __future__ import annotations

import io
from typing import Any

from confluent_kafka import TopicPartition as KafkaPartition

from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.reports import ReportEvent
from rebalancer_lab.consumer import LabConsumer
from rebalancer_lab.consumer_settings import load_settings


class ClosingConsumer:
    """Stands in for the confluent-kafka Consumer: close() raises the revoke callback, as
    librdkafka does, and every question asked of it meanwhile is written down."""

    def __init__(self, lab: LabConsumer) -> None:
        self.lab = lab
        self.closing = False
        self.asked_while_closing: list[str] = []

    def memberid(self) -> str:
        if self.closing:
            self.asked_while_closing.append("memberid")
        return "member-1"

    def consumer_group_metadata(self) -> Any:
        if self.closing:
            self.asked_while_closing.append("consumer_group_metadata")
        return None

    def unassign(self) -> None:
        pass

    def close(self) -> None:
        self.closing = True
        self.lab._on_revoke(self, [KafkaPartition("orders", 0)])  # type: ignore[arg-type]


class Reports:
    def __init__(self) -> None:
        self.sent: list[tuple[ReportEvent | str, str, int]] = []

    def report(
        self, event: ReportEvent | str, *, member_id: str, generation: int, **_: Any
    ) -> None:
        self.sent.append((event, member_id, generation))

    def close(self, timeout: float = 3.0) -> None:
        pass


def test_close_reports_the_revoke_without_asking_the_consumer() -> None:
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "KAFKA_GROUP_ID": "orders",
        "KAFKA_GROUP_INSTANCE_ID": "orders-0",
        "KAFKA_TOPICS": "orders",
        "POD_NAME": "orders-0",
        "REBALANCER_REPORT_URL": "http://127.0.0.1:9/v1/reports",
    }
    out = io.StringIO()
    lab = LabConsumer(load_settings(env), out=out)
    real = lab.consumer
    stand_in = ClosingConsumer(lab)
    reports = Reports()
    assert lab.reporter is not None
    lab.reporter.close(timeout=0)
    lab.reporter = reports  # type: ignore[assignment]
    lab.consumer = stand_in  # type: ignore[assignment]
    lab.member_id, lab.generation = "member-1", 4
    lab.owned = {TopicPartition("orders", 0)}
    try:
        lab.close()
    finally:
        real.close()
    assert stand_in.asked_while_closing == []
    assert reports.sent[0] == (ReportEvent.REVOKED, "member-1", 4)
    assert reports.sent[-1] == (ReportEvent.STOPPED, "member-1", 4)
    assert "revoked generation=4" in out.getvalue()
