"""The no-message-lost ledger: a numbered producer, and what at-least-once consumers recorded.

Consumers with RECORD_FILE write one line per processed message, `topic, partition, offset,
number`, before they commit; the producer numbers its messages from 0 and says how many it
delivered when it stops.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from rebalancer_lab.processes import ChildProcess, python_module
from rebalancer_lab.running import Lab

PRODUCED = re.compile(r"produced (\d+) of (\d+) messages")


def recorded(files: Iterable[Path]) -> Counter[int]:
    seen: Counter[int] = Counter()
    for path in files:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) == 4 and parts[3].isdigit():
                seen[int(parts[3])] += 1
    return seen


def numbered_producer(lab: Lab, name: str, topic: str, rate: float, count: int) -> ChildProcess:
    """Numbers 0.. to `topic` at `rate` per second; `count` 0 runs until SIGTERM."""
    return ChildProcess(
        name,
        python_module(
            "rebalancer_lab.producer",
            "--bootstrap",
            lab.bootstrap,
            "--topic",
            topic,
            "--rate",
            str(rate),
            "--count",
            str(count),
        ),
        lab.config.state_dir / "logs" / f"{name}.log",
    )


def delivered(producer: ChildProcess) -> int:
    """How many numbered messages a stopped producer had delivered, all of those it sent."""
    found = PRODUCED.findall(producer.log_path.read_text(errors="replace"))
    assert found, f"the producer did not say what it produced: {producer.log_path}"
    done, sent = (int(value) for value in found[-1])
    assert done == sent, f"the producer lost messages: {done} of {sent} delivered"
    return done


def summarize(produced: set[int], seen: Counter[int]) -> str:
    """Every produced number must have been processed; duplicates are reported, not failed."""
    missing = sorted(produced - set(seen))
    assert not missing, f"{len(missing)} messages lost, first {missing[:20]}"
    assert set(seen) <= produced, "a consumer recorded a number nobody produced"
    duplicates = {number: times for number, times in seen.items() if times > 1}
    return (
        f"produced {len(produced)}, processed {len(produced & set(seen))} distinct, "
        f"{sum(seen.values()) - len(seen)} redeliveries over {len(duplicates)} messages"
    )
