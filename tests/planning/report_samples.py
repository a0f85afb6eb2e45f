"""Member reports as a lab consumer sends them, for the report-book and history tests."""

from __future__ import annotations

from collections.abc import Sequence

from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.reports import MemberReport, ReportEvent


def member_report(
    host: str,
    generation: int,
    at: float,
    event: ReportEvent = ReportEvent.ASSIGNED,
    *,
    partitions: Sequence[TopicPartition] = (),
    member_id: str | None = None,
    instance_id: str | None = None,
    received_after: float = 0.0,
) -> MemberReport:
    return MemberReport(
        group_id="orders",
        host=host,
        client_id=host,
        member_id=member_id or f"{host}-1",
        instance_id=instance_id,
        event=event,
        generation=generation,
        protocol="classic",
        assignment_strategy="cooperative-sticky",
        partitions=tuple(partitions),
        lag=None,
        timestamp=at,
        received_at=at + received_after,
    )
