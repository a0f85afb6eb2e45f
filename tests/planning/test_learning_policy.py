"""Acting on learned recommendations: the policy, the bounds, the interval, the reader."""

from __future__ import annotations

import json
import uuid

import fsspec
import pytest

from rebalancer.clients.recommending import RecommendationReader
from rebalancer.planning.recommendations import (
    CurrentSettings,
    LearningAction,
    decide_learning,
    render_learning_status,
)
from rebalancer.structs.problems import SpecInvalid
from rebalancer.structs.recommendations import (
    SUMMARY_SCHEMA,
    Bounds,
    LearningMode,
    LearningPolicy,
    Recommendation,
    parse_learning_policy,
    recommendation_from_summary,
)

NOW = 1_800_000_000.0
GENERATED = "2027-01-15T08:00:00+00:00"  # 0 h before NOW


def recommendation(**changes: object) -> Recommendation:
    values: dict[str, object] = {
        "run_id": "run-1",
        "generated_at": GENERATED,
        "cluster": "kafka:9092",
        "initial_rebalance_delay_ms": 1000.0,
        "batch_size": 4,
        "session_timeout_ms": 20000.0,
        "expected_cost_per_day_s": 50.0,
        "default_cost_per_day_s": 100.0,
        "improvement": 0.5,
    }
    values.update(changes)
    return Recommendation(**values)  # type: ignore[arg-type]


AUTO = LearningPolicy(mode=LearningMode.AUTO, min_interval_minutes=60, max_age_hours=1_000_000)
CURRENT = CurrentSettings(3000.0, 8, 45000.0)


@pytest.mark.parametrize(
    ("policy", "rec", "last", "action", "reason"),
    [
        (LearningPolicy(), recommendation(), None, LearningAction.NONE, "LearningOff"),
        (AUTO, None, None, LearningAction.NONE, "NoRecommendation"),
        (
            LearningPolicy(mode=LearningMode.RECOMMEND),
            recommendation(),
            None,
            LearningAction.SHOW,
            "Recommended",
        ),
        (AUTO, recommendation(), None, LearningAction.APPLY, "Applying"),
        (AUTO, recommendation(), NOW - 600, LearningAction.SHOW, "WaitingForInterval"),
        (AUTO, recommendation(), NOW - 3601, LearningAction.APPLY, "Applying"),
        (AUTO, recommendation(improvement=0.0), None, LearningAction.SHOW, "NoGain"),
        (
            LearningPolicy(mode=LearningMode.AUTO, max_age_hours=1),
            recommendation(generated_at="2020-01-01T00:00:00Z"),
            None,
            LearningAction.SHOW,
            "RecommendationStale",
        ),
        (
            AUTO,
            recommendation(
                initial_rebalance_delay_ms=3050.0, batch_size=8, session_timeout_ms=45000.0
            ),
            None,
            LearningAction.SHOW,
            "InEffect",
        ),
    ],
)
def test_decisions(
    policy: LearningPolicy,
    rec: Recommendation | None,
    last: float | None,
    action: LearningAction,
    reason: str,
) -> None:
    decision = decide_learning(policy, rec, CURRENT, last, NOW)
    assert (decision.action, decision.reason) == (action, reason), decision.message


def test_apply_carries_only_the_changes_worth_a_restart() -> None:
    rec = recommendation(
        initial_rebalance_delay_ms=3100.0, batch_size=8, session_timeout_ms=10000.0
    )
    decision = decide_learning(AUTO, rec, CURRENT, None, NOW)
    assert decision.action is LearningAction.APPLY
    assert decision.settings == CurrentSettings(None, None, 10000.0)


def test_values_never_leave_the_bounds() -> None:
    policy = LearningPolicy(
        mode=LearningMode.AUTO,
        delay_ms=Bounds(2000.0, 10000.0),
        batch_size=Bounds(2.0, 6.0),
        session_timeout_ms=Bounds(30000.0, 60000.0),
        max_age_hours=1_000_000,
    )
    rec = recommendation(initial_rebalance_delay_ms=0.0, batch_size=12, session_timeout_ms=6000.0)
    decision = decide_learning(policy, rec, CurrentSettings(), None, NOW)
    assert decision.settings == CurrentSettings(2000.0, 6, 30000.0)
    assert decision.clamped == ("initialRebalanceDelayMs", "batchSize", "sessionTimeoutMs")
    status = render_learning_status(decision, rec, None)
    assert status["recommended"] == {
        "initialRebalanceDelayMs": 2000.0,
        "batchSize": 6,
        "sessionTimeoutMs": 30000.0,
    }
    assert "clamped to bounds" in status["message"]


