"""MemberReporter against a real local HTTP server: body, auth, never blocking, dropping."""

from __future__ import annotations

import http.server
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests import polling

from rebalancer.clients.reporting import MemberIdentity, MemberReporter, build_report_body
from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.reports import parse_report
from rebalancer_lab.ports import free_port

KEYS = {
    "version",
    "groupId",
    "namespace",
    "consumerGroup",
    "member",
    "event",
    "generation",
    "protocol",
    "assignmentStrategy",
    "partitions",
    "lag",
    "timestamp",
}


class Sink:
    """A tiny report endpoint on 127.0.0.1; `status` decides the answer."""

    def __init__(self, port: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.status = 202
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                if sink.status == 202:
                    sink.bodies.append(body)
                    sink.headers.append(dict(self.headers))
                self.send_response(sink.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/reports"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    server = Sink()
    yield server
    server.close()


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    polling.eventually(condition, "condition met", timeout, every=0.02, not_yet=())


def reporter(url: str, **options: Any) -> MemberReporter:
    return MemberReporter(
        url,
        options.pop("token", None),
        group_id="orders",
        client_id="c-1",
        host="orders-0",
        assignment_strategy="cooperative-sticky",
        **options,
    )


def test_reports_have_exactly_the_documented_keys_and_the_token(sink: Sink) -> None:
    sender = reporter(sink.url, token="s3cret", namespace="default", consumer_group="orders")
    sender.report(
        "assigned",
        member_id="m-1",
        generation=3,
        partitions=[TopicPartition("t", 1), ("t", 0)],
        lag=12,
    )
    wait_for(lambda: len(sink.bodies) == 1)
    sender.close()
    body = sink.bodies[0]
    assert set(body) == KEYS
    assert body["member"] == {
        "clientId": "c-1",
        "memberId": "m-1",
        "instanceId": None,
        "host": "orders-0",
    }
    assert body["partitions"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]
    assert (body["event"], body["generation"], body["lag"]) == ("assigned", 3, 12)
    assert (body["namespace"], body["consumerGroup"]) == ("default", "orders")
    assert sink.headers[0]["Authorization"] == "Bearer s3cret"
    assert sink.headers[0]["Content-Type"] == "application/json"
    # The operator's own parser accepts what the reporter sends.
    parsed = parse_report(body, received_at=time.time())
    assert parsed.partitions == (TopicPartition("t", 0), TopicPartition("t", 1))


def test_no_token_no_authorization_header(sink: Sink) -> None:
    sender = reporter(sink.url)
    sender.report("heartbeat", member_id="m", generation=1, partitions=[])
    wait_for(lambda: len(sink.bodies) == 1)
    sender.close()
    assert "Authorization" not in sink.headers[0]


def test_operator_down_never_blocks_drops_oldest_logs_once_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    sender = reporter(f"http://127.0.0.1:{port}/v1/reports", max_queued=5)
    caplog.set_level(logging.INFO, logger="rebalancer.clients.reporting")
    started = time.monotonic()
    for generation in range(20):
        sender.report("heartbeat", member_id="m", generation=generation, partitions=[])
    assert time.monotonic() - started < 0.5
    wait_for(lambda: any("cannot deliver" in r.getMessage() for r in caplog.records))
    assert sender.pending() <= 5
    assert sender.dropped >= 15
    time.sleep(1.2)  # a few retries while down
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"127.0.0.1:{port}" in warnings[0].getMessage()

    sink = Sink(port)
    try:
        wait_for(lambda: sender.pending() == 0, timeout=10)
        sender.close()
        generations = [body["generation"] for body in sink.bodies]
        assert generations == sorted(generations)
        assert generations[-1] == 19
        assert len(generations) <= 6
        assert any("again" in r.getMessage() for r in caplog.records)
    finally:
        sink.close()


def test_a_refused_report_is_dropped_not_retried(sink: Sink) -> None:
    sink.status = 400
    sender = reporter(sink.url)
    sender.report("assigned", member_id="m", generation=1, partitions=[])
    wait_for(lambda: sender.rejected == 1)
    wait_for(lambda: sender.pending() == 0)
    sender.close()


def test_close_flushes_what_is_queued(sink: Sink) -> None:
    sender = reporter(sink.url)
    for generation in range(10):
        sender.report("heartbeat", member_id="m", generation=generation, partitions=[])
    sender.report("stopped", member_id="m", generation=9, partitions=[])
    sender.close(timeout=5)
    assert sink.bodies[-1]["event"] == "stopped"
    assert len(sink.bodies) == 11


def test_close_gives_up_when_the_operator_is_away() -> None:
    sender = reporter(f"http://127.0.0.1:{free_port()}/v1/reports")
    sender.report("stopped", member_id="m", generation=1, partitions=[])
    started = time.monotonic()
    sender.close(timeout=0.5)
    assert time.monotonic() - started < 2


def test_unknown_event_is_refused_at_once() -> None:
    identity = MemberIdentity(group_id="g", client_id="c", host="h")
    with pytest.raises(ValueError):
        build_report_body(
            identity, "exploded", member_id="", generation=-1, partitions=[], lag=None, timestamp=0
        )


def test_from_env_needs_a_url() -> None:
    assert MemberReporter.from_env(group_id="g", client_id="c", host="h", environ={}) is None
    built = MemberReporter.from_env(
        group_id="g",
        client_id="c",
        host="h",
        environ={
            "REBALANCER_REPORT_URL": "http://127.0.0.1:9/v1/reports",
            "REBALANCER_NAMESPACE": "team-a",
        },
    )
    assert built is not None
    assert built.identity.namespace == "team-a"
    built.close(timeout=0)
