"""Free TCP ports for the lab's own servers, chosen below the kernel's ephemeral range.

`bind(port 0)` gets a port from the ephemeral range (net.ipv4.ip_local_port_range, 32768-60999
by default), the range outgoing connections take their source ports from. A port found free
that way and closed again can be taken by any outgoing connection (to Kafka, to the API server)
before the server meant for it binds, which then fails with EADDRINUSE: seen in CI, where the
operator's report server retried its bind every 60 s and never got the port. No outgoing
connection takes a port below the range, so one found free there stays free unless another
server picks the same one: the pick is random over some 20,000 ports and checked by binding.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# The lowest port picked: clear of the well-known and most registered services' ports.
LOWEST = 10000
TRIES = 200


def ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(part) for part in RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` nothing listens on, below the ephemeral range where there is room."""
    low, _ = ephemeral_range()
    if low - LOWEST >= 1000:
        for _ in range(TRIES):
            port = random.randrange(LOWEST, low)
            if _bindable(host, port):
                return port
    # No room below the range (a tuned kernel): the kernel's own pick, as before.
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
