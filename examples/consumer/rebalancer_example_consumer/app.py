"""The example consumer application: `rebalancer-example-consumer` (or `python -m
rebalancer_example_consumer`); the lab runs it as `python -m rebalancer_lab.consumer`.

A real confluent-kafka consumer that behaves like a well-written production one: at-least-once
(commit after processing), correct eager and cooperative rebalance handling, a clean leave on
SIGTERM, and member reports (docs/member-reports.md) so the operator can see its generations and
assignment even on brokers that describe groups without members. It honours the join gate
(REBALANCER_JOIN_GATE, docs/join-gate.md) and takes its identity slot as group.instance.id.
Settings: settings.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaPartition

from rebalancer.clients.librdkafka_config import redacted
from rebalancer.clients.reporting import MemberReporter, consumer_position
from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.gates import JOIN_GATE_ENV, JOIN_GATE_INSTANCE_ID_FILE
from rebalancer.structs.kafka_properties import SettingsError
from rebalancer.structs.reports import ReportEvent
from rebalancer_example_consumer.settings import (
    SHOWN_PROPERTIES,
    ConsumerSettings,
    load_settings,
)

logger = logging.getLogger("rebalancer_example_consumer")
_BATCH = 100
# How often a consumer behind a join-holding gate looks for the gate's file: a stat, nothing more.
JOIN_GATE_POLL_S = 0.05
# How long a held consumer tries to reach the cluster before it waits at its gate regardless.
JOIN_GATE_WARM_UP_S = 10.0


def _partitions(kafka_partitions: Sequence[Any]) -> set[TopicPartition]:
    return {TopicPartition(p.topic, p.partition) for p in kafka_partitions}


def _listed(partitions: set[TopicPartition]) -> str:
    return ",".join(str(p) for p in sorted(partitions)) or "-"


def lag_from_statistics(stats: dict[str, Any], owned: set[TopicPartition]) -> int | None:
    """Sum of consumer_lag over the owned partitions; None when no partition knows its lag."""
    total: int | None = None
    for topic, topic_stats in (stats.get("topics") or {}).items():
        for key, partition_stats in (topic_stats.get("partitions") or {}).items():
            if not key.lstrip("-").isdigit() or TopicPartition(topic, int(key)) not in owned:
                continue
            lag = partition_stats.get("consumer_lag", -1)
            if isinstance(lag, int) and lag >= 0:
                total = (total or 0) + lag
    return total


class ExampleConsumer:
    def __init__(self, settings: ConsumerSettings, out: IO[str] = sys.stdout) -> None:
        self.settings = settings
        self.out = out
        self.owned: set[TopicPartition] = set()
        self.lags: dict[TopicPartition, int] = {}
        self.lag: int | None = None
        self.processed = 0
        self.member_id = ""
        self.generation = -1
        self.stopping = False
        self.closing = False  # inside close(): nothing more is asked (_remember_position)
        self.reporter: MemberReporter | None = None
        if settings.report_url:
            self.reporter = MemberReporter(
                settings.report_url,
                settings.report_token,
                group_id=settings.group_id,
                client_id=settings.properties.get("client.id", settings.host),
                host=settings.host,
                instance_id=settings.properties.get("group.instance.id"),
                namespace=settings.namespace,
                consumer_group=settings.consumer_group,
                protocol=settings.protocol,
                assignment_strategy=settings.strategy,
            )
        config: dict[str, Any] = dict(settings.properties)
        config["logger"] = logging.getLogger("rebalancer_example_consumer.librdkafka")
        config["error_cb"] = self._on_error
        config["stats_cb"] = self._on_stats
        self.consumer = Consumer(config)
        self.record: IO[str] | None = None
        if settings.record_file is not None:
            settings.record_file.parent.mkdir(parents=True, exist_ok=True)
            self.record = settings.record_file.open("a", encoding="utf-8")

    def say(self, text: str) -> None:
        print(f"[{self.settings.host}] {text}", file=self.out, flush=True)

    def _remember_position(self) -> int:
        """Member id and generation as the consumer has them, kept when it has none; returns
        the consumer's own generation (-1: not in a group, or not asked).

        Not asked while closing: close() runs the revoke callback, and librdkafka (2.16) can
        block a memberid() asked from there until the process is killed (measured: 4 closes in
        48 hung, each until the kubelet's SIGKILL); what was known last is as good. Leaving
        the group also clears the member id before that last callback."""
        if self.closing:
            return -1
        member_id, generation = consumer_position(self.consumer)
        self.member_id = member_id or self.member_id
        self.generation = generation if generation >= 0 else self.generation
        return generation

    def _report(self, event: ReportEvent) -> None:
        if self.reporter is None:
            return
        lag = self.lag if event is ReportEvent.HEARTBEAT else None
        self.reporter.report(
            event,
            member_id=self.member_id,
            generation=self.generation,
            partitions=self.owned,
            lag=lag,
        )

    def _event(self, event: ReportEvent, changed: set[TopicPartition]) -> None:
        self._remember_position()
        sign = "+" if event is ReportEvent.ASSIGNED else "-"
        self.say(
            f"{event.value} generation={self.generation} {sign}[{_listed(changed)}] "
            f"now [{_listed(self.owned)}]"
        )
        self._report(event)

    # librdkafka calls these from inside consume()/close(), on this same thread.
    def _on_assign(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        added = _partitions(partitions)
        if self.settings.incremental:
            consumer.incremental_assign(partitions)
            self.owned |= added
        else:
            consumer.assign(partitions)
            self.owned = added
        self._event(ReportEvent.ASSIGNED, added)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        # Nothing to commit here: the loop commits each batch before it polls again.
        self._give_up(consumer, partitions, ReportEvent.REVOKED)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaPartition]) -> None:
        # Lost partitions already belong to someone else: committing for them would fail.
        self._give_up(consumer, partitions, ReportEvent.LOST)

    def _give_up(
        self, consumer: Consumer, partitions: list[KafkaPartition], event: ReportEvent
    ) -> None:
        removed = _partitions(partitions)
        if self.settings.incremental:
            consumer.incremental_unassign(partitions)
            self.owned -= removed
        else:
            consumer.unassign()
            removed |= self.owned
            self.owned = set()
        for partition in removed:
            self.lags.pop(partition, None)
        self._event(event, removed)

    def _on_error(self, error: Any) -> None:
        if error.fatal():
            self.say(f"fatal Kafka error, stopping: {error.str()}")
            self.stopping = True

    def _on_stats(self, raw: str) -> None:
        try:
            self.lag = lag_from_statistics(json.loads(raw), self.owned)
        except (ValueError, AttributeError):
            self.lag = None

    def _process(self, messages: list[Any]) -> None:
        offsets: dict[tuple[str, int], int] = {}
        for message in messages:
            if message.error() is not None:
                if not message.error().retriable():
                    self.say(f"consume error: {message.error().str()}")
                continue
            if self.settings.process_delay_ms:
                time.sleep(self.settings.process_delay_ms / 1000)
            if self.record is not None:
                key = message.key()
                text = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
                self.record.write(
                    f"{message.topic()}\t{message.partition()}\t{message.offset()}\t{text}\n"
                )
            offsets[(message.topic(), message.partition())] = message.offset() + 1
            self.processed += 1
        if not offsets:
            return
        if self.record is not None:
            self.record.flush()
        commit = [KafkaPartition(topic, part, offset) for (topic, part), offset in offsets.items()]
        try:
            self.consumer.commit(offsets=commit, asynchronous=False)
        except KafkaException as error:
            # At-least-once: an uncommitted batch is delivered again to whoever owns it next.
            self.say(f"commit failed, batch will be redelivered: {error.args[0].str()}")

    def stop(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def warm_up(self) -> None:
        """Connect and fetch the cluster's metadata ahead of the join, so that a consumer held
        at its gate has only FindCoordinator and JoinGroup left once it opens."""
        try:
            self.consumer.list_topics(timeout=JOIN_GATE_WARM_UP_S)
        except KafkaException as error:
            self.say(f"metadata before the join failed, joining regardless: {error.args[0].str()}")

    def run(self) -> int:
        shown = redacted(self.settings.properties)
        settings = " ".join(f"{k}={shown[k]}" for k in SHOWN_PROPERTIES if k in shown)
        subscription = ",".join(self.settings.subscription())
        origin = ""
        if self.settings.config_file is not None:
            origin += f" config-file={self.settings.config_file}"
        if self.settings.settings_hash is not None:
            origin += f" settings-hash={self.settings.settings_hash}"
        self.say(
            f"settings: {settings} subscription={subscription} "
            f"incremental={str(self.settings.incremental).lower()} "
            f"reports={self.settings.report_url or 'off'}{origin}"
        )
        self.consumer.subscribe(
            self.settings.subscription(),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        next_heartbeat = time.monotonic() + self.settings.heartbeat_seconds
        try:
            while not self.stopping:
                self._process(self.consumer.consume(num_messages=_BATCH, timeout=0.5))
                if time.monotonic() >= next_heartbeat:
                    next_heartbeat = time.monotonic() + self.settings.heartbeat_seconds
                    if self._remember_position() >= 0 or self.owned:
                        self._report(ReportEvent.HEARTBEAT)
        finally:
            self.close()
        return 0

    def close(self) -> None:
        # close() leaves the group (LeaveGroup), running the revoke callback on the way out.
        self.closing = True
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as error:
            self.say(f"closing the consumer failed: {error}")
        self.say(f"stopped after processing {self.processed} messages")
        if self.reporter is not None:
            # After close() the consumer no longer knows who it was; say who it was last.
            self.reporter.report(
                ReportEvent.STOPPED,
                member_id=self.member_id,
                generation=self.generation,
                partitions=(),
                lag=None,
            )
            self.reporter.close(timeout=3.0)
        if self.record is not None:
            self.record.close()


def wait_for_join_gate(path: Path, settings: ConsumerSettings, stopped: Callable[[], bool]) -> bool:
    """Hold the join until the pod's gate writes `path` (a gate that holds only the join: the
    process has started and imported everything meanwhile); False if stopped first. The
    identity slot the operator handed the pod, written beside it, becomes group.instance.id."""
    print(f"[{settings.host}] holding the join until {path} appears", flush=True)
    while not path.exists():
        if stopped():
            return False
        time.sleep(JOIN_GATE_POLL_S)
    slot = path.with_name(JOIN_GATE_INSTANCE_ID_FILE)
    if slot.exists() and slot.read_text(encoding="utf-8").strip():
        settings.properties["group.instance.id"] = slot.read_text(encoding="utf-8").strip()
    print(f"[{settings.host}] the gate is open: joining", flush=True)
    return True


def main(argv: Sequence[str] | None = None, prog: str = "rebalancer-example-consumer") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Example consumer configured from KAFKA_* environment variables.",
    )
    parser.add_argument("--record-file", help="append topic, partition, offset, key per message")
    parser.add_argument("--config-file", help="librdkafka properties file (or KAFKA_CONFIG_FILE)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        settings = load_settings(config_file=args.config_file, record_file=args.record_file)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    gate = Path(os.environ[JOIN_GATE_ENV]) if os.environ.get(JOIN_GATE_ENV) else None
    # A consumer that takes its group.instance.id from an identity slot gets it when its gate
    # opens (the variable is there, empty): it can only be made once the gate has opened.
    slot_pending = os.environ.get("KAFKA_GROUP_INSTANCE_ID") == ""
    if gate is not None and slot_pending:
        if not wait_for_join_gate(gate, settings, lambda: bool(stopping)):
            return 0
        gate = None
    try:
        consumer = ExampleConsumer(settings)
    except KafkaException as error:
        print(f"error: the consumer settings are not valid: {error.args[0].str()}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, consumer.stop)
    signal.signal(signal.SIGINT, consumer.stop)
    consumer.stopping = bool(stopping)  # a SIGTERM while the consumer was being made
    if gate is not None:
        consumer.warm_up()
        if not wait_for_join_gate(gate, settings, lambda: consumer.stopping):
            consumer.consumer.close()
            return 0
    return consumer.run()


if __name__ == "__main__":
    raise SystemExit(main())
