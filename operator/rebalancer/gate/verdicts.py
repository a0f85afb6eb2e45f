"""What a waiting gate should do now, from its pod's annotations and its own clock (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.gates import (
    DEFAULT_BYPASS_SECONDS,
    GATE_ANNOTATION,
    GATE_BATCH_ANNOTATION,
    GATE_OPEN,
    GATE_OPEN_AT_ANNOTATION,
    GATE_OPEN_AT_MAX_WAIT_SECONDS,
)


class Verdict(StrEnum):
    WAIT = "wait"
    OPEN = "open"
    BYPASS = "bypass"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class GateLimits:
    timeout_s: float = 900.0  # 0: wait forever
    bypass_after_s: float = float(DEFAULT_BYPASS_SECONDS)  # 0: never bypass


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    message: str
    # Seconds until the verdict can change by the clock alone (None: only an event can).
    recheck_s: float | None = None


def release_in(annotations: Mapping[str, str], wall_now: float | None) -> float:
    """Seconds until an open gate's release moment (0: now, or no usable moment)."""
    raw = annotations.get(GATE_OPEN_AT_ANNOTATION)
    if raw is None or wall_now is None:
        return 0.0
    try:
        ahead = float(raw) - wall_now
    except ValueError:
        return 0.0
    # Past, or so far ahead that the clocks disagree (or not a number at all): now.
    if not math.isfinite(ahead) or ahead <= 0 or ahead > GATE_OPEN_AT_MAX_WAIT_SECONDS:
        return 0.0
    return ahead


def decide(
    annotations: Mapping[str, str],
    waited_s: float,
    silent_s: float,
    limits: GateLimits,
    wall_now: float | None = None,
) -> Decision:
    """`waited_s` since the gate started; `silent_s` since the operator last showed itself;
    `wall_now` the wall clock, for the batch's release moment."""
    if annotations.get(GATE_ANNOTATION) == GATE_OPEN:
        batch = annotations.get(GATE_BATCH_ANNOTATION)
        suffix = f" (batch {batch})" if batch else ""
        ahead = release_in(annotations, wall_now)
        if ahead > 0:
            return Decision(Verdict.WAIT, f"opened{suffix}: letting go in {ahead:.2f} s", ahead)
        return Decision(Verdict.OPEN, f"gate opened by the operator{suffix} after {waited_s:.1f} s")
    if limits.timeout_s > 0 and waited_s >= limits.timeout_s:
        return Decision(
            Verdict.TIMEOUT,
            f"gave up after {waited_s:.0f} s: the operator did not open this pod's batch; the "
            "pod's init container restarts and waits again (check the ConsumerGroup's "
            "status.rollout and Events, or raise spec.policy.rollout.gateTimeoutSeconds)",
        )
    if limits.bypass_after_s > 0 and silent_s >= limits.bypass_after_s:
        return Decision(
            Verdict.BYPASS,
            f"no sign of the operator for {silent_s:.0f} s: letting the pod start without its "
            "batch (spec.policy.rollout.bypassGateAfterSeconds)",
        )
    waits = []
    if limits.timeout_s > 0:
        waits.append(limits.timeout_s - waited_s)
    if limits.bypass_after_s > 0:
        waits.append(limits.bypass_after_s - silent_s)
    return Decision(Verdict.WAIT, "waiting for the operator", min(waits) if waits else None)
