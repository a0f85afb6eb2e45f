"""The chaos bench (bench/chaos.py) for about four minutes at a fixed seed on the real lab: three
Kafka nodes, Kubernetes' control plane, two operator replicas, two fleets of three pods, the
bench's whole mix of faults (the seed draws which come). It must end with no message lost and
no invariant broken; what the invariants are and how they are checked is bench/chaos_checker.py,
proven on synthetic streams in test_chaos_checker.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = 1
DURATION_S = 100

# The lab's start (three JVMs, the control plane, two cold starts), the faults and changes, the
# end's wait for the rollouts and the drain: about 4 minutes measured.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_a_short_chaos_run_loses_nothing_and_breaks_no_invariant(tmp_path: Path) -> None:
    out = tmp_path / "chaos.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "chaos.py"),
            "--seed",
            str(SEED),
            "--duration",
            str(DURATION_S),
            "--fleet-size",
            "3",
            "--change-every",
            "20",
            "--fault-every",
            "12",
            "--rollout-limit",
            "300",
            "--quiet",
            "15",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    print(done.stdout[-6000:])
    assert out.exists(), f"no result written: {done.stderr[-4000:]}"
    [result] = [json.loads(line) for line in out.read_text().splitlines()]
    figures = result["figures"]
    # The run did what a smoke must: faults and changes happened, messages flowed.
    assert sum(figures["faults"].values()) >= 3, figures
    assert figures["changes"].get("rollout", 0) >= 1, figures
    assert figures["rollouts_completed"] >= 1, figures
    assert figures["produced"] > 1000, figures
    assert figures["lost"] == 0, result["violations"]
    assert result["violations"] == [], result["violations"]
    assert done.returncode == 0, done.stderr[-4000:]
