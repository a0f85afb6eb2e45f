"""bench/rollouts.py: the strategies of one repeat of a cell meet the same pod start delays."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import rollouts  # noqa: E402
from rebalancer_lab.kubelet import JITTER_SEED_ANNOTATION, Jitter  # noqa: E402


def test_the_strategies_of_a_repeat_draw_the_same_starts_and_repeats_differ() -> None:
    cell = rollouts.Cell("cold-start", 24, 48, "range", "uniform(0,20)")
    kubelet = Jitter()
    draws = {}
    for strategy, repeat in (("tuned", 1), ("managed", 1), ("managed", 2)):
        setup = rollouts.setup_for(cell, strategy, None, "Pod")
        seed = rollouts.draw_seed_of(cell, repeat)
        body = rollouts.workload(setup, f"cs-{strategy}", [], 24, cell.jitter, seed)
        annotations = body["spec"]["template"]["metadata"]["annotations"]
        assert annotations[JITTER_SEED_ANNOTATION] == str(seed)
        owner = f"{strategy}-{repeat}"  # each run's StatefulSet is an owner of its own
        draws[(strategy, repeat)] = sorted(kubelet.delay_for(annotations, owner) for _ in range(24))

    assert draws[("tuned", 1)] == draws[("managed", 1)]
    assert draws[("managed", 2)] != draws[("managed", 1)]
