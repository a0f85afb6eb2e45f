"""Two operator replicas elect a leader; the leader SIGKILLed mid-rollout, the standby finishes it.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a `rebalancer gate` init container, then a consumer process), and two
`rebalancer operator --peering` processes sharing one ClusterKopfPeering, as the chart's two
replicas do. The older one leads; the other waits paused. A rolling update of a gated
StatefulSet of three, in batches of one, is under way when the leader is killed (no goodbye in
the peering object, as a node failure would leave it). The standby must take over within 15 s
(it says so on /metrics and starts writing status), finish the same rollout once, every pod
replaced once, and a replica started again afterwards must join as a standby, not take the
lead back.
"""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.support import apply, eventually, free_port, kubectl
from tests.reliability.rollout_fleets import (
    PARTITIONS,
    assert_rolled_once,
    assert_truthful_end,
    bump_template,
    completed,
    fleet,
    managed,
    observed_since,
    pods_lab,
    rollout_of,
    settled,
)

from rebalancer.lab.processes import ChildProcess, python_module
from rebalancer.lab.producer import ensure_topic
from rebalancer.lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

NAME = "takeover"
REPLICAS = 3
PEERING = "rebalancer"
# The operator's default (--peering-lifetime 10): a takeover within it plus a resume.
TAKEOVER_LIMIT_S = 15.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


class Replica:
    """One `rebalancer operator --peering` process and its /metrics."""

    def __init__(self, lab: Lab, label: str, reports_port: int) -> None:
        self.port = reports_port
        assert lab.kubeconfig is not None
        state = lab.config.state_dir
        argv = python_module(
            "rebalancer",
            "operator",
            "--kubeconfig",
            str(lab.kubeconfig),
            "--reports-host",
            lab.config.host,
            "--reports-port",
            str(reports_port),
            "--history-dir",
            str(state / "history"),
            "--status-refresh-seconds",
            "15",
            "--peering",
            PEERING,
        )
        self.log_path = state / "logs" / f"operator-{label}.log"
        self.child = ChildProcess(f"operator-{label}", argv, self.log_path)
        self.url = f"http://{lab.config.host}:{reports_port}/metrics"

    def start(self) -> Replica:
        self.child.start()
        return self

    def leader(self) -> float | None:
        """rebalancer_leader on this replica; None while it does not answer."""
        try:
            with urllib.request.urlopen(self.url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("rebalancer_leader "):
                return float(line.split()[-1])
        return None

    def kill(self) -> None:
        process = self.child.process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture(scope="module")
def replicas(lab: Lab) -> Iterator[dict[str, Replica]]:
    """The lab's own operator (standalone) stopped; two peering replicas instead, `first`
    started before `second` and so its leader. `first` serves the lab's report port, where the
    lab's consumers report."""
    assert lab.operator is not None
    lab.operator.stop(grace=15)
    apply(
        lab,
        {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": PEERING}},
    )
    first = Replica(lab, "first", lab.config.reports_port).start()
    eventually(lambda: first.leader() == 1.0, 60, "the first replica leading")
    second = Replica(lab, "second", free_port()).start()
    eventually(lambda: second.leader() == 0.0, 60, "the second replica standing by")
    group = {"first": first, "second": second}
    try:
        yield group
    finally:
        for replica in group.values():
            replica.child.stop(grace=15)


def test_the_standby_finishes_a_rollout_its_leader_was_killed_in(
    lab: Lab, replicas: dict[str, Replica]
) -> None:
    first, second = replicas["first"], replicas["second"]
    asyncio.run(ensure_topic(lab.bootstrap, NAME, PARTITIONS))
    apply(lab, managed(lab, NAME), fleet(lab, NAME, REPLICAS))
    cold = eventually(lambda: completed(lab, NAME), 120, "the cold start Completed")
    settled(lab, NAME, REPLICAS)
    assert first.leader() == 1.0 and second.leader() == 0.0
    # kopf keeps the standby paused: no watch, no handler, no daemon of its own.
    assert "kopf.objects" not in second.log(), second.log()[-3000:]

    bump_template(lab, NAME, "2")

    def mid_rollout() -> dict[str, object] | None:
        rollout = rollout_of(lab, NAME)
        fresh = rollout.get("rolloutId") not in (cold["rolloutId"], None)
        return rollout if fresh and rollout.get("phase") == "BatchJoining" else None

    at_kill = eventually(mid_rollout, 120, "the rollout's first batch joining", every=0.1)
    killed_wall, killed = time.time(), time.monotonic()
    first.kill()

    eventually(lambda: second.leader() == 1.0, 30, "the standby leading", every=0.2)
    leading_s = time.monotonic() - killed
    eventually(lambda: observed_since(lab, NAME, killed_wall), 30, "status written", every=0.2)
    acting_s = time.monotonic() - killed
    print(f"takeover: leader after {leading_s:.1f} s, status written after {acting_s:.1f} s")
    assert acting_s < TAKEOVER_LIMIT_S, (leading_s, acting_s)

    final = eventually(
        lambda: completed(lab, NAME, cold["rolloutId"]), 180, "the rollout Completed"
    )
    # The same rollout, finished by the standby, every pod replaced once in its batch.
    assert final["rolloutId"] == at_kill["rolloutId"], (at_kill, final)
    assert_rolled_once(lab, NAME, final, REPLICAS)
    assert_truthful_end(lab, NAME, REPLICAS)
    assert "Resuming operations" in second.log(), second.log()[-3000:]

    # Started again, the killed replica joins behind the one that took over.
    restarted = Replica(lab, "first-again", free_port()).start()
    replicas["first-again"] = restarted
    eventually(lambda: restarted.leader() == 0.0, 60, "the restarted replica standing by")
    time.sleep(5)
    assert second.leader() == 1.0 and restarted.leader() == 0.0
    peering = kubectl(lab, "get", "clusterkopfpeering", PEERING, "-o", "yaml")
    assert "lastseen" in peering, peering
