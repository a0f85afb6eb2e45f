"""What every broker profile shares: the run loop and the members' (clients') behaviour.

The client side follows the Java consumer of Kafka 2.x-3.x (ConsumerCoordinator and
AbstractCoordinator): a member learns of a rebalance from its next heartbeat response
(REBALANCE_IN_PROGRESS) and rejoins at its application's next poll(); under an eager assignor it
revokes everything before its JoinGroup (onJoinPrepare), under cooperative-sticky it keeps its
partitions and, after the SyncGroup, revokes only those that moved and rejoins at once (KIP-429).
A pattern-subscribed member whose subscription grew since its last JoinGroup rejoins (KAFKA-7126;
the fix, apache/kafka PR #5408, refreshes metadata at the start of a rebalance). Subclasses model
the coordinator.
"""

from __future__ import annotations

import heapq
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from rebalancer.simulation.agendas import Agenda
from rebalancer.simulation.consumers import Consumer, Phases
from rebalancer.simulation.events import (
    Depart,
    Enforce,
    Event,
    HeartbeatNotice,
    JoinArrive,
    MetadataRefresh,
    Rejoin,
    Start,
    TopicCreated,
)
from rebalancer.simulation.ledgers import Ledger
from rebalancer.simulation.results import Cause, SimulationResult
from rebalancer.simulation.scenarios import Assignor, DepartureKind, Scenario

# Reasons to rejoin that change the member's JoinGroup metadata (subscription or, under
# cooperative-sticky, owned partitions): a coordinator rebalances a Stable group for these.
METADATA_CHANGES: frozenset[Cause] = frozenset(
    {"metadata-change", "cooperative-follow-up", "enforced"}
)

# A scenario that has not settled after this many events is a modelling bug, not a workload.
_MAX_EVENTS = 5_000_000


Handler = Callable[[Any, Any], None]
# Which method handles each event type: the members' events here, the coordinator's (timers,
# held responses) in each subclass's COORDINATOR_EVENT_HANDLERS.
MEMBER_EVENT_HANDLERS: dict[type[Event], str] = {
    Start: "on_start",
    Depart: "on_depart",
    JoinArrive: "on_join_arrive",
    HeartbeatNotice: "on_heartbeat_notice",
    Rejoin: "on_rejoin",
    MetadataRefresh: "on_metadata_refresh",
    TopicCreated: "on_topic_created",
    Enforce: "on_enforce",
}
_DISPATCH: dict[type[GroupModel], dict[type[Event], Handler]] = {}


