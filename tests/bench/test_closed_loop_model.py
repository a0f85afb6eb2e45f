"""bench/closed_loop_model.py: a rolling update of a consuming group on the coordinator model,
per batch size."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import closed_loop_model as model  # noqa: E402


def test_batch_sizes_are_the_learning_jobs_candidates() -> None:
    assert model.batch_sizes(24) == (24, 12, 8, 6)
    assert model.batch_sizes(6) == (6, 3, 2)


def test_replacing_the_whole_group_at_once_leaves_more_partitions_unowned() -> None:
    # Fewer rebalances and a shorter rollout, but every partition waits for the new pods: what
    # a start-up from zero, which the learning job scores batch sizes on, does not show.
    found = {update.batch: update for update in model.updates(6, 12, 6000.0, runs=3)}
    whole, quarter = found[6], found[2]
    assert whole.rebalances < quarter.rebalances
    assert whole.time_to_stable_s is not None and quarter.time_to_stable_s is not None
    assert whole.time_to_stable_s < quarter.time_to_stable_s
    assert whole.unowned_ps > 1.5 * quarter.unowned_ps


def test_the_table_marks_the_default_and_the_learned_batch() -> None:
    found = [model.Update(6, 4, 109.0, 14.0), model.Update(2, 9, 50.0, 41.4)]
    text = model.table(found, 6, learned=6)
    assert "learned" in text.splitlines()[1]
    assert "operator's default (a quarter)" in text.splitlines()[2]
