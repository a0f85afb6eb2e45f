"""Tansu's group coordinator (the lab's broker), as measured and as its source reads.

Tansu has no group.initial.rebalance.delay.ms. Its group is either Forming or Formed
(tansu-io/tansu, tansu-server/src/coordinator/group/administrator.rs): a JoinGroup from a new
member, or with changed metadata, bumps the generation and puts the group in Forming; the leader
(the first member, kept across generations while it stays) turns Forming into Formed with its
SyncGroup; a follower's SyncGroup in Forming, or for an older generation, gets
REBALANCE_IN_PROGRESS, and so does the heartbeat of a member of an older generation; a rejoin
with unchanged metadata in Formed does not rebalance.

Measured on Tansu 0.6.0 (/work/shared/BROKER-FACTS.md), and modelled as such:
- each JoinGroup from a member that has a member id is held about half the group's session
  timeout, counted from its arrival, and then answered with the group as it is; new joiners do not
  extend that hold;
- the group's session timeout is the one of the first member that ever joined;
- static members: every static JoinGroup and SyncGroup is held at least 3 s, and a restart avoids
  a rebalance only if session >= 2 x (restart gap + 3 s). The model registers a static JoinGroup
  3 s after it arrives and forgets a silent static member after half the session timeout, which
  gives exactly that rule.
When an arrival coincides with the end of a hold, the hold is answered first (see events); with
that order the model gives the measured generation counts for 6 consumers, session 10 s, started
0.2 s, 1 s and 5 s apart (1, 2 and 4 generations) and the measured 6.2 s for the first case. It
is slower than the measured 12.1 s and 31.2 s in the other two (about 18 s and 36 s), because it
charges every member a full hold on each rejoin; use it to compare strategies on Tansu, never
for Kafka's timings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rebalancer.simulation.assignors import assign_partitions
from rebalancer.simulation.consumers import Consumer, Phase
from rebalancer.simulation.events import Assigned, Event, JoinAnswer, SessionCheck
from rebalancer.simulation.group_models import METADATA_CHANGES, GroupModel
from rebalancer.simulation.results import Cause
from rebalancer.simulation.scenarios import DepartureKind, Scenario

STATIC_HOLD_MS = 3000.0


@dataclass
class _Record:
    member_id: str
    consumer: int
    instance_id: str | None
    last_contact_ms: float
    with_topic: bool = False
    assignment: frozenset[int] = frozenset()


class TansuGroupModel(GroupModel):
    """Forming/Formed with held JoinGroups."""

    def __init__(self, scenario: Scenario, consumers: list[Consumer], rng: random.Random) -> None:
        super().__init__(scenario, consumers, rng)
        self.formed = False
        self.generation = -1
        self.leader: str | None = None
        self.members: dict[str, _Record] = {}
        self.static_ids: dict[str, str] = {}
        self.session_timeout_ms: float | None = None

    # -- JoinGroup -------------------------------------------------------------------------

    def join_latency_ms(self, consumer: Consumer) -> float:
        extra = STATIC_HOLD_MS if consumer.is_static else 0.0
        return self.settings.join_latency_ms + extra

    def hold_ms(self, consumer: Consumer) -> float:
        half_session = (self.session_timeout_ms or consumer.settings.session_timeout_ms) / 2
        if consumer.is_static:
            return max(half_session - STATIC_HOLD_MS, 0.0)
        return half_session

    def receive_join(self, consumer: Consumer, reason: Cause, with_topic: bool) -> None:
        if self.session_timeout_ms is None:
            self.session_timeout_ms = consumer.settings.session_timeout_ms
        record = self.members.get(consumer.member_id or "")
        static_id = self.static_ids.get(consumer.instance_id or "")
        if record is None and static_id is not None:
            record = self.members[static_id]
            record.consumer = consumer.index
            consumer.member_id = record.member_id
        was_empty = not self.members
        new = record is None
        if record is None:
            member_id = f"{consumer.name}#{consumer.incarnation}"
            consumer.member_id = member_id
            record = _Record(member_id, consumer.index, consumer.instance_id, self.now_ms)
            self.members[member_id] = record
            if record.instance_id is not None:
                self.static_ids[record.instance_id] = member_id
        record.last_contact_ms = self.now_ms
        record.with_topic = with_topic
        if new or reason in METADATA_CHANGES:
            cause: Cause = "initial-join" if was_empty else ("member-join" if new else reason)
            self.start_forming(cause)
        if self.leader is None:
            self.leader = record.member_id
        consumer.phase = Phase.JOINING
        self.agenda.schedule(
            self.now_ms + self.hold_ms(consumer), JoinAnswer(consumer.index, consumer.incarnation)
        )

    def answer_join(self, consumer: Consumer) -> None:
        record = self.members.get(consumer.member_id or "")
        if record is None:
            self.rejoin_as_new_member(consumer)
            return
        record.last_contact_ms = self.now_ms
        if not self.formed and self.leader == record.member_id:
            # The leader's SyncGroup follows its JoinGroup response at once.
            self.form_generation()
        if not self.formed:
            # A follower's SyncGroup while Forming: REBALANCE_IN_PROGRESS, so it joins again.
            self.send_join(consumer, "member-rejoin")
            return
        consumer.phase = Phase.AWAITING_SYNC
        sync_ms = self.settings.sync_latency_ms
        if consumer.is_static:
            sync_ms = max(sync_ms, STATIC_HOLD_MS)
        self.agenda.schedule(
            self.now_ms + sync_ms,
            Assigned(consumer.index, consumer.incarnation, self.generation, record.assignment),
        )

    # -- generations -----------------------------------------------------------------------

    def start_forming(self, cause: Cause) -> None:
        if self.formed or not self.ledger.rebalancing:
            self.ledger.open_rebalance(cause, self.now_ms)
        self.formed = False
        self.generation += 1
        for consumer in self.consumers:
            self.schedule_notice(consumer)

    def form_generation(self) -> None:
        records = sorted(self.members.values(), key=self.name_of)
        assignment = assign_partitions(
            [self.name_of(record) for record in records],
            self.partitions_to_assign(any(record.with_topic for record in records)),
            self.assignor,
            {self.name_of(record): record.assignment for record in records},
        )
        for record in records:
            record.assignment = assignment.granted[self.name_of(record)]
        self.formed = True
        self.ledger.form_generation(self.generation, self.member_names())
        self.ledger.close_rebalance(self.now_ms, completed=True)

    def receive_assignment(self, consumer: Consumer, event: Assigned) -> None:
        self.deliver(consumer, event.partitions, event.generation)
        if event.generation != self.generation:
            self.schedule_notice(consumer)
        self.ledger.note_stable(
            self.now_ms,
            everyone_assigned=self.formed and self.everyone_assigned(self.generation),
        )

    def notice_by_heartbeat(self, consumer: Consumer) -> None:
        if consumer.member_id not in self.members:
            self.rejoin_as_new_member(consumer)
        elif consumer.generation < self.generation:
            self.rejoin_at_next_poll(consumer)

    # -- leaving ---------------------------------------------------------------------------

    def on_departure(self, consumer: Consumer, kind: DepartureKind, last_contact_ms: float) -> None:
        record = self.members.get(consumer.member_id or "")
        if record is None:
            return
        if kind == "leave" and record.instance_id is None:
            self.remove(record, "member-leave")
            return
        record.last_contact_ms = last_contact_ms
        self.agenda.schedule(
            last_contact_ms + self.silence_limit_ms(record), SessionCheck(record.member_id)
        )

    def silence_limit_ms(self, record: _Record) -> float:
        session = self.session_timeout_ms or 0.0
        return session / 2 if record.instance_id is not None else session

    def check_session(self, member_id: str) -> None:
        record = self.members.get(member_id)
        if record is None or self.live_consumer(record) is not None:
            return
        if record.last_contact_ms + self.silence_limit_ms(record) <= self.now_ms:
            self.remove(record, "session-expiry")

    def remove(self, record: _Record, cause: Cause) -> None:
        del self.members[record.member_id]
        if record.instance_id is not None:
            self.static_ids.pop(record.instance_id, None)
        if self.leader == record.member_id:
            self.leader = None
        self.start_forming(cause)
        if not self.members:
            self.ledger.form_generation(self.generation, ())
            self.ledger.close_rebalance(self.now_ms, completed=True)

    # -- dispatch and helpers --------------------------------------------------------------

    def handle_coordinator_event(self, event: Event) -> None:
        match event:
            case JoinAnswer(consumer=index, incarnation=incarnation):
                consumer = self.consumers[index]
                if self.is_current(consumer, incarnation):
                    self.answer_join(consumer)
            case Assigned(consumer=index, incarnation=incarnation):
                consumer = self.consumers[index]
                if self.is_current(consumer, incarnation):
                    self.receive_assignment(consumer, event)
            case SessionCheck(member_id=member_id):
                self.check_session(member_id)
            case _:
                raise AssertionError(f"unexpected event for the Tansu coordinator: {event}")

    def live_consumer(self, record: _Record) -> Consumer | None:
        consumer = self.consumers[record.consumer]
        if consumer.alive and consumer.member_id == record.member_id:
            return consumer
        return None

    def name_of(self, record: _Record) -> str:
        return self.consumers[record.consumer].name

    def member_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.name_of(record) for record in self.members.values()))
