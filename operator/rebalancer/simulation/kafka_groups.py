"""Apache Kafka's classic group coordinator (and Redpanda's, which follows it), as implemented.

Sources, apache/kafka, Kafka 2.x-3.x (core/src/main/scala/kafka/coordinator/group/):
- GroupCoordinator.scala: handleJoinGroup / doJoinGroup (a Stable group rebalances for a JoinGroup
  from the leader or with changed metadata, otherwise returns the current generation);
  addMemberAndRebalance (`newMemberAdded` is set only while PreparingRebalance at generation 0);
  prepareRebalance (an Empty group gets an InitialDelayedJoin of group.initial.rebalance.delay.ms
  with `remaining = max(rebalanceTimeout - delay, 0)`, any other group a DelayedJoin of the
  rebalance timeout, and the join is tried at once); tryCompleteJoin (all known members rejoined);
  onCompleteJoin (dynamic members that did not rejoin are removed, static ones kept, then
  initNextGeneration); doSyncGroup (the leader's SyncGroup makes the group Stable);
  removeMemberAndUpdateGroup and onExpireHeartbeat (LeaveGroup and session expiry rebalance a
  Stable or CompletingRebalance group); the KIP-345 branch of doUnknownJoinGroup (a static member
  rejoining with a new process takes its old slot without a rebalance while Stable).
- DelayedJoin.scala, InitialDelayedJoin: tryComplete is always false; on expiry, if a new member
  joined during the delay and time remains, a further delay of `min(delay, remaining)` follows,
  with `remaining` reduced by the delay just spent. The window therefore slides in whole steps and
  never exceeds the rebalance timeout (the largest max.poll.interval.ms among members).
- GroupMetadata.scala: states and transitions; rebalanceTimeoutMs is the members' maximum.
- KIP-134 (the initial delay), KIP-345 (static membership: no LeaveGroup on shutdown, the slot is
  kept for session.timeout.ms), KIP-394 (MEMBER_ID_REQUIRED; folded into the join latency),
  KIP-429 (cooperative rebalancing), KAFKA-9801 (Kafka 2.5+: a static rejoin during
  CompletingRebalance does rebalance).

Two details differ across versions: the Java coordinator of Kafka 3.7+/4.0 (GroupMetadataManager)
also lets the initial delay slide for a group that became Empty again (it checks the previous
state instead of generation 0); and a member's heartbeats keep it alive while its JoinGroup is
parked, so a member that crashes mid-rebalance is caught only by the rebalance timeout or by its
session after the generation forms. Both are modelled as in the Scala coordinator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Final

from rebalancer.simulation.assignors import assign_sorted
from rebalancer.simulation.consumers import Consumer, Phases
from rebalancer.simulation.events import Event, JoinDeadline, Resync, SessionCheck, SyncDone
from rebalancer.simulation.group_models import METADATA_CHANGES, GroupModel
from rebalancer.simulation.results import Cause
from rebalancer.simulation.scenarios import DepartureKind, Scenario


class _State(Enum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"


class _States:
    """_State's members as plain class attributes (see consumers.Phases)."""

    EMPTY: Final = _State.EMPTY
    PREPARING: Final = _State.PREPARING
    COMPLETING: Final = _State.COMPLETING
    STABLE: Final = _State.STABLE


@dataclass(slots=True)
class _Record:
    """The coordinator's MemberMetadata."""

    member_id: str
    consumer: int
    instance_id: str | None
    session_timeout_ms: float
    rebalance_timeout_ms: float
    awaiting_join: bool = True
    last_heartbeat_ms: float = 0.0
    assignment: frozenset[int] = frozenset()
    with_topic: bool = False


_NO_PARTITIONS: frozenset[int] = frozenset()


