"""AdminGateway against a real Apache Kafka broker, and against addresses where no Kafka answers."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kafka_support import free_port, fresh

from rebalancer.clients.kafka_admin import (
    LIBRDKAFKA_LOGGER_NAME,
    AdminGateway,
    KafkaUnavailable,
    build_client_config,
)
from rebalancer.structs.brokers import BrokerProfile, GroupState


@pytest.fixture
def gateway(bootstrap: str) -> Iterator[AdminGateway]:
    admin = AdminGateway(build_client_config([bootstrap], None))
    yield admin
    admin.close()


async def test_describe_cluster(gateway: AdminGateway) -> None:
    cluster = await gateway.describe_cluster()
    assert cluster.broker_count == 1
    assert cluster.controller_id is not None
    assert cluster.cluster_id
    assert gateway.profile is BrokerProfile.APACHE_KAFKA


async def test_create_and_list_topics(gateway: AdminGateway) -> None:
    name = fresh("topic")
    assert await gateway.create_topic(name, 3) is True
    assert await gateway.create_topic(name, 3) is False
    topics = await gateway.list_topics()
    assert topics[name] == 3


async def test_a_group_nobody_joined_is_empty_and_known_to_be(gateway: AdminGateway) -> None:
    group_id = fresh("nobody")
    view = await gateway.describe_group(group_id)
    assert view.group_id == group_id
    # Apache Kafka says Dead for a group it never heard of.
    assert view.state is GroupState.DEAD
    assert view.members_known
    assert view.members == ()
    offsets = await gateway.committed_offsets(group_id)
    assert offsets.offsets == ()


async def test_concurrent_calls_share_one_client(gateway: AdminGateway) -> None:
    views = await asyncio.gather(*(gateway.describe_group(fresh("many")) for _ in range(10)))
    assert len({view.group_id for view in views}) == 10


async def test_a_closed_gateway_says_so(bootstrap: str) -> None:
    admin = AdminGateway(build_client_config([bootstrap], None))
    admin.close()
    admin.close()
    with pytest.raises(KafkaUnavailable, match="closed"):
        await admin.describe_cluster()


async def test_refused_connection_is_reported_fast_and_readably(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger=LIBRDKAFKA_LOGGER_NAME)
    port = free_port()
    admin = AdminGateway(build_client_config([f"127.0.0.1:{port}"], None))
    try:
        for call in (admin.describe_cluster, lambda: admin.describe_group("g"), admin.list_topics):
            started = time.monotonic()
            with pytest.raises(KafkaUnavailable) as caught:
                await call()
            assert time.monotonic() - started < 5
            assert (
                str(caught.value) == f"cannot reach Kafka at 127.0.0.1:{port}: connection refused"
            )
    finally:
        admin.close()
    # librdkafka's own words went to Python logging, once, not to stderr.
    refusals = [r for r in caplog.records if "Connection refused" in r.getMessage()]
    assert refusals, "librdkafka's log did not reach the Python logger"
    assert len(refusals) <= 2
    assert "Connection refused" not in capfd.readouterr().err


async def test_unresolvable_host_is_named() -> None:
    admin = AdminGateway(build_client_config(["no-such-host.invalid:9092"], None))
    try:
        started = time.monotonic()
        with pytest.raises(KafkaUnavailable, match="host name does not resolve"):
            await admin.describe_group("g")
        assert time.monotonic() - started < 8
    finally:
        admin.close()


async def test_a_port_that_never_answers_times_out_in_seconds() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = silent.getsockname()[1]
    config = build_client_config([f"127.0.0.1:{port}"], None)
    config["socket.connection.setup.timeout.ms"] = "1000"
    admin = AdminGateway(config)
    try:
        started = time.monotonic()
        with pytest.raises(KafkaUnavailable, match="did not answer as Kafka"):
            await admin.describe_cluster()
        assert time.monotonic() - started < 8
    finally:
        admin.close()
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        silent.close()
