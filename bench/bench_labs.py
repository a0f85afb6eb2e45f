"""The lab a Kafka bench runs in, and how a bench stopped from outside stops it."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

from rebalancer_lab.ports import free_port
from rebalancer_lab.running import Lab, LabConfig


def bench_lab(state_dir: Path | None, prefix: str, initial_delay_ms: int) -> Lab:
    """A lab with its broker and report ports free, no Prometheus, and the broker's
    group.initial.rebalance.delay.ms; its state in `state_dir` or a new temporary one."""
    state = state_dir or Path(tempfile.mkdtemp(prefix=prefix))
    return Lab(
        LabConfig(
            state_dir=state,
            broker_port=free_port(),
            reports_port=free_port(),
            prometheus_port=None,
            initial_rebalance_delay_ms=initial_delay_ms,
        )
    )


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_sigterm() -> None:
    """SIGTERM as Ctrl-C: the bench's own clean-up runs and its lab's processes go with it (a
    background job ignores SIGINT)."""
    signal.signal(signal.SIGTERM, _interrupted)
