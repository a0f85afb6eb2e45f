# mypy: disable-error-code="import-untyped"
"""The history as Arrow tables: the Parquet schema, JSON-lines files read into it, Parquet written.

The columns and their types are structs.history.HISTORY_COLUMNS; this module gives them Arrow
types. The operator writes JSON lines without any of this (clients.recording); the learning job
reads both kinds into one schema and writes the Parquet files a compaction leaves.
"""

from __future__ import annotations

import json
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
import pyarrow.json as pj
import pyarrow.parquet as pq

from rebalancer.clients.recording import (
    FILE_PREFIX,
    PARQUET_SUFFIX,
    day_of,
    history_files,
    is_json_file,
    open_store,
    partition_of,
    read_json_rows,
    write_atomically,
)
from rebalancer.structs.history import (
    HISTORY_COLUMN_NAMES,
    HISTORY_COLUMNS,
    HISTORY_SCHEMA_VERSION,
    PARTITION_COLUMNS,
    REQUIRED_COLUMNS,
    RebalanceEvent,
)

# The version lives in a Parquet file's key-value metadata too, so a reader can refuse a newer
# file from its footer alone, without reading a row.
VERSION_KEY = b"rebalancer.history.schema_version"
# A compacted file names the files it replaces (learning.compaction): readers skip any of them
# still there.
COMPACTED_FROM_KEY = b"rebalancer.history.compacted_from"

_SCALARS: dict[str, pa.DataType] = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}


def arrow_type(kind: str) -> pa.DataType:
    if kind.startswith("list<") and kind.endswith(">"):
        return pa.list_(arrow_type(kind[5:-1]))
    return _SCALARS[kind]


# Columns of a history file. `date` and `namespace` are not stored in the file: they are the
# partition directories (Spark refuses a column that is both).
FILE_SCHEMA = pa.schema(
    [(name, arrow_type(kind)) for name, kind in HISTORY_COLUMNS],
    metadata={VERSION_KEY: str(HISTORY_SCHEMA_VERSION).encode()},
)
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field("date", pa.string())).append(
    pa.field("namespace", pa.string())
)
PARTITIONING = ds.partitioning(
    pa.schema([("date", pa.string()), ("namespace", pa.string())]), flavor="hive"
)


def check_schema(schema: pa.Schema) -> str | None:
    """Why a file with this schema cannot be read as history, or None when it can."""
    version_text = (schema.metadata or {}).get(VERSION_KEY)
    missing = sorted(REQUIRED_COLUMNS - set(schema.names))
    if missing and version_text is None:
        return f"not a rebalancer history file (no column {', '.join(missing)})"
    if version_text is not None:
        try:
            version = int(version_text)
        except ValueError:
            return f"unreadable schema version {version_text!r}"
        if version > HISTORY_SCHEMA_VERSION:
            return (
                f"written by a newer rebalancer (history schema version {version}; this one "
                f"reads up to {HISTORY_SCHEMA_VERSION}): upgrade rebalancer learn to use it"
            )
    if missing:
        return f"history file without column {', '.join(missing)}"
    for name in schema.names:
        expected = FILE_SCHEMA.field(name).type if name in FILE_SCHEMA.names else None
        if expected is not None and schema.field(name).type != expected:
            return f"column {name} is {schema.field(name).type}, expected {expected}"
    return None


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


