"""A token bucket: how many enforcement requests one sidecar takes per minute."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """`per_minute` requests on average, at most `burst` back to back."""

    def __init__(
        self, per_minute: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError("the rate limit needs a positive rate and a burst of at least 1")
        self.per_second = per_minute / 60.0
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 when the request may go ahead, else the seconds until one may."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.per_second)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return 0.0
            return (1.0 - self._tokens) / self.per_second