def test_the_policy_parses_and_names_every_problem() -> None:
    policy = parse_learning_policy(
        {
            "mode": "auto",
            "minIntervalMinutes": 120,
            "bounds": {"initialRebalanceDelayMs": {"min": 500, "max": 8000}},
        }
    )
    assert policy.mode is LearningMode.AUTO
    assert policy.min_interval_minutes == 120
    assert policy.delay_ms == Bounds(500.0, 8000.0)
    assert policy.session_timeout_ms == LearningPolicy().session_timeout_ms
    assert parse_learning_policy(None) == LearningPolicy()
    with pytest.raises(SpecInvalid) as caught:
        parse_learning_policy(
            {
                "mode": "sometimes",
                "minIntervalMinutes": 0,
                "bounds": {"batchSize": {"min": 9, "max": 3}},
            }
        )
    text = str(caught.value)
    assert "spec.policy.learning.mode" in text
    assert "minIntervalMinutes" in text
    assert "min 9 exceeds max 3" in text


def summary(groups: dict[str, object]) -> dict[str, object]:
    return {"schema": SUMMARY_SCHEMA, "runId": "r", "generatedAt": GENERATED, "groups": groups}


def test_a_summary_entry_reads_back_and_foreign_documents_read_as_nothing() -> None:
    entry = {
        "cluster": "k:9092",
        "initialRebalanceDelayMs": 1500.0,
        "batchSize": 3,
        "sessionTimeoutMs": None,
        "expectedCostPerDaySeconds": 1.0,
        "defaultCostPerDaySeconds": 2.0,
        "improvement": 0.5,
        "notes": ["x"],
    }
    found = recommendation_from_summary(summary({"shop/orders": entry}), "shop", "orders")
    assert found is not None
    assert (found.initial_rebalance_delay_ms, found.batch_size, found.session_timeout_ms) == (
        1500.0,
        3,
        None,
    )
    # A summary written before delayScope existed: the delay is the cluster's.
    assert not found.delay_is_the_groups
    streams = summary({"shop/orders": {**entry, "delayScope": "group"}})
    found = recommendation_from_summary(streams, "shop", "orders")
    assert found is not None and found.delay_is_the_groups
    assert recommendation_from_summary(summary({}), "shop", "orders") is None
    assert recommendation_from_summary({"schema": "other"}, "shop", "orders") is None
    broken = summary({"shop/orders": {**entry, "batchSize": "many"}})
    assert recommendation_from_summary(broken, "shop", "orders") is None


async def test_the_reader_follows_the_latest_summary() -> None:
    root = f"memory://recommendations-{uuid.uuid4().hex}"
    reader = RecommendationReader(root)
    assert await reader.read("shop", "orders") is None
    filesystem = fsspec.filesystem("memory")
    path = root.removeprefix("memory://")
    entry = {"cluster": "k", "initialRebalanceDelayMs": 1000.0, "improvement": 0.1}
    filesystem.pipe_file(
        f"/{path}/recommendations.json", json.dumps(summary({"shop/orders": entry})).encode()
    )
    first = await reader.read("shop", "orders")
    assert first is not None and first.initial_rebalance_delay_ms == 1000.0
    entry["initialRebalanceDelayMs"] = 2000.0
    filesystem.pipe_file(
        f"/{path}/recommendations.json", json.dumps(summary({"shop/orders": entry})).encode()
    )
    second = await reader.read("shop", "orders")
    assert second is not None and second.initial_rebalance_delay_ms == 2000.0
    filesystem.pipe_file(f"/{path}/recommendations.json", b"{not json")
    assert await reader.read("shop", "orders") is None
    assert await RecommendationReader(None).read("shop", "orders") is None
