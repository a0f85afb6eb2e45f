"""Scenario inputs of the coordinator simulator: the broker, the members and what happens to them.

All durations are milliseconds, named like the Kafka settings they stand for. Every class is a
frozen dataclass so a scenario can be built once, compared, hashed and replayed: the same scenario
(seed included) always gives the same result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rebalancer.simulation.distributions import Staggered, StartTimes
from rebalancer.structs.brokers import BrokerProfile

# round-robin and sticky run the EAGER protocol (every member revokes everything on each
# rebalance); cooperative-sticky runs KIP-429's incremental protocol.
Assignor = Literal["round-robin", "sticky", "cooperative-sticky"]
ASSIGNORS: tuple[Assignor, ...] = ("round-robin", "sticky", "cooperative-sticky")

# How pattern-subscribed members learn of a new matching topic (KAFKA-7126):
# pre-fix   each member notices at its own metadata refresh and rejoins, one rebalance each;
# fixed     the client refreshes metadata when a rebalance starts (Kafka 2.0.1 / 2.1.0), so the
#           first notice brings every member in with the new topic;
# enforced  the operator enforces one rebalance as the topic appears (members refresh on rejoin
#           as fixed clients do), instead of waiting up to metadata.max.age.ms for a first notice.
TopicNotice = Literal["pre-fix", "fixed", "enforced"]
TOPIC_NOTICES: tuple[TopicNotice, ...] = ("pre-fix", "fixed", "enforced")

# leave: a clean close that sends LeaveGroup; crash: the process just stops heartbeating.
# Static members never send LeaveGroup (KIP-345), so for them both mean the same.
DepartureKind = Literal["leave", "crash"]


@dataclass(frozen=True)
class CoordinatorSettings:
    """Broker-side timing and the small protocol round trips the model charges for."""

    # group.initial.rebalance.delay.ms (KIP-134).
    initial_rebalance_delay_ms: float = 3000.0
    # From deciding to join until the coordinator holds the JoinGroup: FindCoordinator and, for a
    # new member, the MEMBER_ID_REQUIRED round trip of KIP-394.
    join_latency_ms: float = 100.0
    # From the JoinGroup response until members hold their assignment: the leader's assignment,
    # SyncGroup and the group-metadata write.
    sync_latency_ms: float = 100.0

    def __post_init__(self) -> None:
        _require_non_negative(
            initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
            join_latency_ms=self.join_latency_ms,
            sync_latency_ms=self.sync_latency_ms,
        )


@dataclass(frozen=True)
class ConsumerSettings:
    """Client settings of one member (the classic protocol's consumer configs)."""

    session_timeout_ms: float = 45000.0  # Kafka 3.0+ default (KIP-735); 10000 before
    heartbeat_interval_ms: float = 3000.0
    max_poll_interval_ms: float = 300000.0  # sent as the JoinGroup rebalance timeout
    assignor: Assignor = "round-robin"
    metadata_max_age_ms: float = 300000.0
    # Time the application spends on a batch between poll() calls. The heartbeat thread learns of
    # a rebalance, but the member revokes and sends its JoinGroup only at its next poll(): a
    # uniformly random moment within this. It is why an eager rebalance waits for the slowest.
    processing_ms: float = 500.0

    def __post_init__(self) -> None:
        _require_positive(
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_poll_interval_ms=self.max_poll_interval_ms,
            metadata_max_age_ms=self.metadata_max_age_ms,
        )
        _require_non_negative(processing_ms=self.processing_ms)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below session_timeout_ms")
        if self.assignor not in ASSIGNORS:
            raise ValueError(f"unknown assignor {self.assignor!r}")


@dataclass(frozen=True)
class Departure:
    """A member stops at `at_ms`; with `restart_after_ms` a new process takes its place."""

    at_ms: float
    kind: DepartureKind = "crash"
    restart_after_ms: float | None = None

    def __post_init__(self) -> None:
        _require_non_negative(at_ms=self.at_ms)
        if self.restart_after_ms is not None:
            _require_non_negative(restart_after_ms=self.restart_after_ms)


@dataclass(frozen=True)
class MemberPlan:
    """One consumer process slot. Unset fields come from the scenario."""

    name: str | None = None  # default member-<index>
    start_ms: float | None = None  # default: drawn from Scenario.starts
    instance_id: str | None = None  # group.instance.id: a static member (KIP-345)
    consumer: ConsumerSettings | None = None
    departures: tuple[Departure, ...] = ()


@dataclass(frozen=True)
class TopicCreation:
    """A new topic matching every member's subscription pattern appears at `at_ms`."""

    at_ms: float
    partitions: int = 10
    notice: TopicNotice = "pre-fix"

    def __post_init__(self) -> None:
        _require_non_negative(at_ms=self.at_ms)
        _require_positive(partitions=self.partitions)
        if self.notice not in TOPIC_NOTICES:
            raise ValueError(f"unknown topic notice {self.notice!r}")


@dataclass(frozen=True)
class Scenario:
    """A whole run: broker profile, settings, members and events."""

    members: tuple[MemberPlan, ...]
    starts: StartTimes = field(default_factory=Staggered)
    profile: BrokerProfile = BrokerProfile.APACHE_KAFKA
    coordinator: CoordinatorSettings = field(default_factory=CoordinatorSettings)
    consumer: ConsumerSettings = field(default_factory=ConsumerSettings)
    partitions: int = 12
    topic_creation: TopicCreation | None = None
    seed: int = 0
    # Nothing after this is simulated: a guard for scenarios that never settle.
    horizon_ms: float = 24 * 3600 * 1000.0

    def __post_init__(self) -> None:
        # Checked inline (as _require_positive would): every run builds a Scenario.
        if self.partitions <= 0:
            raise ValueError("partitions must be positive")
        if self.horizon_ms <= 0:
            raise ValueError("horizon_ms must be positive")
        names = [plan.name for plan in self.members if plan.name is not None]
        instances = [plan.instance_id for plan in self.members if plan.instance_id is not None]
        if len(set(names)) != len(names):
            raise ValueError("member names must be unique")
        if len(set(instances)) != len(instances):
            raise ValueError("group.instance.id values must be unique")


def plan_members(
    count: int, *, static: bool = False, consumer: ConsumerSettings | None = None
) -> tuple[MemberPlan, ...]:
    """`count` identical members named member-0.. (static ones use the name as instance id)."""
    return tuple(
        MemberPlan(
            name=f"member-{index}",
            instance_id=f"member-{index}" if static else None,
            consumer=consumer,
        )
        for index in range(count)
    )


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive")


def _require_non_negative(**values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must not be negative")
