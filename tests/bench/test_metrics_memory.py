"""bench/metrics_memory.py: one round publishes, measures and then forgets every group it made,
so the operator's registry holds nothing of it afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

from prometheus_client import generate_latest

from rebalancer import metrics

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import metrics_memory  # noqa: E402


def test_a_round_measures_every_figure_and_leaves_no_series() -> None:
    before = generate_latest(metrics.REGISTRY).count(b"bench-")
    figures = metrics_memory.one_round(20)
    assert set(figures) == {
        "bytes_per_group",
        "publish_us",
        "scrape_ms_per_1000",
        "scrape_bytes_per_group",
    }
    assert figures["bytes_per_group"] > 0
    assert figures["scrape_bytes_per_group"] > 1000  # 40-odd series a group
    assert generate_latest(metrics.REGISTRY).count(b"bench-") == before == 0
