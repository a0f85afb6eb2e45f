# mypy: disable-error-code="import-untyped"
"""Compaction: each partition's many small files become one Parquet file, repeats dropped.

The operator writes a small JSON-lines file per observation that found something, thousands a
day across a fleet, and Spark pays a few milliseconds for every file it opens (at 1e7 records,
23,730 files cost about 30 s a pass). Before it reads, the learning job compacts: per partition
(day, namespace), every history file it can use is read, a row whose `record_key` came before is
dropped, and the rest is written as one Parquet file, sorted by time, under a hidden name and
renamed into place; then the files it read are deleted.

Nothing is lost or counted twice, whatever stops it where:
- a file written after the partition was listed is neither read nor deleted (the next run takes
  it);
- files it cannot use (damaged, another tool's, a newer schema) stay, for the reader to skip and
  say why;
- the Parquet file names the files it replaces in its footer (COMPACTED_FROM_KEY): a reader that
  finds one of them still there (the job stopped between the rename and the deletes, or another
  reader listed in between) skips it, and the next compaction deletes it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rebalancer.clients.recording import (
    FILE_PREFIX,
    JSON_SUFFIX,
    PARQUET_SUFFIX,
    is_json_file,
    open_store,
    write_atomically,
)
from rebalancer.learning.history_table import (
    COMPACTED_FROM_KEY,
    VERSION_KEY,
    check_schema,
    conform,
    parquet_bytes,
    read_json_bytes,
    read_json_table,
    superseded_by,
)
from rebalancer.structs.history import HISTORY_SCHEMA_VERSION

# Partitions compacted at once: reads and writes release the GIL, and a small machine's disk
# is kept busy without holding many partitions in memory.
COMPACTION_THREADS = 4
PROGRESS_INTERVAL_S = 10.0

Progress = Callable[[str], None]


@dataclass
class CompactionResult:
    partitions: int = 0  # partitions rewritten
    files_read: int = 0
    files_removed: int = 0
    rows_read: int = 0
    rows_written: int = 0
    files_left: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    seconds: float = 0.0

    @property
    def repeats_dropped(self) -> int:
        return self.rows_read - self.rows_written


def partition_directories(root: str | os.PathLike[str]) -> list[str]:
    filesystem, base = open_store(root)
    if not filesystem.exists(base):
        return []
    found = filesystem.glob(f"{base}/date=*/namespace=*")
    return sorted(path for path in found if filesystem.isdir(path))


def compact(
    root: str | os.PathLike[str],
    progress: Progress = print,
    threads: int = COMPACTION_THREADS,
) -> CompactionResult:
    """Compact every partition under ROOT that holds JSON lines or more than one Parquet file."""
    started = time.perf_counter()
    filesystem, _ = open_store(root)
    directories = partition_directories(root)
    result = CompactionResult()
    lock = threading.Lock()
    done = 0
    last = time.monotonic()

    def one(directory: str) -> None:
        nonlocal done, last
        part = _compact_partition(filesystem, directory)
        with lock:
            done += 1
            _add(result, part)
            if time.monotonic() - last >= PROGRESS_INTERVAL_S:
                last = time.monotonic()
                progress(
                    f"      compacting: {done:,} of {len(directories):,} partitions, "
                    f"{result.files_read:,} files read"
                )

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        list(pool.map(one, directories))
    result.seconds = time.perf_counter() - started
    return result


def _add(total: CompactionResult, part: CompactionResult) -> None:
    total.partitions += part.partitions
    total.files_read += part.files_read
    total.files_removed += part.files_removed
    total.rows_read += part.rows_read
    total.rows_written += part.rows_written
    total.files_left += part.files_left


def _compact_partition(filesystem: fsspec.AbstractFileSystem, directory: str) -> CompactionResult:
    result = CompactionResult()
    found = filesystem.glob(f"{directory}/*{PARQUET_SUFFIX}")
    found += filesystem.glob(f"{directory}/{FILE_PREFIX}*{JSON_SUFFIX}")
    files = sorted(path for path in found if not Path(path).name.startswith((".", "_")))
    if not any(is_json_file(path) for path in files) and len(files) <= 1:
        return result
    read: list[str] = []
    tables: list[tuple[str, pa.Table]] = []
    replaced: set[str] = set()
    for path in (path for path in files if not is_json_file(path)):
        table, problem, supersedes = _read_one(filesystem, path)
        if table is None:
            result.files_left.append((path, problem or "not readable"))
            continue
        read.append(path)
        tables.append((path, table))
        replaced |= supersedes
    # Rows of a file an earlier compaction replaced are in that compaction's file: it is
    # deleted, not read again.
    stale = [path for path in files if Path(path).name in replaced]
    merged_parts = [table for path, table in tables if Path(path).name not in replaced]
    fresh = [path for path in files if is_json_file(path) and Path(path).name not in replaced]
    json_table, json_read = _read_json_files(filesystem, fresh, result)
    read += json_read
    if json_table is not None:
        merged_parts.append(json_table)
    if not merged_parts:
        return result
    merged = pa.concat_tables(merged_parts)
    unique = drop_repeats(merged).sort_by("detected_at")
    gone = sorted(set(read) | set(stale))
    metadata = {
        VERSION_KEY: str(HISTORY_SCHEMA_VERSION).encode(),
        COMPACTED_FROM_KEY: json.dumps(sorted(Path(path).name for path in gone)).encode(),
    }
    data = parquet_bytes(unique.replace_schema_metadata(metadata))
    name = f"{FILE_PREFIX}{int(time.time() * 1000)}-compacted{PARQUET_SUFFIX}"
    write_atomically(filesystem, directory, name, data)
    result.partitions = 1
    result.files_read = len(read)
    result.rows_read = merged.num_rows
    result.rows_written = unique.num_rows
    for path in gone:
        try:
            filesystem.rm(path)
            result.files_removed += 1
        except FileNotFoundError:  # another compaction got there first
            pass
    return result


def _read_json_files(
    filesystem: fsspec.AbstractFileSystem, paths: list[str], result: CompactionResult
) -> tuple[pa.Table | None, list[str]]:
    """The rows of a partition's JSON-lines files, and which files they came from.

    All at once when they parse together (one parse instead of one per file: at a few dozen
    records a file, the per-file cost was most of a compaction); file by file otherwise, so a
    damaged or newer file stays where it is and only it.
    """
    if not paths:
        return None, []
    try:
        parts = [filesystem.cat_file(path) for path in paths]
        if all(part.endswith(b"\n") for part in parts):
            table = read_json_bytes(b"".join(parts))
            if not _newer(table):
                return table, list(paths)
    except (OSError, ValueError, pa.ArrowException):
        pass  # one of them is damaged or gone: find which, file by file
    tables: list[pa.Table] = []
    read: list[str] = []
    for path in paths:
        table, problem, _ = _read_one(filesystem, path)
        if table is None:
            result.files_left.append((path, problem or "not readable"))
            continue
        tables.append(table)
        read.append(path)
    return (pa.concat_tables(tables) if tables else None), read


def _newer(table: pa.Table) -> int | None:
    """The newest schema version among the rows, when it is newer than this reader's."""
    version = pc.max(table.column("schema_version")).as_py()
    return int(version) if version is not None and version > HISTORY_SCHEMA_VERSION else None


