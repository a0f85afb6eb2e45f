"""The sidecar's own membership in the application's group: the lever and the actor's lease.

Every sidecar subscribes only to the group's two control topics (one partition each), so an
assignor that honours subscriptions (librdkafka's, the Java client's, KIP-848's) gives it nothing
of the application's topics; groups of other assignors are visited instead of joined
(planning/group_levers.py), and this member then holds the lease in the sidecars' own group.
To enforce a rebalance the actor rejoins with changed subscription metadata: it drops the flip
topic from its subscription, or takes it back (docs/enforcing.md). Whoever the coordinator
assigns the control topic's partition to is the group's actor.

Why every sidecar subscribes to the flip topic too: if only the actor did, adding it would give
the actor two partitions and the others none, and the sticky assignors would then move the
control partition to another sidecar: a revocation, so a second cooperative round and a new
actor (measured with two sidecars). With the flip topic everyone's, dropping or re-adding it
moves nothing.

Leaving: a stopping member closes at once, as any consumer does, and its LeaveGroup starts a
rebalance without it. A pod's application member and its sidecar get SIGTERM together, so their
two leaves often fall into one rebalance; when one of them was the group's leader, Apache
Kafka's coordinator picks a new leader among the members that rejoined and the group forms
(docs/enforcing.md, "Taking the sidecar out").

librdkafka consumers must be driven from one thread: a call from another thread while poll()
runs can block (measured: consumer_group_metadata() hung). Everything here happens on the
member's own thread; other threads queue commands and read a snapshot.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import Consumer, KafkaException

from rebalancer.clients.reporting import MemberReporter
from rebalancer.sidecar.control_log import ACL_DOC, refused
from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.group_metadata import parse_group_metadata
from rebalancer.structs.reports import ReportEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberView:
    member_id: str = ""
    generation: int = -1
    owned: frozenset[TopicPartition] = frozenset()
    # Whether the member has dropped the flip topic from its subscription.
    flipped: bool = False
    # True from a revocation (eager: the start of every rebalance) until the next assignment.
    revoking: bool = False
    changed_at: float = 0.0
    error: str | None = None


class GroupMember:
    def __init__(
        self,
        config: dict[str, str],
        control_topic: str,
        flip_topic: str,
        *,
        reporter: MemberReporter | None = None,
        report_interval: float = 5.0,
        on_change: Callable[[MemberView], None] | None = None,
    ) -> None:
        self.control_topic = control_topic
        self.flip_topic = flip_topic
        self.reporter = reporter
        self.report_interval = report_interval
        self._on_change = on_change
        self._config: dict[str, Any] = dict(config)
        self._config.setdefault("enable.auto.commit", "false")
        self._config["logger"] = logging.getLogger("rebalancer.sidecar.librdkafka")
        self._config["error_cb"] = self._on_error
        strategy = self._config.get("partition.assignment.strategy", "")
        self.incremental = (
            "cooperative" in strategy or self._config.get("group.protocol") == "consumer"
        )
        self._view = MemberView()
        self._lock = threading.Lock()
        self._commands: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._consumer: Any = None
        self._thread = threading.Thread(target=self._run, name="sidecar-member", daemon=True)

    def start(self) -> None:
        # Built here so a bad setting fails start-up with librdkafka's message.
        self._consumer = Consumer(self._config)
        self._thread.start()

    def view(self) -> MemberView:
        with self._lock:
            return self._view

    def _update(self, **changes: Any) -> None:
        with self._lock:
            self._view = replace(self._view, changed_at=time.monotonic(), **changes)
            view = self._view
        if self._on_change is not None:
            self._on_change(view)

    def owns(self, partition: TopicPartition) -> bool:
        return partition in self.view().owned

    def subscription(self, flipped: bool) -> list[str]:
        return [self.control_topic] if flipped else [self.control_topic, self.flip_topic]

    def flip(self) -> bool:
        """Rejoin with the other subscription; returns True when the flip topic was dropped."""
        flipped = not self.view().flipped
        topics = self.subscription(flipped)
        done = threading.Event()
        failure: list[BaseException] = []

        def resubscribe() -> None:
            try:
                self._subscribe(topics)
                self._update(flipped=flipped)
            except BaseException as error:  # handed back to the caller's thread
                failure.append(error)
            finally:
                done.set()

        self._commands.put(resubscribe)
        if not done.wait(10.0):
            raise TimeoutError("the sidecar's group member did not take the new subscription")
        if failure:
            raise failure[0]
        return flipped

    def _subscribe(self, topics: list[str]) -> None:
        self._consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _position(self) -> tuple[str, int]:
        try:
            member_id = self._consumer.memberid() or ""
        except (KafkaException, RuntimeError):
            member_id = ""
        try:
            generation = parse_group_metadata(self._consumer.consumer_group_metadata()).generation
        except (KafkaException, RuntimeError):
            generation = -1
        return member_id, generation

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if self.incremental:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        if partitions:
            # The control log is read by a reader of its own; the membership only holds the
            # partition as a lease, so it fetches nothing.
            consumer.pause(partitions)
        added = {TopicPartition(p.topic, p.partition) for p in partitions}
        owned = (self.view().owned | added) if self.incremental else frozenset(added)
        member_id, generation = self._position()
        self._update(
            member_id=member_id, generation=generation, owned=frozenset(owned), revoking=False
        )
        logger.info("generation %d: the sidecar holds %s", generation, sorted(map(str, owned)))
        self._report(ReportEvent.ASSIGNED)

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self._give_up(consumer, partitions, ReportEvent.REVOKED)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._give_up(consumer, partitions, ReportEvent.LOST)

    def _give_up(self, consumer: Any, partitions: list[Any], event: ReportEvent) -> None:
        removed = {TopicPartition(p.topic, p.partition) for p in partitions}
        if self.incremental:
            consumer.incremental_unassign(partitions)
            owned = self.view().owned - removed
        else:
            consumer.unassign()
            owned = frozenset()
        self._update(owned=frozenset(owned), revoking=True)
        self._report(event)

    def _on_error(self, error: Any) -> None:
        text = str(error.str())
        self._update(error=text)
        if error.fatal():
            logger.error("fatal Kafka error in the sidecar's membership: %s", text)
            self._stopping.set()

    def _poll_error(self, text: str) -> None:
        # A refused JoinGroup or Fetch comes only here, and the member never joins or never
        # reads: say what to grant, once, and keep it in the view (GET /v1/group lastError).
        if refused(text):
            if text != self.view().error:
                logger.warning(
                    "the broker refuses the sidecar's group member (%s): grant the sidecar's "
                    "Kafka user Read on group %r and on topics %s and %s (%s)",
                    text,
                    self._config.get("group.id"),
                    self.control_topic,
                    self.flip_topic,
                    ACL_DOC,
                )
            self._update(error=text)
            return
        logger.debug("sidecar member: %s", text)

    def _report(self, event: ReportEvent) -> None:
        if self.reporter is None:
            return
        view = self.view()
        self.reporter.report(
            event, member_id=view.member_id, generation=view.generation, partitions=view.owned
        )

    def _run(self) -> None:
        self._subscribe(self.subscription(False))
        next_report = time.monotonic() + self.report_interval
        try:
            while not self._stopping.is_set():
                try:
                    message = self._consumer.poll(0.2)
                except (KafkaException, RuntimeError) as error:
                    logger.warning("the sidecar's group member failed to poll: %s", error)
                    time.sleep(0.5)
                    continue
                if message is not None and message.error() is not None:
                    self._poll_error(str(message.error().str()))
                while True:
                    try:
                        command = self._commands.get_nowait()
                    except queue.Empty:
                        break
                    command()
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + self.report_interval
                    member_id, generation = self._position()
                    if generation != self.view().generation or member_id != self.view().member_id:
                        self._update(member_id=member_id, generation=generation)
                    if generation >= 0:
                        self._report(ReportEvent.HEARTBEAT)
        finally:
            self._close()

    def _close(self) -> None:
        view = self.view()
        try:
            # A clean leave: the group rebalances once without the sidecar.
            self._consumer.close()
        except (KafkaException, RuntimeError) as error:
            logger.warning("closing the sidecar's group member failed: %s", error)
        else:
            if self._config.get("group.instance.id"):
                # A static member sends no LeaveGroup: its slot waits for the restarted pod.
                logger.info("closed; a static member keeps its slot until its session expires")
            else:
                logger.info("left the group (generation %d)", view.generation)
        if self.reporter is not None:
            self.reporter.report(
                ReportEvent.STOPPED,
                member_id=view.member_id,
                generation=view.generation,
                partitions=(),
            )

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 15.0) -> None:
        """Leave the group and stop."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