class KafkaGroupModel(GroupModel):
    """GroupCoordinator + GroupMetadata for one group."""

    COORDINATOR_EVENT_HANDLERS: ClassVar[dict[type[Event], str]] = {
        JoinDeadline: "on_join_deadline",
        SyncDone: "on_sync_done",
        SessionCheck: "on_session_check",
        Resync: "on_resync",
    }

    def __init__(self, scenario: Scenario, consumers: list[Consumer], rng: random.Random) -> None:
        super().__init__(scenario, consumers, rng)
        self.state = _States.EMPTY
        self.generation = 0
        self.members: dict[str, _Record] = {}
        self._by_name: tuple[list[_Record], tuple[str, ...], bool] | None = None
        self._rebalance_timeout_ms: float | None = None
        self.static_ids: dict[str, str] = {}
        self.leader: str | None = None
        self.new_member_added = False
        self.join_token = 0
        self.join_is_initial = False
        self.join_delay_ms = 0.0
        self.join_remaining_ms = 0.0

    # -- JoinGroup -------------------------------------------------------------------------

    def receive_join(self, consumer: Consumer, reason: Cause, with_topic: bool) -> None:
        if consumer.member_id is None:
            if consumer.instance_id is not None and consumer.instance_id in self.static_ids:
                self.replace_static_member(consumer, with_topic)
            else:
                self.add_member(consumer, with_topic)
            return
        record = self.members.get(consumer.member_id)
        if record is None or self.state is _States.EMPTY:
            self.rejoin_as_new_member(consumer)
            return
        record.with_topic = with_topic
        changed = reason in METADATA_CHANGES
        match self.state:
            case _States.PREPARING:
                record.awaiting_join = True
                self.try_complete_join()
            case _States.COMPLETING if not changed:
                # Same metadata: the member is simply told the pending generation again.
                record.awaiting_join = False
                consumer.phase = Phases.AWAITING_SYNC
                consumer.heartbeat_anchor_ms = self.now_ms
            case _States.STABLE if not changed and record.member_id != self.leader:
                self.agenda.schedule(
                    self.now_ms + self.settings.sync_latency_ms,
                    Resync(consumer.index, consumer.incarnation),
                )
            case _:
                record.awaiting_join = True
                self.prepare_rebalance(reason)

    def add_member(self, consumer: Consumer, with_topic: bool) -> None:
        member_id = f"{consumer.name}#{consumer.incarnation}"
        consumer.member_id = member_id
        settings = consumer.settings
        # In field order (keywords would cost as much again as the construction).
        record = _Record(
            member_id,
            consumer.index,
            consumer.instance_id,
            settings.session_timeout_ms,
            settings.max_poll_interval_ms,
            True,  # awaiting_join
            self.now_ms,  # last_heartbeat_ms
            _NO_PARTITIONS,  # assignment
            with_topic,
        )
        if self.state is _States.PREPARING and self.generation == 0:
            self.new_member_added = True
        self.members[member_id] = record
        self.forget_order()
        if record.instance_id is not None:
            self.static_ids[record.instance_id] = member_id
        if self.leader is None:
            self.leader = member_id
        if self.state is _States.PREPARING:
            self.try_complete_join()
        else:
            self.prepare_rebalance("initial-join" if self.state is _States.EMPTY else "member-join")

    def replace_static_member(self, consumer: Consumer, with_topic: bool) -> None:
        assert consumer.instance_id is not None
        old_id = self.static_ids[consumer.instance_id]
        record = self.members.pop(old_id)
        record.member_id = f"{consumer.name}#{consumer.incarnation}"
        record.consumer = consumer.index
        record.with_topic = with_topic
        record.last_heartbeat_ms = self.now_ms
        self.members[record.member_id] = record
        self.forget_order()
        self.static_ids[consumer.instance_id] = record.member_id
        if self.leader == old_id:
            self.leader = record.member_id
        consumer.member_id = record.member_id
        match self.state:
            case _States.STABLE:
                # KIP-345: the new process takes over the slot and its stored assignment.
                self.agenda.schedule(
                    self.now_ms + self.settings.sync_latency_ms,
                    Resync(consumer.index, consumer.incarnation),
                )
            case _States.COMPLETING:
                record.awaiting_join = True
                self.prepare_rebalance("member-rejoin")
            case _:
                record.awaiting_join = True
                self.try_complete_join()

    # -- the join phase --------------------------------------------------------------------

    def prepare_rebalance(self, cause: Cause) -> None:
        if self.state is _States.COMPLETING:
            # The pending generation is abandoned; its members' SyncGroups fail and they rejoin.
            self.ledger.close_rebalance(self.now_ms, completed=False)
            for record in self.members.values():
                consumer = self.live_consumer(record)
                if consumer is not None and consumer.phase is Phases.AWAITING_SYNC:
                    self.rejoin(consumer, "member-rejoin")
        was_stable = self.state is _States.STABLE
        if self.state is _States.EMPTY:
            delay = self.settings.initial_rebalance_delay_ms
            self.arm_join_timer(
                initial=True,
                delay_ms=delay,
                remaining_ms=max(self.rebalance_timeout_ms() - delay, 0.0),
            )
        else:
            self.arm_join_timer(initial=False, delay_ms=self.rebalance_timeout_ms())
        self.state = _States.PREPARING
        self.ledger.open_rebalance(cause, self.now_ms)
        if was_stable:
            consumers = self.consumers
            for record in self.members.values():
                consumer = consumers[record.consumer]
                if consumer.alive and consumer.member_id == record.member_id:  # live_consumer
                    self.schedule_notice(consumer)
        self.try_complete_join()

    def arm_join_timer(self, *, initial: bool, delay_ms: float, remaining_ms: float = 0.0) -> None:
        self.join_token += 1
        self.join_is_initial = initial
        self.join_delay_ms = delay_ms
        self.join_remaining_ms = remaining_ms
        self.agenda.schedule(self.now_ms + delay_ms, JoinDeadline(self.join_token))

    def expire_join_timer(self) -> None:
        if not self.join_is_initial:
            self.complete_join()
        elif self.new_member_added and self.join_remaining_ms != 0:
            self.new_member_added = False
            self.arm_join_timer(
                initial=True,
                delay_ms=min(self.settings.initial_rebalance_delay_ms, self.join_remaining_ms),
                remaining_ms=max(self.join_remaining_ms - self.join_delay_ms, 0.0),
            )
        else:
            self.complete_join()

    def try_complete_join(self) -> None:
        if self.state is not _States.PREPARING or self.join_is_initial:
            return
        for record in self.members.values():
            if not record.awaiting_join:
                return
        self.complete_join()

    def complete_join(self) -> None:
        self.join_token += 1
        for record in list(self.members.values()):
            if not record.awaiting_join and record.instance_id is None:
                self.remove_record(record)
        joined = [record for record in self.members.values() if record.awaiting_join]
        if self.members and not joined:
            # Only absent static members are left: wait for them or their sessions.
            self.arm_join_timer(initial=False, delay_ms=self.rebalance_timeout_ms())
            return
        self.generation += 1
        if not self.members:
            self.state = _States.EMPTY
            self.ledger.form_generation(self.generation, ())
            self.ledger.close_rebalance(self.now_ms, completed=True)
            return
        if self.leader not in {record.member_id for record in joined}:
            self.leader = joined[0].member_id
        self.state = _States.COMPLETING
        now_ms = self.now_ms
        consumers = self.consumers
        for record in self.members.values():
            record.awaiting_join = False
            record.last_heartbeat_ms = now_ms
            consumer = consumers[record.consumer]
            if consumer.alive and consumer.member_id == record.member_id:  # live_consumer
                consumer.phase = Phases.AWAITING_SYNC
                consumer.heartbeat_anchor_ms = now_ms
            else:
                self.agenda.schedule(
                    now_ms + record.session_timeout_ms, SessionCheck(record.member_id)
                )
        self.ledger.form_generation(self.generation, self.member_names())
        self.agenda.schedule(self.now_ms + self.settings.sync_latency_ms, SyncDone(self.generation))

    def complete_sync(self, generation: int) -> None:
        if self.state is not _States.COMPLETING or generation != self.generation:
            return
        self.state = _States.STABLE
        records, ordered, distinct = self.by_name()
        if distinct:
            held = tuple([record.assignment for record in records])
        else:
            # Two records of one member (an old process not yet expired): the later one's
            # assignment stands for the name, as in a mapping built in this order.
            previous = {
                name: record.assignment for name, record in zip(ordered, records, strict=True)
            }
            held = tuple([previous[name] for name in ordered])
        granted = assign_sorted(
            ordered,
            self.partitions_to_assign(
                bool(self.topic_partitions) and any(record.with_topic for record in records)
            ),
            self.assignor,
            held,
        ).granted
        for name, record in zip(ordered, records, strict=True):
            record.assignment = granted[name]
        self.ledger.close_rebalance(self.now_ms, completed=True)
        consumers = self.consumers
        for record in records:
            consumer = consumers[record.consumer]
            if (
                consumer.phase is Phases.AWAITING_SYNC
                and consumer.alive
                and consumer.member_id == record.member_id  # live_consumer
            ):
                self.deliver(consumer, record.assignment, self.generation)
        self.ledger.note_stable(
            self.now_ms, everyone_assigned=self.everyone_assigned(self.generation)
        )

    # -- leaving ---------------------------------------------------------------------------

    def on_departure(self, consumer: Consumer, kind: DepartureKind, last_contact_ms: float) -> None:
        record = self.members.get(consumer.member_id or "")
        if record is None:
            return
        if kind == "leave" and record.instance_id is None:
            self.remove_member_and_update(record, "member-leave")
        elif not record.awaiting_join:
            # A parked JoinGroup keeps the member alive; complete_join schedules its check.
            record.last_heartbeat_ms = last_contact_ms
            self.agenda.schedule(
                last_contact_ms + record.session_timeout_ms, SessionCheck(record.member_id)
            )

    def check_session(self, member_id: str) -> None:
        record = self.members.get(member_id)
        if record is None or record.awaiting_join or self.live_consumer(record) is not None:
            return
        if record.last_heartbeat_ms + record.session_timeout_ms <= self.now_ms:
            self.remove_member_and_update(record, "session-expiry")

    def remove_member_and_update(self, record: _Record, cause: Cause) -> None:
        self.remove_record(record)
        if self.state in (_States.STABLE, _States.COMPLETING):
            self.prepare_rebalance(cause)
        else:
            self.try_complete_join()

    def remove_record(self, record: _Record) -> None:
        del self.members[record.member_id]
        self.forget_order()
        if record.instance_id is not None:
            self.static_ids.pop(record.instance_id, None)
        if self.leader == record.member_id:
            self.leader = next(iter(self.members), None)
        consumer = self.live_consumer(record)
        if consumer is not None:
            # Still running (too slow for the rebalance timeout): its next heartbeat is refused.
            self.schedule_notice(consumer)

    # -- heartbeats and stored assignments -------------------------------------------------

    def notice_by_heartbeat(self, consumer: Consumer) -> None:
        if consumer.member_id not in self.members:
            self.rejoin_as_new_member(consumer)
        elif self.state is not _States.STABLE or consumer.generation != self.generation:
            self.rejoin_at_next_poll(consumer)

    def resync(self, consumer: Consumer) -> None:
        record = self.members.get(consumer.member_id or "")
        if record is None:
            self.rejoin_as_new_member(consumer)
        elif self.state is _States.STABLE:
            self.deliver(consumer, record.assignment, self.generation)
            self.ledger.note_stable(
                self.now_ms, everyone_assigned=self.everyone_assigned(self.generation)
            )
        else:
            consumer.phase = Phases.JOINING
            self.send_join(consumer, "member-rejoin")

    def on_join_deadline(self, event: JoinDeadline) -> None:
        if event.token == self.join_token and self.state is _States.PREPARING:
            self.expire_join_timer()

    def on_sync_done(self, event: SyncDone) -> None:
        self.complete_sync(event.generation)

    def on_session_check(self, event: SessionCheck) -> None:
        self.check_session(event.member_id)

    def on_resync(self, event: Resync) -> None:
        consumer = self.consumers[event.consumer]
        if consumer.alive and consumer.incarnation == event.incarnation:
            self.resync(consumer)

    # -- helpers ---------------------------------------------------------------------------

    def rebalance_timeout_ms(self) -> float:
        if self._rebalance_timeout_ms is None:
            self._rebalance_timeout_ms = max(
                (record.rebalance_timeout_ms for record in self.members.values()), default=0.0
            )
        return self._rebalance_timeout_ms

    def live_consumer(self, record: _Record) -> Consumer | None:
        consumer = self.consumers[record.consumer]
        if consumer.alive and consumer.member_id == record.member_id:
            return consumer
        return None

    def name_of(self, record: _Record) -> str:
        return self.consumers[record.consumer].name

    def member_names(self) -> tuple[str, ...]:
        return self.by_name()[1]

    def by_name(self) -> tuple[list[_Record], tuple[str, ...], bool]:
        """The records sorted by member name (stable), their names, and whether those are
        distinct. Kept until the membership changes (see forget_order)."""
        if self._by_name is None:
            names = self.names
            records = sorted(self.members.values(), key=lambda record: names[record.consumer])
            ordered = tuple([names[record.consumer] for record in records])
            self._by_name = (records, ordered, len(set(ordered)) == len(ordered))
        return self._by_name

    def forget_order(self) -> None:
        """The members changed (added, removed, replaced): by_name sorts them again and the
        rebalance timeout is their maximum again (a record's own never changes)."""
        self._by_name = None
        self._rebalance_timeout_ms = None
