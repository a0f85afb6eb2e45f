"""Learned recommendations as the operator sees them, and the policy for acting on them.

The learning job (`rebalancer learn`) writes `recommendations.json`; `Recommendation` is one
group's entry read back from it. `LearningPolicy` is `spec.policy.learning` of a ConsumerGroup
(validated by its model, consumer_group_spec.LearningSpec):
whether to ignore recommendations (off), show them in status (recommend) or apply them (auto),
how often at most, and within which bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalancer.structs.consumer_group_spec import (
    BatchSizeBoundsSpec,
    LearningMode,
    LearningSpec,
    MillisecondBoundsSpec,
)
from rebalancer.structs.problems import FieldProblem, SpecInvalid
from rebalancer.structs.spec_models import read_spec

__all__ = [
    "GROUP_DELAY_SCOPE",
    "SUMMARY_FILE",
    "SUMMARY_SCHEMA",
    "Bounds",
    "LearningMode",
    "LearningPolicy",
    "Recommendation",
    "learning_policy_of",
    "parse_learning_policy",
    "recommendation_from_summary",
]

SUMMARY_FILE = "recommendations.json"
SUMMARY_SCHEMA = "rebalancer.dev/recommendations/v1"
# A summary's delayScope for a delay of the group's own (a streams group's); any other value, or
# none (summaries written before it existed), is the cluster's.
GROUP_DELAY_SCOPE = "group"


@dataclass(frozen=True)
class Bounds:
    """Inclusive limits of one setting; None leaves that side open."""

    minimum: float | None = None
    maximum: float | None = None

    def clamp(self, value: float) -> float:
        if self.minimum is not None and value < self.minimum:
            return self.minimum
        if self.maximum is not None and value > self.maximum:
            return self.maximum
        return value

    def contains(self, value: float) -> bool:
        return self.clamp(value) == value


@dataclass(frozen=True)
class LearningPolicy:
    mode: LearningMode = LearningMode.OFF
    min_interval_minutes: int = 1440
    delay_ms: Bounds = Bounds(0.0, 30000.0)
    batch_size: Bounds = Bounds(1.0, None)
    session_timeout_ms: Bounds = Bounds(6000.0, 300000.0)
    # Recommendations older than this are not acted on (a stopped CronJob must not steer).
    max_age_hours: int = 72


@dataclass(frozen=True)
class Recommendation:
    """One group's entry of the summary (None: the job had no basis to choose that setting)."""

    run_id: str
    generated_at: str
    cluster: str
    initial_rebalance_delay_ms: float | None
    batch_size: int | None
    session_timeout_ms: float | None
    expected_cost_per_day_s: float
    default_cost_per_day_s: float
    improvement: float
    notes: tuple[str, ...] = ()
    # Whose delay initial_rebalance_delay_ms is: "cluster" (the broker's, shared by the
    # cluster's classic groups) or "group" (a streams group's own, learned from its start-ups).
    delay_scope: str = "cluster"

    @property
    def delay_is_the_groups(self) -> bool:
        return self.delay_scope == GROUP_DELAY_SCOPE


def recommendation_from_summary(
    summary: Mapping[str, object], namespace: str, name: str
) -> Recommendation | None:
    """The group's entry of a summary document, or None when the summary has none for it.

    A document of another schema, or a malformed entry, yields None: the operator then acts as
    if nothing were recommended, never on a half-understood value.
    """
    if summary.get("schema") != SUMMARY_SCHEMA:
        return None
    groups = summary.get("groups")
    if not isinstance(groups, Mapping):
        return None
    entry = groups.get(f"{namespace}/{name}")
    if not isinstance(entry, Mapping):
        return None
    try:
        notes = entry.get("notes") or []
        return Recommendation(
            run_id=str(summary.get("runId", "")),
            generated_at=str(summary.get("generatedAt", "")),
            cluster=str(entry.get("cluster", "")),
            initial_rebalance_delay_ms=_optional_float(entry.get("initialRebalanceDelayMs")),
            batch_size=_optional_int(entry.get("batchSize")),
            session_timeout_ms=_optional_float(entry.get("sessionTimeoutMs")),
            expected_cost_per_day_s=float(entry.get("expectedCostPerDaySeconds", 0.0)),
            default_cost_per_day_s=float(entry.get("defaultCostPerDaySeconds", 0.0)),
            improvement=float(entry.get("improvement", 0.0)),
            notes=tuple(str(note) for note in notes) if isinstance(notes, list) else (),
            delay_scope=str(entry.get("delayScope") or "cluster"),
        )
    except (TypeError, ValueError):
        return None


def _optional_float(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError("not a number")
    return float(value)


def _optional_int(value: object) -> int | None:
    number = _optional_float(value)
    return None if number is None else int(number)


def parse_learning_policy(raw: object, path: str = "spec.policy.learning") -> LearningPolicy:
    """`spec.policy.learning` as a LearningPolicy, or SpecInvalid listing every problem."""
    return learning_policy_of(read_spec(LearningSpec, raw, path), path)


def learning_policy_of(spec: LearningSpec, path: str = "spec.policy.learning") -> LearningPolicy:
    """The LearningPolicy of a validated block, each bound's open side filled from the defaults
    (SpecInvalid when a default crosses the side that was given)."""
    defaults = LearningPolicy()
    problems: list[FieldProblem] = []
    bounds = spec.bounds
    delay = _bounds(bounds.initial_rebalance_delay_ms, defaults.delay_ms)
    batch = _bounds(bounds.batch_size, defaults.batch_size)
    session = _bounds(bounds.session_timeout_ms, defaults.session_timeout_ms)
    for key, merged in (
        ("initialRebalanceDelayMs", delay),
        ("batchSize", batch),
        ("sessionTimeoutMs", session),
    ):
        # A side left out keeps its default, which may cross the side that was given.
        low, high = merged.minimum, merged.maximum
        if low is not None and high is not None and low > high:
            problems.append(
                FieldProblem(
                    f"{path}.bounds.{key}",
                    f"min {low:g} exceeds max {high:g}",
                    "swap them, or give both sides",
                )
            )
    if problems:
        raise SpecInvalid(tuple(problems))
    return LearningPolicy(
        spec.mode, spec.min_interval_minutes, delay, batch, session, spec.max_age_hours
    )


def _bounds(given: MillisecondBoundsSpec | BatchSizeBoundsSpec | None, default: Bounds) -> Bounds:
    if given is None:
        return default
    low = default.minimum if given.min is None else float(given.min)
    high = default.maximum if given.max is None else float(given.max)
    return Bounds(low, high)