def conform(table: pa.Table) -> pa.Table:
    """A history table in today's file schema: a column an older file lacks reads as null."""
    columns = [
        table.column(name) if name in table.column_names else pa.nulls(table.num_rows, kind)
        for name, kind in zip(FILE_SCHEMA.names, FILE_SCHEMA.types, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=FILE_SCHEMA)


_JSON_OPTIONS = pj.ParseOptions(explicit_schema=FILE_SCHEMA, unexpected_field_behavior="ignore")


def read_json_table(filesystem: fsspec.AbstractFileSystem, path: str) -> pa.Table:
    """One JSON-lines history file in the file schema (a column it lacks reads as null; keys
    that are not columns are ignored, so a newer writer's added fields do not fail the read)."""
    with filesystem.open(path, "rb") as handle:
        table = pj.read_json(handle, parse_options=_JSON_OPTIONS)
    return table.select(FILE_SCHEMA.names).cast(FILE_SCHEMA)


def read_json_bytes(data: bytes) -> pa.Table:
    """JSON lines (several files' worth, joined) in the file schema, as read_json_table."""
    table = pj.read_json(pa.BufferReader(data), parse_options=_JSON_OPTIONS)
    return table.select(FILE_SCHEMA.names).cast(FILE_SCHEMA)


def parquet_bytes(table: pa.Table) -> bytes:
    """A Parquet file of `table` in the file schema, its footer keeping the table's own
    metadata (a compaction's COMPACTED_FROM_KEY) beside the version."""
    metadata = {**(FILE_SCHEMA.metadata or {}), **(table.schema.metadata or {})}
    sink = pa.BufferOutputStream()
    pq.write_table(
        table.cast(FILE_SCHEMA).replace_schema_metadata(metadata), sink, compression="zstd"
    )
    return bytes(sink.getvalue().to_pybytes())


def write_parquet(filesystem: fsspec.AbstractFileSystem, directory: str, table: pa.Table) -> str:
    """One Parquet file of `table` (file columns only) in `directory`, written atomically."""
    name = f"{FILE_PREFIX}{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}{PARQUET_SUFFIX}"
    return write_atomically(filesystem, directory, name, parquet_bytes(table))


def write_table(root: str | os.PathLike[str], table: pa.Table) -> list[str]:
    """Write history rows (with date and namespace columns) as new Parquet files, one per
    partition (what a compaction leaves); return their paths."""
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
        written.append(write_parquet(filesystem, f"{base}/date={day}/namespace={namespace}", part))
    return written


def superseded_by(metadata: dict[bytes, bytes] | None) -> set[str]:
    """The file names a compacted file's footer says it replaces (none for other files)."""
    text = (metadata or {}).get(COMPACTED_FROM_KEY)
    if not text:
        return set()
    try:
        names = json.loads(text)
    except ValueError:
        return set()
    return {str(name) for name in names} if isinstance(names, list) else set()


def remaining_inputs(files: Iterable[str], replaced: Iterable[tuple[str, str]]) -> list[str]:
    """`files` without those a compacted file in the same directory replaces ((directory, name)
    pairs, from superseded_by)."""
    gone = set(replaced)
    return [path for path in files if (str(Path(path).parent), Path(path).name) not in gone]


def read_history(root: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Every record under ROOT as a dict, partition columns included, sorted by time (small
    histories: tests, the lab, quick looks; the learning job reads through Spark). A file that
    a compacted file replaces is left out, as the job leaves it out."""
    filesystem, files = history_files(root)
    rows: list[dict[str, object]] = []
    replaced: set[tuple[str, str]] = set()
    tables: dict[str, pa.Table] = {}
    for path in files:
        if not is_json_file(path):
            with filesystem.open(path, "rb") as handle:
                parquet = pq.ParquetFile(handle)
                folder = str(Path(path).parent)
                names = superseded_by(parquet.schema_arrow.metadata)
                replaced |= {(folder, name) for name in names}
                tables[path] = parquet.read()
    for path in remaining_inputs(files, replaced):
        found = tables[path].to_pylist() if path in tables else read_json_rows(filesystem, path)
        for row in found:
            if not isinstance(row.get("detected_at"), int | float):
                continue  # a damaged line that parsed (`{}`, say) is no record
            record: dict[str, object] = {name: row.get(name) for name in HISTORY_COLUMN_NAMES}
            record.update(partition_of(path))
            rows.append(record)
    rows.sort(key=lambda row: (float(str(row["detected_at"])), str(row.get("record_type"))))
    return rows
