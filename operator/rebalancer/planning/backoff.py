"""Retry delays for a cluster or Secret that is not there yet."""

from __future__ import annotations


def backoff_delay(failures: int, *, base: float = 2.0, cap: float = 60.0) -> float:
    """Seconds to wait after `failures` consecutive failures: 2, 4, 8, ... capped."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * 2 ** min(failures - 1, 16)))
