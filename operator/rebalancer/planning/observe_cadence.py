"""How soon the observer looks at a group again (pure).

The spec's observe.intervalSeconds is the pace of a group at rest. A group that is moving (a
rebalance in progress, a rollout running, a generation some members have not reported) is
looked at sooner, so its status and the rollout planner follow it closely; a group that has
looked the same for several looks is looked at less often, up to `quiet_factor` times its
interval, so that thousands of idle groups cost the brokers and kube-apiserver little. A member
report or a settings change still wakes the observer at once (ReportHub wakeups), whatever the
delay chosen here.

Groups that are not moving look on a grid of their interval, the same instants for every group
of that interval (`on_grid`): their describes then fall within the batch reader's window and go
out as one request per coordinator, where looks at each group's own phase would each send one.
"""

from __future__ import annotations

from dataclasses import dataclass

# A generation some members have not reported yet, or a rebalance waiting to be written.
PENDING_RECHECK_SECONDS = 1.0
# A group that is rebalancing or rolling out: looked at this often at most.
BUSY_RECHECK_SECONDS = 2.0
# Unchanged looks in a row before the interval stretches: a group that just settled is
# watched at its own pace for a while before it counts as quiet.
QUIET_LOOKS_BEFORE_STRETCH = 3
# A stretched interval never goes past this (unless the spec's own interval is longer): half
# the RebalancerObservationStale alert's default 600 s, so a quiet group never looks stale.
QUIET_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class Cadence:
    """Unchanged looks in a row (0 after any change)."""

    quiet_looks: int = 0


@dataclass(frozen=True)
class Look:
    """What one look found, as far as the next delay goes."""

    changed: bool
    busy: bool
    pending: bool


def next_delay(
    interval: float, look: Look, cadence: Cadence, *, quiet_factor: float
) -> tuple[float, Cadence]:
    """(seconds until the next look, the cadence to carry on)."""
    if quiet_factor < 1:
        raise ValueError(
            f"quiet_factor must be at least 1 (1 keeps every group at its interval), "
            f"got {quiet_factor}"
        )
    if look.pending:
        return min(interval, PENDING_RECHECK_SECONDS), Cadence()
    if look.busy:
        return min(interval, BUSY_RECHECK_SECONDS), Cadence()
    if look.changed:
        return interval, Cadence()
    quiet = Cadence(cadence.quiet_looks + 1)
    if quiet.quiet_looks < QUIET_LOOKS_BEFORE_STRETCH:
        return interval, quiet
    return max(interval, min(interval * quiet_factor, QUIET_MAX_SECONDS)), quiet


def on_grid(delay: float, now: float, grid: float) -> float:
    """Seconds until the multiple of `grid` (seconds since the epoch) nearest to now + delay,
    and never less than half of `delay`, so that a look is neither skipped nor doubled: once a
    look falls on the grid, a delay that is a multiple of the grid keeps it there."""
    if grid <= 0 or delay <= 0:
        return delay
    target = round((now + delay) / grid) * grid
    if target - now < delay / 2:
        target += grid
    return target - now
