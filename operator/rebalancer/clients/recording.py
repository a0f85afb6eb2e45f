# mypy: disable-error-code="import-untyped"
"""The rebalance history store: Parquet files partitioned by day and namespace.

Layout (docs/history.md): `ROOT/date=YYYY-MM-DD/namespace=NS/part-<ms>-<id>.parquet`, Hive-style,
so Spark, pyarrow and DuckDB read it as a partitioned table. ROOT is a local directory or any
fsspec URL (`file://`, `memory://`; `s3://`, `gs://`, ... once the filesystem's package is
installed). Each `record` call writes new files and never appends: a file is written under a
hidden name (readers skip names starting with "." or "_") and renamed into place, so no reader
ever sees half a file.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from rebalancer.structs.history import HISTORY_SCHEMA_VERSION, RebalanceEvent

# The version lives in the footer's key-value metadata too, so a reader can refuse a newer file
# from its footer alone, without reading a row.
VERSION_KEY = b"rebalancer.history.schema_version"
PARTITION_COLUMNS = ("date", "namespace")

# Columns of a history file. `date` and `namespace` are not stored in the file: they are the
# partition directories (Spark refuses a column that is both).
FILE_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("record_type", pa.string()),
        ("name", pa.string()),
        ("group_id", pa.string()),
        ("cluster", pa.string()),
        ("generation", pa.int64()),
        ("previous_generation", pa.int64()),
        ("cause", pa.string()),
        ("detected_at", pa.float64()),
        ("started_at", pa.float64()),
        ("members", pa.int32()),
        ("joined", pa.list_(pa.string())),
        ("left", pa.list_(pa.string())),
        ("source", pa.string()),
        ("state", pa.string()),
        ("member", pa.string()),
        ("departure", pa.string()),
        ("join_offsets_ms", pa.list_(pa.float64())),
        ("time_to_stable_ms", pa.float64()),
        ("stop_the_world_partition_s", pa.float64()),
        ("partitions", pa.int32()),
        ("batch_id", pa.string()),
        ("rollout_id", pa.string()),
        ("initial_rebalance_delay_ms", pa.float64()),
        ("session_timeout_ms", pa.float64()),
        ("heartbeat_interval_ms", pa.float64()),
        ("max_poll_interval_ms", pa.float64()),
        ("assignor", pa.string()),
        ("static_membership", pa.bool_()),
        ("batch_size", pa.int32()),
        ("record_key", pa.string()),
    ],
    metadata={VERSION_KEY: str(HISTORY_SCHEMA_VERSION).encode()},
)
PARTITIONING = ds.partitioning(
    pa.schema([("date", pa.string()), ("namespace", pa.string())]), flavor="hive"
)
# Without these a file is not a history file at all (another tool's Parquet).
REQUIRED_COLUMNS = frozenset(
    {"schema_version", "record_type", "group_id", "cluster", "detected_at"}
)


def open_store(root: str | os.PathLike[str]) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and the path inside it for a directory or an fsspec URL."""
    filesystem, path = fsspec.core.url_to_fs(str(root))
    return filesystem, str(path).rstrip("/")


def day_of(unix_seconds: float) -> str:
    return datetime.datetime.fromtimestamp(unix_seconds, tz=datetime.UTC).date().isoformat()


def events_to_table(events: Iterable[RebalanceEvent]) -> pa.Table:
    """History rows with their partition columns (date, namespace) still in."""
    rows = [event.to_record() for event in events]
    for row in rows:
        row["date"] = day_of(float(str(row["detected_at"])))
    columns: dict[str, list[Any]] = {
        name: [row.get(name) for row in rows] for name in FILE_SCHEMA.names
    }
    table = pa.table(columns, schema=FILE_SCHEMA)
    table = table.append_column("date", pa.array([row["date"] for row in rows], pa.string()))
    return table.append_column(
        "namespace", pa.array([row["namespace"] for row in rows], pa.string())
    )


