"""What to do with a learned recommendation: nothing, show it, or apply it.

Pure. The learning job proposes; the policy (`spec.policy.learning`) decides. In `recommend` mode
the operator only shows the (bounded) values in status. In `auto` mode it applies them through the
settings and rollout machinery, but never more often than `minIntervalMinutes`, never outside the
bounds, never from a summary older than `maxAgeHours`, and never for a change too small to matter
(each apply can cost a rolling restart, a price the recommendation's gain must be worth).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rebalancer.structs.recommendations import (
    Bounds,
    LearningMode,
    LearningPolicy,
    Recommendation,
)
from rebalancer.structs.times import read_rfc3339

# Changes below this share of the current value are not worth a restart.
MIN_RELATIVE_CHANGE = 0.05


class LearningAction(StrEnum):
    NONE = "none"  # mode off, or nothing recommended
    SHOW = "show"  # recommend mode, or auto mode that must wait or has nothing to change
    APPLY = "apply"  # auto mode: apply `settings`


@dataclass(frozen=True)
class CurrentSettings:
    """The values in force, as far as the operator knows them (None: unknown)."""

    initial_rebalance_delay_ms: float | None = None
    batch_size: int | None = None
    session_timeout_ms: float | None = None


@dataclass(frozen=True)
class LearningDecision:
    action: LearningAction
    # The bounded recommendation (what status shows, and what is applied on APPLY).
    settings: CurrentSettings
    reason: str
    message: str
    # Settings the bounds changed, by name: shown so nobody mistakes a clamp for the optimum.
    clamped: tuple[str, ...] = ()
    # Earliest time (unix seconds) an apply may happen, when the interval holds it back.
    next_apply_at: float | None = None


def _bounded(value: float | None, bounds: Bounds) -> tuple[float | None, bool]:
    if value is None:
        return None, False
    clamped = bounds.clamp(value)
    return clamped, clamped != value


def bounded_settings(
    recommendation: Recommendation, policy: LearningPolicy
) -> tuple[CurrentSettings, tuple[str, ...]]:
    """The recommendation within the policy's bounds, and which settings had to be clamped."""
    delay, delay_clamped = _bounded(recommendation.initial_rebalance_delay_ms, policy.delay_ms)
    batch_raw = None if recommendation.batch_size is None else float(recommendation.batch_size)
    batch, batch_clamped = _bounded(batch_raw, policy.batch_size)
    session, session_clamped = _bounded(
        recommendation.session_timeout_ms, policy.session_timeout_ms
    )
    clamped = tuple(
        name
        for name, flag in (
            ("initialRebalanceDelayMs", delay_clamped),
            ("batchSize", batch_clamped),
            ("sessionTimeoutMs", session_clamped),
        )
        if flag
    )
    settings = CurrentSettings(delay, None if batch is None else max(1, round(batch)), session)
    return settings, clamped


def _changed(new: float | None, old: float | None) -> bool:
    if new is None:
        return False
    if old is None:
        return True
    if old == 0:
        return new != 0
    return abs(new - old) / abs(old) >= MIN_RELATIVE_CHANGE


def changes(target: CurrentSettings, current: CurrentSettings) -> CurrentSettings:
    """Only the settings worth changing (others None)."""
    return CurrentSettings(
        target.initial_rebalance_delay_ms
        if _changed(target.initial_rebalance_delay_ms, current.initial_rebalance_delay_ms)
        else None,
        target.batch_size
        if _changed(
            None if target.batch_size is None else float(target.batch_size),
            None if current.batch_size is None else float(current.batch_size),
        )
        else None,
        target.session_timeout_ms
        if _changed(target.session_timeout_ms, current.session_timeout_ms)
        else None,
    )


def _age_hours(generated_at: str, now: float) -> float | None:
    moment = read_rfc3339(generated_at)
    return None if moment is None else (now - moment) / 3600.0


