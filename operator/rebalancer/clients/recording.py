# mypy: disable-error-code="import-untyped"
"""The rebalance history store: files partitioned by day and namespace, JSON lines or Parquet.

Layout (docs/history.md): `ROOT/date=YYYY-MM-DD/namespace=NS/part-<ms>-<id>.jsonl`, Hive-style,
so Spark and DuckDB read it as a partitioned table. The operator writes JSON lines (the standard
library is enough, so the operator's image carries no Parquet library); `rebalancer learn`
compacts each partition into one Parquet file (learning.compaction), so a history holds both
kinds and every reader here reads both. ROOT is a local directory or any fsspec URL (`file://`,
`memory://`; `s3://`, `gs://`, ... once the filesystem's package is installed). Files are never
appended to: each is written under a hidden name (readers skip names starting with "." or "_")
and renamed into place, so no reader ever sees half a file.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import fsspec

from rebalancer.structs.history import HISTORY_COLUMN_NAMES, PARTITION_COLUMNS, RebalanceEvent

JSON_SUFFIX = ".jsonl"
PARQUET_SUFFIX = ".parquet"
# Version 1 wrote `events.jsonl` files (docs/history.md): JSON files of this version are named
# `part-...`, so those are never mistaken for them.
FILE_PREFIX = "part-"


def open_store(root: str | os.PathLike[str]) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and the path inside it for a directory or an fsspec URL."""
    filesystem, path = fsspec.core.url_to_fs(str(root))
    return filesystem, str(path).rstrip("/")


def day_of(unix_seconds: float) -> str:
    return datetime.datetime.fromtimestamp(unix_seconds, tz=datetime.UTC).date().isoformat()


def history_line(record: dict[str, Any]) -> str:
    """One record as a line of a history file: every column, in order, partition columns out.
    A float that is not finite is written as null (unknown): JSON has no NaN, and a reader that
    met one would refuse the whole file."""
    row = {name: _finite(record.get(name)) for name in HISTORY_COLUMN_NAMES}
    return json.dumps(row, separators=(",", ":"), allow_nan=False)


def _finite(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def write_records(root: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> list[str]:
    """Write history rows (with their `namespace`; `date` is taken from `detected_at` when
    absent) as new JSON-lines files, one per partition; return their paths."""
    filesystem, base = open_store(root)
    partitions: dict[tuple[str, str], list[str]] = {}
    for record in records:
        day = str(record.get("date") or day_of(float(record["detected_at"])))
        partitions.setdefault((day, str(record["namespace"])), []).append(history_line(record))
    written: list[str] = []
    for (day, namespace), lines in sorted(partitions.items()):
        directory = f"{base}/date={day}/namespace={namespace}"
        name = f"{FILE_PREFIX}{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}{JSON_SUFFIX}"
        data = ("\n".join(lines) + "\n").encode()
        written.append(write_atomically(filesystem, directory, name, data))
    return written


def write_atomically(
    filesystem: fsspec.AbstractFileSystem, directory: str, name: str, data: bytes
) -> str:
    filesystem.makedirs(directory, exist_ok=True)
    hidden = f"{directory}/.{name}.tmp"
    final = f"{directory}/{name}"
    with filesystem.open(hidden, "wb") as handle:
        handle.write(data)
    # A rename on local disks and in memory; object stores copy, but readers skip the hidden
    # name until the copy exists whole.
    filesystem.mv(hidden, final)
    return final


class HistoryRecorder:
    """Writes the operator's history events; a None root records nothing."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        self.root = root

    def _write(self, events: list[RebalanceEvent]) -> None:
        assert self.root is not None
        write_records(self.root, (event.to_record() for event in events))

    async def record(self, events: Iterable[RebalanceEvent]) -> None:
        batch = list(events)
        if self.root is None or not batch:
            return
        await asyncio.to_thread(self._write, batch)

    async def recorded_keys(self, namespace: str, days: Iterable[str]) -> set[str]:
        """The record keys already written for `namespace` on `days` (YYYY-MM-DD)."""
        if self.root is None:
            return set()
        return await asyncio.to_thread(recorded_keys, self.root, namespace, sorted(set(days)))

    async def recorded_rows(self, namespace: str, days: Iterable[str]) -> list[dict[str, Any]]:
        """The rows the operator wrote for `namespace` on `days` (YYYY-MM-DD); none without a
        store."""
        if self.root is None:
            return []
        return await asyncio.to_thread(recorded_rows, self.root, namespace, sorted(set(days)))


def recorded_keys(root: str | os.PathLike[str], namespace: str, days: Iterable[str]) -> set[str]:
    """Record keys in the JSON-lines files of `namespace` on `days`, so an operator that starts
    again can tell the facts it wrote before from new ones. Keys already compacted into Parquet
    are not read (the operator carries no Parquet reader): a fact written again after its day's
    compaction is one more row of the same key, which every reader of the history drops."""
    rows = recorded_rows(root, namespace, days)
    return {str(row["record_key"]) for row in rows if row.get("record_key") is not None}


def recorded_rows(
    root: str | os.PathLike[str], namespace: str, days: Iterable[str]
) -> list[dict[str, Any]]:
    """The rows of the JSON-lines files of `namespace` on `days`, in file order. Days already
    compacted into Parquet are not read (the operator carries no Parquet reader)."""
    filesystem, base = open_store(root)
    rows: list[dict[str, Any]] = []
    for day in days:
        directory = f"{base}/date={day}/namespace={namespace}"
        if not filesystem.exists(directory):
            continue
        for path in _visible(filesystem.glob(f"{directory}/{FILE_PREFIX}*{JSON_SUFFIX}")):
            try:
                rows += read_json_rows(filesystem, path)
            except FileNotFoundError:  # compacted since the listing: its rows are in Parquet
                continue
    return rows


def read_json_rows(filesystem: fsspec.AbstractFileSystem, path: str) -> list[dict[str, Any]]:
    """The rows of one JSON-lines history file; a line that does not parse is skipped (a file
    damaged on disk loses that line only)."""
    rows: list[dict[str, Any]] = []
    with filesystem.open(path, "rb") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def is_json_file(path: str) -> bool:
    return path.endswith(JSON_SUFFIX)


def _visible(paths: Iterable[str]) -> list[str]:
    return [path for path in paths if not Path(path).name.startswith((".", "_"))]


def history_files(root: str | os.PathLike[str]) -> tuple[fsspec.AbstractFileSystem, list[str]]:
    """Every visible history file under ROOT's partitions, Parquet and JSON lines, sorted
    (hidden temp files skipped)."""
    filesystem, base = open_store(root)
    if not filesystem.exists(base):
        return filesystem, []
    found = filesystem.glob(f"{base}/date=*/namespace=*/*{PARQUET_SUFFIX}")
    found += filesystem.glob(f"{base}/date=*/namespace=*/{FILE_PREFIX}*{JSON_SUFFIX}")
    return filesystem, sorted(_visible(found))


def partition_of(path: str) -> dict[str, str]:
    """The partition columns a file's directories give (`date=...`, `namespace=...`)."""
    found: dict[str, str] = {}
    for part in Path(path).parts:
        key, _, value = part.partition("=")
        if key in PARTITION_COLUMNS and value:
            found[key] = value
    return found
