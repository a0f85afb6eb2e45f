"""The lab's servers get ports no outgoing connection can take from them."""

from __future__ import annotations

import socket

from rebalancer_lab.ports import ephemeral_range, free_port


def test_ports_are_picked_below_the_ephemeral_range_and_are_free() -> None:
    low, high = ephemeral_range()
    assert low < high
    picked = {free_port() for _ in range(20)}
    assert all(port < low for port in picked), (sorted(picked), low)
    assert len(picked) > 1  # random over the range, not one port for everybody
    port = picked.pop()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        # A port something listens on is never handed out.
        assert all(free_port() != port for _ in range(200))
