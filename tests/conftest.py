"""Settings for the whole run.

`make test` runs the suite in parallel workers (pytest-xdist, one test module per worker at a
time): each worker starts labs, brokers and control planes of its own on free ports, and its lab
pods take loopback addresses from a network of its own, so that no two pods of different labs
share an address (and a sidecar port picked by one worker cannot answer another's operator).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import pytest
from tests.status_blocks import watch_status_builders

from rebalancer.clients import patching
from rebalancer.clients.patching import STRICT_STATUS_VARIABLE
from rebalancer.structs.status_patches import StatusCheck, check_status_patch
from rebalancer_lab.kubelet.addresses import POD_NETWORK_VARIABLE

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under xdist
if _WORKER.startswith("gw"):
    os.environ.setdefault(POD_NETWORK_VARIABLE, f"127.{int(_WORKER[2:]) + 1}.0.0/16")

# Every status write of the suite is checked strictly against the status model: in this
# process, and in every operator a test starts (it inherits the environment). A write with a
# key the CRD does not declare then raises instead of being left out with an error logged.
os.environ.setdefault(STRICT_STATUS_VARIABLE, "1")


@pytest.fixture(autouse=True)
def status_writes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[StatusCheck]]:
    """Every status patch the test's code sends through clients/patching, and every status
    block a pure decision builds (tests/status_blocks.py), checked.

    The strict mode's exception may be swallowed by a retrying daemon; this fails the test in
    any case, naming each field. A test that writes a bad status on purpose is marked
    `status_violations_expected`."""
    checks: list[StatusCheck] = []

    def recording(fields: Mapping[str, object]) -> StatusCheck:
        check = check_status_patch(fields)
        checks.append(check)
        return check

    monkeypatch.setattr(patching, "check_status_patch", recording)
    watch_status_builders(monkeypatch, checks)
    yield checks
    if request.node.get_closest_marker("status_violations_expected") is None:
        undeclared = [str(violation) for check in checks for violation in check.violations]
        assert not undeclared, "status writes the CRD would prune or refuse:\n" + "\n".join(
            undeclared
        )
