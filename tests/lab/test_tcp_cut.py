"""rebalancer_lab.tcp_cut against an echo server on loopback: bytes pass both ways through the
proxy; a cut drops the open connections and refuses or blackholes new ones; a heal lets new
ones through again."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.ports import free_port
from rebalancer_lab.tcp_cut import TcpCut

HOST = "127.0.0.1"


class Echo(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__((HOST, 0), EchoHandler)
        self.accepted = 0

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class EchoHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        assert isinstance(self.server, Echo)
        self.server.accepted += 1
        with self.request as connection:
            try:
                while data := connection.recv(65536):
                    connection.sendall(data)
            except OSError:
                pass


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: Echo) -> Iterator[TcpCut]:
    with TcpCut(HOST, [(free_port(), echo.port)]) as running:
        yield running


def connect(proxy: TcpCut) -> socket.socket:
    return socket.create_connection((HOST, proxy.routes[0][0]), timeout=5)


def echoed(connection: socket.socket, payload: bytes) -> bytes:
    connection.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = connection.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def closed(connection: socket.socket) -> bool:
    """The far end has closed or reset the connection."""
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True


def test_bytes_pass_both_ways(proxy: TcpCut, echo: Echo) -> None:
    payload = bytes(range(256)) * 1000  # more than one read's worth
    with connect(proxy) as connection:
        assert echoed(connection, payload) == payload
        assert echoed(connection, b"again") == b"again"
    assert echo.accepted == 1
    assert proxy.passed == 1
    assert proxy.addresses == f"{HOST}:{proxy.routes[0][0]}"


def test_a_refusing_cut_drops_open_connections_and_refuses_new_ones(proxy: TcpCut) -> None:
    with connect(proxy) as before:
        assert echoed(before, b"ping") == b"ping"
        assert proxy.cut("refuse") == 1
        assert closed(before)
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    proxy.heal()
    with connect(proxy) as after:
        assert echoed(after, b"back") == b"back"


def test_a_blackhole_accepts_and_forwards_nothing_until_healed(proxy: TcpCut, echo: Echo) -> None:
    with connect(proxy) as before:
        assert echoed(before, b"ping") == b"ping"
        assert proxy.cut("blackhole") == 1
        assert closed(before)
    with connect(proxy) as held:
        held.settimeout(0.5)
        held.sendall(b"anyone?")
        with pytest.raises(TimeoutError):
            held.recv(1)
        assert echo.accepted == 1  # the held connection never reached the server
        held.settimeout(5)
        proxy.heal()
        assert closed(held)
    with connect(proxy) as after:
        assert echoed(after, b"back") == b"back"
    assert proxy.cuts == 1


def test_a_server_that_is_down_fails_the_connection() -> None:
    with TcpCut(HOST, [(free_port(), free_port())]) as proxy:
        try:
            connection = connect(proxy)
        except ConnectionResetError:
            return  # reset before connect() returned: on loopback the proxy can be that quick
        with connection:
            assert closed(connection)


def test_an_unknown_mode_is_refused_by_name(proxy: TcpCut) -> None:
    with pytest.raises(ValueError, match=r"'drop'.*refuse, blackhole"):
        proxy.cut("drop")


@pytest.mark.e2e
def test_a_client_bootstrapped_on_the_side_listener_reaches_kafka_through_the_proxy_alone(
    tmp_path: Path,
) -> None:
    """Kafka answers metadata with the addresses of the listener the client came in on: one
    bootstrapped on the proxy is told of the proxy's port for the node, so a cut cuts it while
    a client of the main listener keeps going."""
    broker = KafkaBroker(log_dir=tmp_path, side_listener="OPERATOR").start()
    try:
        [(advertised, listening)] = broker.side_routes()
        assert broker.side_bootstrap == f"{HOST}:{advertised}"
        with TcpCut(HOST, broker.side_routes()) as proxy:
            through = AdminClient({"bootstrap.servers": proxy.addresses, "log_level": "0"})
            direct = AdminClient({"bootstrap.servers": broker.bootstrap})
            [node] = through.list_topics(timeout=20).brokers.values()
            assert (node.host, node.port) == (HOST, advertised)
            [node] = direct.list_topics(timeout=20).brokers.values()
            assert node.port == broker.port != listening
            assert proxy.passed >= 1
            proxy.cut("refuse")
            with pytest.raises(KafkaException):
                through.list_topics(timeout=3)
            assert direct.list_topics(timeout=10).brokers
            proxy.heal()
            assert through.list_topics(timeout=20).brokers
    finally:
        broker.stop()
