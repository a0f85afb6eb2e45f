"""bench/rollouts.py --heartbeat-ms: a cell of its own for tuned's and managed's heartbeat."""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import rollouts  # noqa: E402
import rollouts_summary  # noqa: E402

DEFAULT = rollouts.Cell("scale-up", 12, 24, "range", "uniform(0,6)")
FAST = replace(DEFAULT, heartbeat_ms=1000)


def test_tuned_and_managed_take_the_cells_heartbeat_and_naive_keeps_the_default() -> None:
    strategies = ("naive", "tuned", "managed")
    beats = {s: rollouts.setup_for(FAST, s, None).heartbeat_ms for s in strategies}
    assert beats == {"naive": 3000, "tuned": 1000, "managed": 1000}
    assert rollouts.setup_for(DEFAULT, "tuned", None).heartbeat_ms == 3000


def test_a_heartbeat_cell_is_summarised_apart_but_meets_the_same_starts() -> None:
    lines = [{"cell": asdict(cell)} for cell in (DEFAULT, FAST)]
    keys = [rollouts_summary.cell_key(line) for line in lines]
    assert keys[0] != keys[1] and "heartbeat 1000 ms" in keys[1][3]
    assert keys[0][3] == "range"  # lines written before the option have the same key as now
    assert rollouts.draw_seed_of(FAST, 2) == rollouts.draw_seed_of(DEFAULT, 2)
    assert "heartbeat 1000 ms" in FAST.label
