"""What a pod's status says about the runs of its consumer container (pure data).

The history's pod-start and pod-stop records (docs/history.md) come from these fields, as the
API server gives them: `status.containerStatuses[]` of the consumer container (`restartCount`,
`state.running.startedAt`, `state.terminated`, `lastState.terminated`), `status.startTime` and
`metadata.deletionTimestamp`, and the join gate's start in `status.initContainerStatuses[]`.
A run is numbered by the restart count it ran under: run 0 is the pod's first container, run n
its n-th restart; a run's start and stop are each one fact, keyed by pod uid and run, however
often the operator reads them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PodLifecycle:
    """The consumer container's current and previous run (None: the status does not say)."""

    # The consumer container's name (the pod's first container that is not the operator's).
    container: str | None = None
    # status.startTime: the kubelet accepted the pod (before its init containers ran).
    scheduled_at: float | None = None
    # restartCount: the number of the current run.
    restarts: int = 0
    # The current run: state.running.startedAt, or state.terminated's times and exit code.
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    # The run before (lastState.terminated): when it ended and how.
    previous_finished_at: float | None = None
    previous_exit_code: int | None = None
    # metadata.deletionTimestamp: the pod is being deleted (its containers were told to stop).
    deleting_at: float | None = None
    # The join gate's init container started (state.running or state.terminated startedAt):
    # the pod reached its gate. None for a pod without the gate. Init containers run once per
    # pod, before run 0; a restarted consumer container does not pass the gate again.
    gate_started_at: float | None = None