def _read_one(
    filesystem: fsspec.AbstractFileSystem, path: str
) -> tuple[pa.Table | None, str | None, set[str]]:
    """A file's rows in the file schema, or why it stays where it is; and what it supersedes."""
    try:
        if is_json_file(path):
            table = read_json_table(filesystem, path)
            newer = _newer(table)
            if newer is not None:
                return None, f"holds rows of history schema version {newer}", set()
            return table, None, set()
        with filesystem.open(path, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            schema = parquet.schema_arrow
            problem = check_schema(schema)
            if problem is not None:
                return None, problem, set()
            table = parquet.read()
        return conform(table), None, superseded_by(schema.metadata)
    except (OSError, ValueError, pa.ArrowException) as error:
        text = str(error).strip()
        return None, text.splitlines()[0][:160] if text else type(error).__name__, set()


def drop_repeats(table: pa.Table) -> pa.Table:
    """Keep the first row of every `record_key`; rows without a key are each their own fact."""
    keys = table.column("record_key")
    if keys.null_count == table.num_rows:
        return table
    numbered = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    keyed = numbered.filter(pc.is_valid(keys))
    first = keyed.group_by("record_key", use_threads=False).aggregate([("__row", "min")])
    rows = pa.concat_arrays(
        [
            numbered.filter(pc.is_null(keys)).column("__row").combine_chunks(),
            first.column("__row_min").combine_chunks(),
        ]
    )
    return table.take(pc.take(rows, pc.sort_indices(rows)))
