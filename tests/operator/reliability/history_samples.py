"""A few history records, written the way the operator writes them."""

from __future__ import annotations

from rebalancer.structs.history import RebalanceCause, RebalanceEvent


def sample_events(namespace: str = "default", at: float = 1714521600.0) -> list[RebalanceEvent]:
    return [
        RebalanceEvent(
            namespace=namespace,
            name="orders",
            group_id="orders",
            cluster="kafka-0:9092",
            generation=generation,
            previous_generation=generation - 1,
            cause=RebalanceCause.MEMBER_JOINED,
            detected_at=at + generation,
            started_at=at + generation - 1.0,
            members=3,
            joined=("orders-2",),
            left=(),
            source="member-reports",
            state="Stable",
        )
        for generation in (1, 2, 3)
    ]