def write_table(root: str | os.PathLike[str], table: pa.Table) -> list[str]:
    """Write history rows (with date and namespace columns) as new files; return their paths."""
    filesystem, base = open_store(root)
    written: list[str] = []
    if table.num_rows == 0:
        return written
    keys = table.select(list(PARTITION_COLUMNS)).group_by(list(PARTITION_COLUMNS)).aggregate([])
    for day, namespace in zip(
        keys.column("date").to_pylist(), keys.column("namespace").to_pylist(), strict=True
    ):
        mask = pc.and_(
            pc.equal(table.column("date"), day),
            pc.equal(table.column("namespace"), namespace),
        )
        part = table.filter(mask).drop_columns(list(PARTITION_COLUMNS))
        part = part.cast(FILE_SCHEMA)
        directory = f"{base}/date={day}/namespace={namespace}"
        name = f"part-{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}.parquet"
        written.append(_write_atomically(filesystem, directory, name, part))
    return written


def _write_atomically(
    filesystem: fsspec.AbstractFileSystem, directory: str, name: str, table: pa.Table
) -> str:
    filesystem.makedirs(directory, exist_ok=True)
    hidden = f"{directory}/.{name}.tmp"
    final = f"{directory}/{name}"
    with filesystem.open(hidden, "wb") as handle:
        pq.write_table(table, handle, compression="zstd")
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
        write_table(self.root, events_to_table(events))

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


def recorded_keys(root: str | os.PathLike[str], namespace: str, days: Iterable[str]) -> set[str]:
    """Record keys under ROOT's partitions of `namespace` on `days`: only that column is read,
    so an operator that starts again can tell the facts it wrote before from new ones."""
    filesystem, base = open_store(root)
    files: list[str] = []
    for day in days:
        directory = f"{base}/date={day}/namespace={namespace}"
        if filesystem.exists(directory):
            found = filesystem.glob(f"{directory}/*.parquet")
            files += [path for path in found if not Path(path).name.startswith((".", "_"))]
    if not files:
        return set()
    # Files written before keys existed lack the column: it reads as nulls.
    schema = pa.schema([FILE_SCHEMA.field("record_key")])
    keys: set[str] = set()
    for path in files:
        try:
            table = ds.dataset(path, filesystem=filesystem, format="parquet", schema=schema)
            column = table.to_table().column("record_key").to_pylist()
        except Exception:  # a damaged or foreign file holds none of ours
            continue
        keys.update(str(key) for key in column if key is not None)
    return keys


def history_files(root: str | os.PathLike[str]) -> tuple[fsspec.AbstractFileSystem, list[str]]:
    """Every visible Parquet file under ROOT's partitions, sorted (hidden temp files skipped)."""
    filesystem, base = open_store(root)
    if not filesystem.exists(base):
        return filesystem, []
    found = filesystem.glob(f"{base}/date=*/namespace=*/*.parquet")
    visible = [path for path in found if not Path(path).name.startswith((".", "_"))]
    return filesystem, sorted(visible)


def read_history(root: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Every record under ROOT as a dict, partition columns included (small histories: tests,
    the lab, quick looks; the learning job reads through Spark)."""
    filesystem, files = history_files(root)
    if not files:
        return []
    _, base = open_store(root)
    # One schema for every file: a column added within a version (record_key) reads as null
    # from the files written before it, whichever file comes first.
    dataset = ds.dataset(
        files,
        filesystem=filesystem,
        format="parquet",
        partitioning=PARTITIONING,
        partition_base_dir=base,
        schema=FILE_SCHEMA.append(pa.field("date", pa.string())).append(
            pa.field("namespace", pa.string())
        ),
    )
    table = dataset.to_table()
    rows: list[dict[str, object]] = table.to_pylist()
    rows.sort(key=lambda row: (float(str(row["detected_at"])), str(row.get("record_type"))))
    return rows
