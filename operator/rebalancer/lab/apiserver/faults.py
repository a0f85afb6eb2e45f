"""Fault injection for resilience tests: canned error answers and dropped watch streams.

Safe to call from any thread (ApiServerThread's callers live outside its event loop).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fault:
    status: int
    method: str | None = None
    path_regex: str | None = None
    times: int | None = 1  # None: until cleared
    message: str = ""
    retry_after: int = 0
    hits: int = 0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        return self._pattern is None or bool(self._pattern.search(path))

    def describe(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "method": self.method,
            "path_regex": self.path_regex,
            "times": self.times,
            "message": self.message,
            "retry_after": self.retry_after,
            "hits": self.hits,
        }


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._droppers: list[Callable[[], None]] = []

    def inject(
        self,
        *,
        status: int = 500,
        method: str | None = None,
        path_regex: str | None = None,
        times: int | None = 1,
        message: str = "",
        retry_after: int | None = None,
    ) -> Fault:
        """Answer the next `times` matching requests with `status` (a kube Status body)."""
        fault = Fault(
            status=status,
            method=method,
            path_regex=path_regex,
            times=times,
            message=message,
            retry_after=(1 if status == 429 else 0) if retry_after is None else retry_after,
            _pattern=re.compile(path_regex) if path_regex else None,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def active(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def take(self, method: str, path: str) -> Fault | None:
        """The first fault matching a request, counting the hit and retiring spent faults."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.hits += 1
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self._faults.remove(fault)
                    return fault
        return None

    def on_drop(self, dropper: Callable[[], None]) -> None:
        with self._lock:
            self._droppers.append(dropper)

    def drop_watches(self) -> None:
        """End every open watch stream; clients see a normal close and re-watch."""
        with self._lock:
            droppers = list(self._droppers)
        for dropper in droppers:
            dropper()
