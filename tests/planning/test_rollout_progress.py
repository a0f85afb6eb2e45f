"""Rollout progress and gate waits, the figures behind rebalancer_rollout_* and
rebalancer_gate_wait_seconds: pure tables."""

from __future__ import annotations

import pytest

from rebalancer.planning.rollout_actions import HoldGates, OpenGate
from rebalancer.planning.rollout_progress import batches_done, gate_waits
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.gates import GateState
from rebalancer.structs.specs import WorkloadKind
from rebalancer.structs.workloads import PodView, WorkloadView

P = RolloutPhase
SIZES = (3, 3, 2)


@pytest.mark.parametrize(
    ("phase", "batch", "done"),
    [
        (P.IDLE, 0, 0),
        (P.PLANNING, 0, 0),
        (P.BATCH_OPENING, 1, 0),
        (P.BATCH_JOINING, 1, 0),
        (P.BATCH_SETTLING, 1, 0),
        (P.BATCH_OPENING, 2, 1),
        (P.BATCH_SETTLING, 3, 2),
        (P.COMPLETED, 3, 3),
        (P.PAUSED, 2, 1),
        (P.FAILED, 3, 2),
    ],
)
def test_batches_done(phase: RolloutPhase, batch: int, done: int) -> None:
    assert batches_done(RolloutState(phase=phase, batch=batch, sizes=SIZES)) == done


def test_idle_after_a_rollout_counts_nothing_done() -> None:
    assert batches_done(RolloutState(phase=P.IDLE, batch=3, sizes=SIZES)) == 0


def pod(name: str, created_at: float) -> PodView:
    return PodView(
        name=name,
        uid=f"uid-{name}",
        ordinal=None,
        updated=True,
        gate=GateState.WAITING,
        gate_batch=None,
        held_at=None,
        ready=False,
        terminating=False,
        created_at=created_at,
    )


def test_gate_waits_run_from_each_released_pods_creation() -> None:
    workload = WorkloadView(
        kind=WorkloadKind.DEPLOYMENT,
        name="orders",
        replicas=3,
        current_replicas=3,
        updated_replicas=3,
        ready_replicas=0,
        update_revision="r2",
        current_revision="r1",
        generation=2,
        observed_generation=2,
        pods=(pod("a", 100.0), pod("b", 110.0), pod("c", 120.0)),
    )
    actions = [
        OpenGate("r1/1", ("a", "b", "gone")),
        HoldGates(("c",)),  # still held: no wait ended
    ]
    # "gone" was deleted meanwhile: the workload no longer lists it, so no wait is made up.
    assert gate_waits(workload, actions, 130.0) == [30.0, 20.0]
    # A clock behind a pod's creation never gives a negative wait.
    assert gate_waits(workload, [OpenGate("r1/2", ("c",))], 119.0) == [0.0]
