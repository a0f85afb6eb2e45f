"""When members start: start-time distributions, sampled with the scenario's seeded generator.

Offsets are milliseconds from the moment the first member could start (time zero of a run). A
member's start is the moment it sends its first JoinGroup; what happens before (pod scheduling,
image pull, application start-up) is folded into the distribution.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class FixedOffsets:
    """Exactly these offsets, one per member in member order."""

    offsets_ms: tuple[float, ...]


@dataclass(frozen=True)
class Staggered:
    """Member i starts at i x spacing: a rollout that starts pods at a steady pace."""

    spacing_ms: float = 0.0


@dataclass(frozen=True)
class Uniform:
    """Independent starts anywhere in [0, spread]: pods that come up in no particular order."""

    spread_ms: float


@dataclass(frozen=True)
class Exponential:
    """Poisson arrivals: the first member at 0, then exponential gaps of the given mean."""

    mean_gap_ms: float


@dataclass(frozen=True)
class Normal:
    """Starts clustered around a mean (clipped at 0): pods waiting on the same slow dependency."""

    mean_ms: float
    stddev_ms: float


StartTimes = FixedOffsets | Staggered | Uniform | Exponential | Normal


def sample_start_times(starts: StartTimes, count: int, rng: random.Random) -> tuple[float, ...]:
    """Draw `count` start offsets (ms) in member order; only the random kinds consume `rng`."""
    if count < 0:
        raise ValueError("count must not be negative")
    match starts:
        case FixedOffsets(offsets_ms=offsets):
            if len(offsets) < count:
                raise ValueError(f"{count} members but only {len(offsets)} fixed offsets")
            chosen = tuple(offsets[:count])
            if chosen and min(chosen) < 0:
                raise ValueError("start offsets and spreads must not be negative")
            return chosen
        case Staggered(spacing_ms=spacing):
            return tuple(_checked(index * spacing) for index in range(count))
        case Uniform(spread_ms=spread):
            _checked(spread)
            return tuple(rng.uniform(0.0, spread) for _ in range(count))
        case Exponential(mean_gap_ms=mean_gap):
            if mean_gap <= 0:
                raise ValueError("mean_gap_ms must be positive")
            times: list[float] = []
            clock = 0.0
            for index in range(count):
                if index:
                    clock += rng.expovariate(1.0 / mean_gap)
                times.append(clock)
            return tuple(times)
        case Normal(mean_ms=mean, stddev_ms=stddev):
            _checked(stddev)
            return tuple(max(0.0, rng.gauss(mean, stddev)) for _ in range(count))


def _checked(value: float) -> float:
    if value < 0:
        raise ValueError("start offsets and spreads must not be negative")
    return value
