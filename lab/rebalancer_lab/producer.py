"""The lab's producer: `python -m rebalancer_lab.producer --topic orders --rate 50`.

Sends numbered messages (key "<n>", value {"n": n, "ts": ...}) at a steady rate, creating the
topic with --partitions partitions if it is absent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from rebalancer.clients.kafka_admin import AdminGateway, KafkaGatewayError, build_client_config

logger = logging.getLogger("rebalancer_lab.producer")


async def ensure_topic(bootstrap: str, topic: str, partitions: int) -> int:
    """Create `topic` if absent; return its partition count."""
    gateway = AdminGateway(build_client_config(bootstrap.split(","), None))
    try:
        topics = await gateway.list_topics()
        if topic not in topics:
            await gateway.create_topic(topic, partitions)
            topics = await gateway.list_topics()
        return topics.get(topic, partitions)
    finally:
        gateway.close()


class NumberedProducer:
    def __init__(self, bootstrap: str, topic: str, extra: dict[str, str] | None = None) -> None:
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "lab-producer"}
        config.update(extra or {})
        config["logger"] = logging.getLogger("rebalancer_lab.producer.librdkafka")
        self.producer = Producer(config)
        self.topic = topic
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self.stopping = False

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed += 1
            if self.failed == 1:
                logger.warning("delivery failed: %s", error.str())

    def send(self, number: int) -> None:
        value = json.dumps({"n": number, "ts": round(time.time(), 3)})
        while True:
            try:
                self.producer.produce(
                    self.topic, key=str(number), value=value, on_delivery=self._delivered
                )
                break
            except BufferError:
                # The local queue is full: wait for deliveries rather than drop a number.
                self.producer.poll(0.1)
        self.sent += 1
        self.producer.poll(0)

    def run(self, rate: float, count: int, start: int = 0) -> None:
        interval = 1.0 / rate if rate > 0 else 0.0
        next_at = time.monotonic()
        number = start
        while not self.stopping and (count <= 0 or number < start + count):
            self.send(number)
            number += 1
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                # poll() returns once it has served a delivery report, long before `delay`:
                # polled once, the rate was the broker's round trip, not `rate`.
                while delay > 0 and not self.stopping:
                    self.producer.poll(delay)
                    delay = next_at - time.monotonic()
        self.producer.flush(10)

    def stop(self, _signum: int, _frame: FrameType | None) -> None:
        self.stopping = True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rebalancer_lab.producer", description="Produce numbered messages."
    )
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="host:port[,...] (default: KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument("--topic", default=os.environ.get("KAFKA_TOPIC"), help="or KAFKA_TOPIC")
    parser.add_argument("--partitions", type=int, default=6, help="when creating the topic")
    parser.add_argument("--rate", type=float, default=10.0, help="messages per second; 0 = max")
    parser.add_argument("--count", type=int, default=0, help="stop after this many; 0 = never")
    parser.add_argument("--start", type=int, default=0, help="first message number")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    if not args.bootstrap or not args.topic:
        parser.error("--bootstrap (or KAFKA_BOOTSTRAP_SERVERS) and --topic are required")
    try:
        partitions = asyncio.run(ensure_topic(args.bootstrap, args.topic, args.partitions))
    except KafkaGatewayError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    producer = NumberedProducer(args.bootstrap, args.topic)
    signal.signal(signal.SIGTERM, producer.stop)
    signal.signal(signal.SIGINT, producer.stop)
    print(
        f"producing to {args.topic} ({partitions} partitions) at "
        f"{args.rate:g}/s{f', {args.count} messages' if args.count else ''}",
        flush=True,
    )
    producer.run(args.rate, args.count, args.start)
    print(
        f"produced {producer.delivered} of {producer.sent} messages to {args.topic}"
        f"{f', {producer.failed} failed' if producer.failed else ''}",
        flush=True,
    )
    return 0 if producer.failed == 0 and producer.delivered == producer.sent else 1


if __name__ == "__main__":
    raise SystemExit(main())
