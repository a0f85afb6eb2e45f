"""AdminPool shares one gateway per cluster key and closes it with its last user."""

from __future__ import annotations

import threading

import pytest

from rebalancer.clients.kafka_admin import (
    AdminPool,
    KafkaUnavailable,
    build_client_config,
    cluster_key,
)
from rebalancer.structs.brokers import SecuritySettings


def poll_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "kafka-admin-poll")


async def test_refcounting_shares_and_closes(bootstrap: str) -> None:
    pool = AdminPool()
    threads_before = poll_threads()
    key = cluster_key([bootstrap], None)
    config = build_client_config([bootstrap], None)

    first = pool.acquire(key, config)
    second = pool.acquire(key, config)
    assert first is second
    assert pool.users(key) == 2
    assert poll_threads() == threads_before + 1

    pool.release(key)
    assert not first.closed
    assert (await first.describe_cluster()).broker_count == 1

    pool.release(key)
    assert first.closed
    assert pool.users(key) == 0
    assert pool.keys() == []
    assert poll_threads() == threads_before
    with pytest.raises(KafkaUnavailable):
        await first.describe_cluster()

    # The next acquire connects afresh.
    third = pool.acquire(key, config)
    assert third is not first
    assert (await third.describe_cluster()).broker_count == 1
    pool.close_all()
    assert third.closed


async def test_different_identities_get_different_clients(bootstrap: str) -> None:
    pool = AdminPool()
    plain = cluster_key([bootstrap], None)
    other = cluster_key([bootstrap], SecuritySettings(protocol="PLAINTEXT", username="someone"))
    assert plain != other
    config = build_client_config([bootstrap], None)
    try:
        assert pool.acquire(plain, config) is not pool.acquire(other, config)
        assert pool.keys() == sorted([plain, other])
    finally:
        pool.close_all()
    assert pool.keys() == []


def test_release_of_an_unknown_key_is_harmless() -> None:
    AdminPool().release("nothing|PLAINTEXT|0")
