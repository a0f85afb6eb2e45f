"""What a reconciler's decision asks it to tell: a Kubernetes Event on the resource, and an
error that makes kopf try the handler again later."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Notice:
    """An Event on the ConsumerGroup: Normal, or Warning when `warning`."""

    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True)
class Retry:
    """Try again in `delay` seconds, saying why (kopf.TemporaryError)."""

    message: str
    delay: float