def decide_learning(
    policy: LearningPolicy,
    recommendation: Recommendation | None,
    current: CurrentSettings,
    last_applied_at: float | None,
    now: float,
) -> LearningDecision:
    """What the operator does with the latest recommendation for one group."""
    empty = CurrentSettings()
    if policy.mode is LearningMode.OFF:
        return LearningDecision(LearningAction.NONE, empty, "LearningOff", "learning is off")
    if recommendation is None:
        return LearningDecision(
            LearningAction.NONE,
            empty,
            "NoRecommendation",
            "no recommendation for this group yet (is the learning CronJob running?)",
        )
    target, clamped = bounded_settings(recommendation, policy)
    gain = f"expected {recommendation.improvement:.0%} lower cost than the defaults"
    clamp_note = _clamp_note(clamped)
    if policy.mode is LearningMode.RECOMMEND:
        return LearningDecision(
            LearningAction.SHOW,
            target,
            "Recommended",
            f"run {recommendation.run_id}: {gain}{clamp_note}",
            clamped,
        )
    age = _age_hours(recommendation.generated_at, now)
    if age is None or age > policy.max_age_hours:
        shown = "unknown" if age is None else f"{age:.0f} h"
        return LearningDecision(
            LearningAction.SHOW,
            target,
            "RecommendationStale",
            f"run {recommendation.run_id} is {shown} old (max {policy.max_age_hours} h): "
            "not applied",
            clamped,
        )
    delta = changes(target, current)
    held = _held_back(policy, recommendation, target, delta, clamped, last_applied_at, now)
    if held is not None:
        return held
    return LearningDecision(
        LearningAction.APPLY,
        delta,
        "Applying",
        f"run {recommendation.run_id}: applying {describe_settings(delta)}; {gain}{clamp_note}",
        clamped,
    )


def _held_back(
    policy: LearningPolicy,
    recommendation: Recommendation,
    target: CurrentSettings,
    delta: CurrentSettings,
    clamped: tuple[str, ...],
    last_applied_at: float | None,
    now: float,
) -> LearningDecision | None:
    """Why a fresh recommendation is shown but not applied: already in force, no gain, or the
    last apply too recent; None when it is applied."""
    if delta == CurrentSettings():
        return LearningDecision(
            LearningAction.SHOW,
            target,
            "InEffect",
            f"run {recommendation.run_id}: the settings in force already match"
            f"{_clamp_note(clamped)}",
            clamped,
        )
    if recommendation.improvement <= 0:
        return LearningDecision(
            LearningAction.SHOW,
            target,
            "NoGain",
            f"run {recommendation.run_id}: no expected gain over the defaults: not applied",
            clamped,
        )
    interval_s = policy.min_interval_minutes * 60.0
    if last_applied_at is not None and now - last_applied_at < interval_s:
        due = last_applied_at + interval_s
        return LearningDecision(
            LearningAction.SHOW,
            target,
            "WaitingForInterval",
            f"run {recommendation.run_id}: next apply not before "
            f"{datetime.datetime.fromtimestamp(due, tz=datetime.UTC).isoformat(timespec='seconds')}"
            f" (minIntervalMinutes {policy.min_interval_minutes})",
            clamped,
            next_apply_at=due,
        )
    return None


def _clamp_note(clamped: tuple[str, ...]) -> str:
    return f"; clamped to bounds: {', '.join(clamped)}" if clamped else ""


def describe_settings(settings: CurrentSettings) -> str:
    parts = []
    if settings.initial_rebalance_delay_ms is not None:
        parts.append(f"initial delay {settings.initial_rebalance_delay_ms:.0f} ms")
    if settings.batch_size is not None:
        parts.append(f"rolling-update batch size {settings.batch_size}")
    if settings.session_timeout_ms is not None:
        parts.append(f"session timeout {settings.session_timeout_ms:.0f} ms")
    return ", ".join(parts)


def render_learning_status(
    decision: LearningDecision,
    recommendation: Recommendation | None,
    last_applied_at: str | None,
) -> dict[str, Any]:
    """`status.learning` for the ConsumerGroup (camelCase, JSON-ready)."""
    status: dict[str, Any] = {
        "action": decision.action.value,
        "reason": decision.reason,
        "message": decision.message,
        "lastAppliedTime": last_applied_at,
    }
    if recommendation is not None:
        status["runId"] = recommendation.run_id
        status["generatedAt"] = recommendation.generated_at
        status["expectedImprovement"] = round(recommendation.improvement, 4)
        status["recommended"] = {
            "initialRebalanceDelayMs": decision.settings.initial_rebalance_delay_ms,
            "batchSize": decision.settings.batch_size,
            "sessionTimeoutMs": decision.settings.session_timeout_ms,
        }
        status["clamped"] = list(decision.clamped)
    return status
