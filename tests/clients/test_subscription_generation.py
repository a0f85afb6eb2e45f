"""The generation a classic member joined from, read from its ConsumerProtocolSubscription
(Kafka's common/message/ConsumerProtocolSubscription.json: version 2 added GenerationId)."""

from __future__ import annotations

import struct

from rebalancer.clients.kafka_wire import subscription_generation


def text(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def subscription(version: int, generation: int, owned: dict[str, list[int]]) -> bytes:
    body = struct.pack(">h", version) + struct.pack(">i", 2) + text("words") + text("more")
    body += struct.pack(">i", 3) + b"\x01\x02\x03"  # user data (a Streams app's SubscriptionInfo)
    if version >= 1:
        body += struct.pack(">i", len(owned))
        for topic, partitions in owned.items():
            body += text(topic) + struct.pack(">i", len(partitions))
            body += b"".join(struct.pack(">i", p) for p in partitions)
    if version >= 2:
        body += struct.pack(">i", generation)
    if version >= 3:
        body += struct.pack(">h", -1)  # no rack
    return body


def test_the_generation_is_read_past_topics_user_data_and_owned_partitions() -> None:
    assert subscription_generation(subscription(3, 7, {"words": [0, 3], "more": [1]})) == 7
    assert subscription_generation(subscription(2, -1, {})) == -1


def test_a_subscription_that_does_not_carry_it_says_none() -> None:
    assert subscription_generation(subscription(1, 7, {"words": [0]})) is None
    assert subscription_generation(subscription(3, 7, {})[:-5]) is None  # cut short
    assert subscription_generation(b"") is None
    assert subscription_generation(None) is None
