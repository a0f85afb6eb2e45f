"""Learned recommendations as the operator sees them, and the policy for acting on them.

The learning job (`rebalancer learn`) writes `recommendations.json`; `Recommendation` is one
group's entry read back from it. `LearningPolicy` is `spec.policy.learning` of a ConsumerGroup:
whether to ignore recommendations (off), show them in status (recommend) or apply them (auto),
how often at most, and within which bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from rebalancer.structs.problems import FieldProblem, SpecInvalid

SUMMARY_FILE = "recommendations.json"
SUMMARY_SCHEMA = "rebalancer.dev/recommendations/v1"


class LearningMode(StrEnum):
    OFF = "off"
    RECOMMEND = "recommend"
    AUTO = "auto"


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
    if raw is None:
        return LearningPolicy()
    problems: list[FieldProblem] = []
    if not isinstance(raw, Mapping):
        raise SpecInvalid((FieldProblem(path, "must be an object", "use mode, bounds, ..."),))
    mode_raw = raw.get("mode", LearningMode.OFF.value)
    try:
        mode = LearningMode(str(mode_raw))
    except ValueError:
        problems.append(
            FieldProblem(f"{path}.mode", f"is {mode_raw!r}", "use off, recommend or auto")
        )
        mode = LearningMode.OFF
    interval = _integer(raw, "minIntervalMinutes", path, 1440, 1, 525600, problems)
    max_age = _integer(raw, "maxAgeHours", path, 72, 1, 8760, problems)
    bounds_raw = raw.get("bounds") or {}
    if not isinstance(bounds_raw, Mapping):
        problems.append(FieldProblem(f"{path}.bounds", "must be an object", "see the CRD docs"))
        bounds_raw = {}
    defaults = LearningPolicy()
    delay = _bounds(bounds_raw, "initialRebalanceDelayMs", path, defaults.delay_ms, problems)
    batch = _bounds(bounds_raw, "batchSize", path, defaults.batch_size, problems)
    session = _bounds(bounds_raw, "sessionTimeoutMs", path, defaults.session_timeout_ms, problems)
    if problems:
        raise SpecInvalid(tuple(problems))
    return LearningPolicy(mode, interval, delay, batch, session, max_age)


def _integer(
    raw: Mapping[str, object],
    key: str,
    path: str,
    default: int,
    low: int,
    high: int,
    problems: list[FieldProblem],
) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.append(
            FieldProblem(f"{path}.{key}", f"is {value!r}", f"use a whole number {low}..{high}")
        )
        return default
    return value


def _bounds(
    raw: Mapping[str, object], key: str, path: str, default: Bounds, problems: list[FieldProblem]
) -> Bounds:
    entry = raw.get(key)
    if entry is None:
        return default
    where = f"{path}.bounds.{key}"
    if not isinstance(entry, Mapping):
        problems.append(FieldProblem(where, "must be an object", "use {min: ..., max: ...}"))
        return default
    values: dict[str, float | None] = {"min": default.minimum, "max": default.maximum}
    for side in ("min", "max"):
        if side in entry:
            value = entry[side]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.append(
                    FieldProblem(f"{where}.{side}", f"is {value!r}", "use a non-negative number")
                )
                continue
            values[side] = float(value)
    low, high = values["min"], values["max"]
    if low is not None and high is not None and low > high:
        problems.append(FieldProblem(where, f"min {low:g} exceeds max {high:g}", "swap them"))
    return Bounds(low, high)
