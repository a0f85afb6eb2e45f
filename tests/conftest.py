"""Settings for the whole run.

`make test` runs the suite in parallel workers (pytest-xdist, one test module per worker at a
time): each worker starts labs, brokers and control planes of its own on free ports, and its lab
pods take loopback addresses from a network of its own, so that no two pods of different labs
share an address (and a sidecar port picked by one worker cannot answer another's operator).
"""

from __future__ import annotations

import os

from rebalancer_lab.kubelet.addresses import POD_NETWORK_VARIABLE

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under xdist
if _WORKER.startswith("gw"):
    os.environ.setdefault(POD_NETWORK_VARIABLE, f"127.{int(_WORKER[2:]) + 1}.0.0/16")
