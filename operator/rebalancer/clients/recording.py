"""Append rebalance history events to JSON-lines files, one file per day and namespace.

The learning jobs read this directory; the Parquet store of the learning work replaces the
file format without changing the records.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterable
from pathlib import Path

from rebalancer.structs.history import RebalanceEvent


class HistoryRecorder:
    def __init__(self, root: Path | None) -> None:
        self.root = root

    def _path(self, event: RebalanceEvent) -> Path:
        assert self.root is not None
        day = datetime.datetime.fromtimestamp(event.detected_at, tz=datetime.UTC).date()
        return (
            self.root / f"date={day.isoformat()}" / f"namespace={event.namespace}" / "events.jsonl"
        )

    def _write(self, events: list[RebalanceEvent]) -> None:
        for event in events:
            path = self._path(event)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(event.to_record(), sort_keys=True) + "\n")

    async def record(self, events: Iterable[RebalanceEvent]) -> None:
        batch = list(events)
        if self.root is None or not batch:
            return
        await asyncio.to_thread(self._write, batch)


def read_history(root: Path) -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for path in sorted(root.glob("date=*/namespace=*/events.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records
