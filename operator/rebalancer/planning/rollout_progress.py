"""How far a rollout has come, and how long its pods waited at their join gates. Pure.

These are the figures the operator exports as metrics (rebalancer_rollout_*, rebalancer_gate_
wait_seconds); the state machine itself does not need them.
"""

from __future__ import annotations

from collections.abc import Iterable

from rebalancer.planning.rollout_actions import OpenGate
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.structs.workloads import WorkloadView


def batches_done(state: RolloutState) -> int:
    """Batches released and settled: all of them once Completed, those before the current batch
    while one is out, and for a paused or failed rollout those before the batch it stopped at.
    Between rollouts (Idle) nothing is planned, so nothing is done."""
    if state.phase is RolloutPhase.IDLE:
        return 0
    if state.phase is RolloutPhase.COMPLETED:
        return state.batches
    # A batch's number is set as it starts gathering (BatchOpening), after the one before it
    # settled: every batch before the current one is done, whatever the phase.
    return max(min(state.batch - 1, state.batches), 0)


def gate_waits(workload: WorkloadView, actions: Iterable[object], now: float) -> list[float]:
    """Seconds each pod an OpenGate action releases waited since it was created.

    A pod's creation is when its wait for its batch began: the gate holds it from its first
    container on. Pods the workload no longer lists (deleted meanwhile) are left out.
    """
    created = {pod.name: pod.created_at for pod in workload.pods}
    waits: list[float] = []
    for action in actions:
        if not isinstance(action, OpenGate):
            continue
        for name in action.pods:
            if name in created:
                waits.append(max(now - created[name], 0.0))
    return waits