class GroupModel(ABC):
    """One run of one group on one broker profile."""

    COORDINATOR_EVENT_HANDLERS: ClassVar[dict[type[Event], str]] = {}

    def __init__(self, scenario: Scenario, consumers: list[Consumer], rng: random.Random) -> None:
        self.scenario = scenario
        self.rng = rng
        self.settings = scenario.coordinator
        self.consumers = consumers
        self.names = [consumer.name for consumer in consumers]
        self.agenda = Agenda()
        self.ledger = Ledger(scenario.partitions, self.names)
        self.now_ms = 0.0
        self.topic_exists = False
        self.topic_partitions: tuple[int, ...] = ()
        self.own_partitions = tuple(range(scenario.partitions))
        self.cooperative = all(c.settings.assignor == "cooperative-sticky" for c in consumers)
        self.assignor = _group_assignor([c.settings.assignor for c in consumers])

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        self.start_members(self.consumers)
        self.schedule_topic_creation()
        return self.play()

    def start_members(self, consumers: list[Consumer]) -> None:
        """Schedule these members' starts (at their start_ms) and planned departures."""
        for consumer in consumers:
            self.agenda.schedule(consumer.start_ms, Start(consumer.index))
            for departure in consumer.departures:
                self.agenda.schedule(departure.at_ms, Depart(consumer.index, departure))

    def schedule_topic_creation(self) -> None:
        creation = self.scenario.topic_creation
        if creation is not None:
            self.agenda.schedule(creation.at_ms, TopicCreated())
            if creation.notice == "enforced":
                self.agenda.schedule(creation.at_ms, Enforce())

    def release(self, consumers: list[Consumer], at_ms: float) -> None:
        """Start these members `at_ms` plus their start_ms, after a run that has played out.

        For the stagger's next batch: `at_ms` is when the group settled (Ledger.settled_at_ms).
        Nothing the run did after that changed the group (its last events were timers that
        found nothing to do), so the run goes on from `at_ms` as if these starts had been on
        its agenda all along."""
        self.ledger.resume_at(at_ms)
        for consumer in consumers:
            consumer.start_ms += at_ms
        self.start_members(consumers)

    def play(self) -> SimulationResult:
        """Handle the agenda's events until none is left (or the horizon); the result so far."""
        # The hot loop: locals rather than attribute look-ups, and a handler per event type.
        handlers = self.dispatch_table()
        entries = self.agenda.entries
        advance = self.ledger.advance
        horizon_ms = self.scenario.horizon_ms
        pop = heapq.heappop
        for _ in range(_MAX_EVENTS):
            if not entries:
                break
            at_ms, _, _, event = pop(entries)
            if at_ms > horizon_ms:
                break
            advance(at_ms)
            self.now_ms = at_ms
            handlers[type(event)](self, event)
        else:
            raise RuntimeError("the simulation did not settle; is the scenario consistent?")
        return self.ledger.result()

    def handle(self, event: Event) -> None:
        self.dispatch_table()[type(event)](self, event)

    @classmethod
    def dispatch_table(cls) -> dict[type[Event], Handler]:
        """The method that handles each event type (built once per model class)."""
        table = _DISPATCH.get(cls)
        if table is None:
            names = {**MEMBER_EVENT_HANDLERS, **cls.COORDINATOR_EVENT_HANDLERS}
            table = _DISPATCH[cls] = {kind: getattr(cls, name) for kind, name in names.items()}
        return table

    def on_start(self, event: Start) -> None:
        self.start(self.consumers[event.consumer])

    def on_depart(self, event: Depart) -> None:
        departure = event.departure
        self.depart(self.consumers[event.consumer], departure.kind, departure.restart_after_ms)

    def on_join_arrive(self, event: JoinArrive) -> None:
        consumer = self.consumers[event.consumer]
        if consumer.alive and consumer.incarnation == event.incarnation:
            self.receive_join(consumer, event.reason, event.with_topic)

    def on_heartbeat_notice(self, event: HeartbeatNotice) -> None:
        consumer = self.consumers[event.consumer]
        consumer.notice_pending = False
        if (
            consumer.alive
            and consumer.incarnation == event.incarnation
            and consumer.phase is Phases.STABLE
        ):
            self.notice_by_heartbeat(consumer)

    def on_rejoin(self, event: Rejoin) -> None:
        consumer = self.consumers[event.consumer]
        if (
            consumer.alive
            and consumer.incarnation == event.incarnation
            and consumer.phase is Phases.STABLE
        ):
            self.rejoin(consumer, event.reason)

    def on_metadata_refresh(self, event: MetadataRefresh) -> None:
        consumer = self.consumers[event.consumer]
        if consumer.alive and consumer.incarnation == event.incarnation:
            self.refresh_metadata(consumer)

    def on_topic_created(self, event: TopicCreated) -> None:
        self.create_topic()

    def on_enforce(self, event: Enforce) -> None:
        self.enforce()

    @staticmethod
    def is_current(consumer: Consumer, incarnation: int) -> bool:
        return consumer.alive and consumer.incarnation == incarnation

    # -- the members -----------------------------------------------------------------------

    def start(self, consumer: Consumer) -> None:
        if consumer.alive:
            return
        self.ledger.note_start(self.now_ms)
        consumer.alive = True
        consumer.incarnation += 1
        consumer.member_id = None
        consumer.generation = -1
        # A new process fetches metadata before it subscribes, so it sees the topic if it exists.
        consumer.knows_topic = self.topic_exists
        consumer.joined_with_topic = False
        consumer.notice_pending = False
        self.schedule_refresh(consumer)
        consumer.phase = Phases.JOINING
        self.send_join(consumer, "member-join")

    def depart(
        self, consumer: Consumer, kind: DepartureKind, restart_after_ms: float | None
    ) -> None:
        if consumer.alive:
            last_contact_ms = (
                consumer.last_heartbeat_ms(self.now_ms)
                if consumer.phase in (Phases.STABLE, Phases.AWAITING_SYNC)
                else self.now_ms
            )
            consumer.alive = False
            consumer.incarnation += 1
            self.ledger.lose_all(consumer)
            consumer.phase = Phases.OFFLINE
            self.on_departure(consumer, kind, last_contact_ms)
        if restart_after_ms is not None:
            self.agenda.schedule(self.now_ms + restart_after_ms, Start(consumer.index))

    def send_join(self, consumer: Consumer, reason: Cause) -> None:
        if self.topic_exists and self.refreshes_on_rejoin():
            consumer.knows_topic = True
        consumer.joined_with_topic = consumer.knows_topic
        self.agenda.schedule(
            self.now_ms + self.join_latency_ms(consumer),
            JoinArrive(consumer.index, consumer.incarnation, reason, consumer.joined_with_topic),
        )

    def rejoin(self, consumer: Consumer, reason: Cause) -> None:
        if not self.cooperative:
            self.ledger.revoke(consumer, consumer.owned)
        consumer.phase = Phases.JOINING
        self.send_join(consumer, reason)

    def rejoin_as_new_member(self, consumer: Consumer) -> None:
        """UNKNOWN_MEMBER_ID: the coordinator forgot this member; its partitions are lost."""
        self.ledger.lose_all(consumer)
        consumer.member_id = None
        consumer.phase = Phases.JOINING
        self.send_join(consumer, "member-join")

    def deliver(self, consumer: Consumer, partitions: frozenset[int], generation: int) -> None:
        """A member receives its assignment (SyncGroup response) and reacts to it."""
        revoked = consumer.owned - partitions
        if revoked:
            self.ledger.revoke(consumer, revoked)
        self.ledger.hand_over(consumer, partitions)
        consumer.phase = Phases.STABLE
        consumer.generation = generation
        consumer.heartbeat_anchor_ms = self.now_ms
        if self.topic_partitions and not partitions.isdisjoint(self.topic_partitions):
            # The leader's choice adds assigned topics to the subscription and to the joined
            # subscription alike, so an assigned member never rejoins for the topic.
            consumer.knows_topic = consumer.joined_with_topic = True
        if revoked and self.cooperative:
            self.schedule_rejoin(consumer, "cooperative-follow-up")
        elif consumer.knows_topic and not consumer.joined_with_topic:
            self.schedule_rejoin(consumer, "metadata-change")

    def schedule_rejoin(self, consumer: Consumer, reason: Cause, *, after_ms: float = 0.0) -> None:
        self.agenda.schedule(
            self.now_ms + after_ms, Rejoin(consumer.index, consumer.incarnation, reason)
        )

    def rejoin_at_next_poll(self, consumer: Consumer) -> None:
        """Told by a heartbeat to rejoin, the member does so when its application next polls."""
        processing = consumer.settings.processing_ms
        gap = self.rng.uniform(0.0, processing) if processing > 0 else 0.0
        self.schedule_rejoin(consumer, "member-rejoin", after_ms=gap)

    def schedule_notice(self, consumer: Consumer) -> None:
        if consumer.alive and consumer.phase is Phases.STABLE and not consumer.notice_pending:
            consumer.notice_pending = True
            self.agenda.schedule(
                consumer.next_heartbeat_ms(self.now_ms),
                HeartbeatNotice(consumer.index, consumer.incarnation),
            )

    def everyone_assigned(self, generation: int) -> bool:
        for consumer in self.consumers:
            if consumer.alive and (
                consumer.phase is not Phases.STABLE or consumer.generation != generation
            ):
                return False
        return True

    # -- the new topic (KAFKA-7126) --------------------------------------------------------

    def create_topic(self) -> None:
        creation = self.scenario.topic_creation
        if creation is None or self.topic_exists:
            return
        first = self.scenario.partitions + len(self.topic_partitions)
        self.topic_partitions = tuple(range(first, first + creation.partitions))
        self.ledger.add_partitions(creation.partitions)
        self.topic_exists = True
        for consumer in self.consumers:
            self.schedule_refresh(consumer)

    def schedule_refresh(self, consumer: Consumer) -> None:
        if self.topic_exists and consumer.alive and not consumer.knows_topic:
            self.agenda.schedule(
                consumer.first_refresh_at_or_after(self.now_ms),
                MetadataRefresh(consumer.index, consumer.incarnation),
            )

    def refresh_metadata(self, consumer: Consumer) -> None:
        consumer.knows_topic = True
        if consumer.phase is Phases.STABLE and not consumer.joined_with_topic:
            self.rejoin(consumer, "metadata-change")

    def refreshes_on_rejoin(self) -> bool:
        creation = self.scenario.topic_creation
        return creation is not None and creation.notice in ("fixed", "enforced")

    def enforce(self) -> None:
        """The operator's lever: one member rejoins with changed metadata (see DESIGN.md)."""
        for consumer in self.consumers:
            if consumer.alive and consumer.phase is Phases.STABLE:
                self.rejoin(consumer, "enforced")
                return

    def partitions_to_assign(self, any_member_has_topic: bool) -> tuple[int, ...]:
        if any_member_has_topic and self.topic_partitions:
            # The leader fetches metadata for every topic any member subscribes to.
            return self.own_partitions + self.topic_partitions
        return self.own_partitions

    # -- the coordinator -------------------------------------------------------------------

    def join_latency_ms(self, consumer: Consumer) -> float:
        return self.settings.join_latency_ms

    @abstractmethod
    def receive_join(self, consumer: Consumer, reason: Cause, with_topic: bool) -> None: ...

    @abstractmethod
    def on_departure(self, consumer: Consumer, kind: DepartureKind, last_contact_ms: float) -> None:
        """The member's process is gone: LeaveGroup, or silence until its session expires."""

    @abstractmethod
    def notice_by_heartbeat(self, consumer: Consumer) -> None:
        """A Stable member heartbeats after the group moved on."""


def _group_assignor(assignors: list[Assignor]) -> Assignor:
    """The protocol every member supports: cooperative only if all are, sticky if all can be."""
    if all(assignor == "cooperative-sticky" for assignor in assignors):
        return "cooperative-sticky"
    if all(assignor in ("sticky", "cooperative-sticky") for assignor in assignors):
        return "sticky"
    return "round-robin"
