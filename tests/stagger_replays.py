"""A staggered start-up found with `simulate` alone, for checking `simulate_stagger` and the
scoring built on it: each batch's members start at the moment the group settled with the batches
before it (the later ones held past the horizon, so never played), and the last replay has every
start in place."""

from __future__ import annotations

import dataclasses

from rebalancer.simulation import FixedOffsets, Scenario, SimulationResult, simulate

NOT_YET_MS = 1e12  # a start the replay holds back: past its horizon, so never played


def replayed(scenario: Scenario, batch: int) -> SimulationResult:
    """`scenario` released `batch` at a time (its FixedOffsets relative to each batch's release)."""
    assert isinstance(scenario.starts, FixedOffsets)
    offsets = scenario.starts.offsets_ms
    starts = [NOT_YET_MS] * len(offsets)
    release = 0.0
    result: SimulationResult | None = None
    for first in range(0, len(offsets), batch):
        for index in range(first, min(first + batch, len(offsets))):
            starts[index] = release + offsets[index]
        result = simulate(
            dataclasses.replace(
                scenario, starts=FixedOffsets(tuple(starts)), horizon_ms=NOT_YET_MS / 10
            )
        )
        if result.time_to_stable_s is None:
            break
        release = min(starts) + result.time_to_stable_s * 1000.0
    assert result is not None
    return result
