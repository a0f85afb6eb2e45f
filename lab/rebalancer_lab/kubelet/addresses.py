"""Pod addresses: each pod gets a loopback address of its own, as each pod on a cluster has an IP.

Linux routes all of 127.0.0.0/8 to the loopback interface, so any 127.x.y.z can be bound and
reached without configuring anything. Pods get addresses from `network` (127.0.0.0/16 by
default), never the node's own 127.0.0.1, lowest free first: an address comes back into use
once its pod's processes are gone, as a cluster's IPAM reuses addresses. With its own address a
pod's processes can listen on a fixed port, `$(POD_IP):<port>`, next to every other pod's.

Two labs on one machine (a test run in parallel workers, say) give their pods different networks
through REBALANCER_LAB_POD_NETWORK, so that no two pods of different labs share an address.

Where the loopback interface answers only 127.0.0.1 (macOS without aliases), every pod has the
node's address, and two pods listening on the same port collide there.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import threading

logger = logging.getLogger(__name__)

NODE_ADDRESS = "127.0.0.1"
DEFAULT_POD_NETWORK = "127.0.0.0/16"
POD_NETWORK_VARIABLE = "REBALANCER_LAB_POD_NETWORK"


def configured_pod_network() -> str:
    """The network this machine's lab pods take addresses from: REBALANCER_LAB_POD_NETWORK,
    else 127.0.0.0/16. A value that is not a loopback network is refused by name."""
    value = os.environ.get(POD_NETWORK_VARIABLE, DEFAULT_POD_NETWORK)
    try:
        network = ipaddress.ip_network(value)
    except ValueError as error:
        raise ValueError(f"{POD_NETWORK_VARIABLE}={value!r}: {error}") from None
    if not (network.version == 4 and network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8"))):
        raise ValueError(
            f"{POD_NETWORK_VARIABLE}={value!r} is not in 127.0.0.0/8: lab pods take loopback "
            "addresses only (for example 127.1.0.0/16)"
        )
    return str(network)


def loopback_aliases_work(probe: str = "127.0.0.2") -> bool:
    """Whether an address of the loopback network other than 127.0.0.1 can be bound here."""
    try:
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            sock.bind((probe, 0))
    except OSError:
        return False
    return True


class PodAddresses:
    """One address per pod uid, held from the pod's sandbox until its processes are gone."""

    def __init__(
        self,
        network: str = DEFAULT_POD_NETWORK,
        node_address: str = NODE_ADDRESS,
        aliases: bool | None = None,
    ) -> None:
        self.network = ipaddress.ip_network(network)
        self.node_address = node_address
        self.aliases = loopback_aliases_work() if aliases is None else aliases
        if not self.aliases:
            logger.warning(
                "the loopback interface takes no address but %s: every pod gets it, and pods "
                "listening on the same port collide",
                node_address,
            )
        self._held: dict[str, str] = {}
        self._lock = threading.Lock()

    def acquire(self, uid: str, preferred: str | None = None) -> str:
        """The pod's address: the one it holds, else `preferred` (the address an earlier
        kubelet gave it) when free, else the lowest free one."""
        if not self.aliases:
            return self.node_address
        with self._lock:
            if uid in self._held:
                return self._held[uid]
            taken = set(self._held.values())
            if preferred and preferred not in taken and self._assignable(preferred):
                address: str | None = preferred
            else:
                address = next(
                    (
                        str(candidate)
                        for candidate in self.network.hosts()
                        if str(candidate) not in taken and str(candidate) != self.node_address
                    ),
                    None,
                )
            if address is None:
                raise RuntimeError(f"no free pod address left in {self.network}")
            self._held[uid] = address
            return address

    def release(self, uid: str) -> None:
        with self._lock:
            self._held.pop(uid, None)

    def held(self) -> dict[str, str]:
        with self._lock:
            return dict(self._held)

    def _assignable(self, text: str) -> bool:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            return False
        return (
            address in self.network
            and text != self.node_address
            and address not in (self.network.network_address, self.network.broadcast_address)
        )
