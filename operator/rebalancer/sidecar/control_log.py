"""The control log: requests and outcomes on the group's control topic, read by every sidecar.

A reader that belongs to no group reads the single partition from its beginning (the topic is
tiny and kept short by retention), so a sidecar that starts or takes over knows every request
still alive. The writer sends one record per batch, so each request is its own offset and
a reader's position says exactly which requests it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from rebalancer.structs.enforcement import (
    ControlRecord,
    RecordInvalid,
    decode_record,
    encode_record,
)
from rebalancer.structs.errors import RebalancerError

logger = logging.getLogger(__name__)

# Only these connection settings carry over to the reader and the writer.
_CLIENT_PREFIXES = ("bootstrap.", "security.", "sasl.", "ssl.", "socket.", "client.")
# docs/kafka-security.md lists every ACL the sidecar needs, and why.
ACL_DOC = "docs/kafka-security.md"


def refused(error_text: str) -> bool:
    """Whether a Kafka error says the principal lacks an ACL (librdkafka's words)."""
    return "authorization failed" in error_text.lower()


class ControlWriteFailed(RebalancerError, RuntimeError):
    """A record did not reach the control topic; the request was not recorded."""


def connection_config(kafka: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in kafka.items() if key.startswith(_CLIENT_PREFIXES)}


class ControlReader:
    """Reads the control partition on a thread of its own and hands records to `on_record`."""

    def __init__(
        self,
        kafka: dict[str, str],
        topic: str,
        on_record: Callable[[ControlRecord, int], None],
    ) -> None:
        config: dict[str, Any] = connection_config(kafka)
        # librdkafka insists on a group id; the reader never joins or commits with it.
        config["group.id"] = f"{topic}.reader"
        config["enable.auto.commit"] = "false"
        config["enable.auto.offset.store"] = "false"
        config["logger"] = logging.getLogger("rebalancer.sidecar.librdkafka")
        self.topic = topic
        self._on_record = on_record
        self._refusal: str | None = None
        self._consumer: Any = Consumer(config)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sidecar-reader", daemon=True)

    def start(self) -> None:
        self._consumer.assign([KafkaPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    message = self._consumer.poll(0.2)
                except (KafkaException, RuntimeError) as error:
                    logger.warning("reading the control topic failed: %s", error)
                    self._stopping.wait(0.5)
                    continue
                if message is None:
                    continue
                if message.error() is not None:
                    self._read_error(str(message.error().str()))
                    continue
                try:
                    record = decode_record(message.value())
                except RecordInvalid as error:
                    logger.warning("skipping control record at %d: %s", message.offset(), error)
                    continue
                self._on_record(record, int(message.offset()))
        finally:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as error:
                logger.debug("closing the control reader: %s", error)

    def _read_error(self, text: str) -> None:
        # A missing ACL never heals by itself: say it once, loudly (requests go unseen). The
        # reader's group id only satisfies librdkafka: its FindCoordinator may be refused
        # (no ACL on that group is needed), which costs nothing, so only the topic counts.
        if "topic authorization failed" in text.lower() and text != self._refusal:
            logger.warning(
                "the broker refuses to let the sidecar read its control topic %s (%s): grant "
                "the sidecar's Kafka user Read on topic %s (%s)",
                self.topic,
                text,
                self.topic,
                ACL_DOC,
            )
            self._refusal = text
            return
        logger.debug("control topic: %s", text)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


class ControlWriter:
    def __init__(self, kafka: dict[str, str], topic: str, timeout: float = 10.0) -> None:
        config: dict[str, Any] = connection_config(kafka)
        config.update({"linger.ms": "0", "batch.num.messages": "1", "acks": "all"})
        config["logger"] = logging.getLogger("rebalancer.sidecar.librdkafka")
        self.topic = topic
        self.timeout = timeout
        self._producer: Any = Producer(config)
        self._lock = threading.Lock()

    def _write_blocking(self, key: str, record: ControlRecord) -> None:
        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(str(error.str()))

        with self._lock:
            self._producer.produce(
                self.topic, key=key.encode(), value=encode_record(record), on_delivery=delivered
            )
            left = self._producer.flush(self.timeout)
        if left:
            raise ControlWriteFailed(
                f"the control topic {self.topic} took no write within {self.timeout:g} s"
            )
        if failures:
            grant = ""
            if refused(failures[0]):
                grant = f"; grant the sidecar's Kafka user Write on topic {self.topic}"
            raise ControlWriteFailed(f"writing to {self.topic} failed: {failures[0]}{grant}")

    async def write(self, key: str, record: ControlRecord) -> None:
        await asyncio.to_thread(self._write_blocking, key, record)

    def close(self) -> None:
        with self._lock:
            self._producer.flush(2.0)
