"""The no-message-lost ledger: a numbered producer, and what at-least-once consumers recorded.

Consumers with RECORD_FILE write one line per processed message, `topic, partition, offset,
number`, before they commit; the producer numbers its messages from 0 and says how many it
delivered when it stops.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
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


def delivered_so_far(producer: ChildProcess) -> tuple[int, int] | None:
    """(delivered, sent) from the producer's last progress line; None before its first."""
    found = PRODUCED.findall(producer.log_path.read_text(errors="replace"))
    if not found:
        return None
    done, sent = (int(value) for value in found[-1])
    return done, sent


def delivered(producer: ChildProcess) -> int:
    """How many numbered messages a stopped producer had delivered, all of those it sent."""
    found = PRODUCED.findall(producer.log_path.read_text(errors="replace"))
    assert found, f"the producer did not say what it produced: {producer.log_path}"
    done, sent = (int(value) for value in found[-1])
    assert done == sent, f"the producer lost messages: {done} of {sent} delivered"
    return done


@dataclass(frozen=True)
class Tally:
    """What the records say of the produced numbers: the lost ones, those recorded that nobody
    produced, and the redeliveries (at-least-once's right: counted, not failed)."""

    produced: int
    processed: int  # distinct produced numbers recorded
    lost: tuple[int, ...]
    unknown: tuple[int, ...]
    redeliveries: int  # records beyond the first of each number
    duplicated: int  # numbers recorded more than once


def tally(produced: set[int], seen: Counter[int]) -> Tally:
    duplicates = [number for number, times in seen.items() if times > 1]
    return Tally(
        produced=len(produced),
        processed=len(produced & set(seen)),
        lost=tuple(sorted(produced - set(seen))),
        unknown=tuple(sorted(set(seen) - produced)),
        redeliveries=sum(seen.values()) - len(seen),
        duplicated=len(duplicates),
    )


def summarize(produced: set[int], seen: Counter[int]) -> str:
    """Every produced number must have been processed; duplicates are reported, not failed."""
    found = tally(produced, seen)
    assert not found.lost, f"{len(found.lost)} messages lost, first {list(found.lost[:20])}"
    assert not found.unknown, "a consumer recorded a number nobody produced"
    return (
        f"produced {found.produced}, processed {found.processed} distinct, "
        f"{found.redeliveries} redeliveries over {found.duplicated} messages"
    )
