# mypy: disable-error-code="import-untyped"
"""Which history files the job may read: every Parquet file's footer checked before Spark sees it.

Spark fails a whole job on one unreadable file, and silently mixes columns of foreign files; a
footer read per file (a few kB each) lets the job skip what it cannot use and say why. Footers are
read by a few threads at once (pyarrow reads without the GIL), local ones by pyarrow's own file
reader rather than through fsspec's Python file objects: at 23,730 small files this step took 27 s
one by one. JSON-lines files (what the operator writes, until a compaction) have no footer: Spark
reads them leniently (a damaged line is a row of nulls, dropped) and rows of a newer schema are
dropped by their schema_version. A file a compacted file says it replaces is left out: its rows
are in that file (learning.compaction).

A history on a store Spark reads itself (s3a://, hdfs://, ...; learning.locations) is not opened
here at all: Spark lists it and its executors read it, and rows of a newer schema are dropped by
their schema_version column instead of by a footer check.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from rebalancer.clients.recording import history_files, is_json_file, open_store
from rebalancer.learning.history_table import check_schema, remaining_inputs, superseded_by
from rebalancer.learning.locations import read_by_spark, scheme_of

if TYPE_CHECKING:
    import fsspec

# Threads reading footers: enough to overlap the reads, few enough for a small machine.
FOOTER_THREADS = 8


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str


@dataclass(frozen=True)
class HistoryInputs:
    root: str
    base: str
    protocol: str
    files: tuple[str, ...]  # Parquet, footers checked
    rows: int
    size_bytes: int
    skipped: tuple[SkippedFile, ...] = field(default_factory=tuple)
    # Spark lists and reads ROOT itself (files is empty; rows and size are not known up front).
    listed_by_spark: bool = False
    # JSON lines (not compacted yet); their rows are counted as lines.
    json_files: tuple[str, ...] = ()
    # Every partition is one compacted file (no JSON beside it): a compaction dropped the
    # repeats of every record key already, since a fact's repeats share its day and namespace.
    keys_unique: bool = False

    @property
    def readable(self) -> bool:
        return bool(self.files) or bool(self.json_files) or self.listed_by_spark

    @property
    def messages(self) -> list[str]:
        lines = [f"skipped {skip.path}: {skip.reason}" for skip in self.skipped]
        if not self.readable:
            lines.append(f"no readable history under {self.root}: nothing to learn from")
        return lines


def find_inputs(root: str | os.PathLike[str]) -> HistoryInputs:
    """Every history file under ROOT that the job can read, and why the others are skipped."""
    if read_by_spark(str(root)):
        location = str(root).rstrip("/")
        return HistoryInputs(
            location, location, scheme_of(location), (), 0, 0, listed_by_spark=True
        )
    filesystem, found = history_files(root)
    _, base = open_store(root)
    protocol = (
        filesystem.protocol if isinstance(filesystem.protocol, str) else filesystem.protocol[0]
    )
    local = protocol in ("file", "local")
    files = [path for path in found if not is_json_file(path)]
    json_files = [path for path in found if is_json_file(path)]

    good: dict[str, tuple[int, int]] = {}
    skipped: list[SkippedFile] = []
    replaced: set[tuple[str, str]] = set()
    compacted: set[str] = set()
    with ThreadPoolExecutor(max_workers=FOOTER_THREADS) as pool:
        for path, (metadata, file_size, reason) in zip(
            files, pool.map(partial(_read_footer, filesystem, local), files), strict=True
        ):
            if metadata is None or reason is not None:
                skipped.append(SkippedFile(path, reason or "not readable Parquet"))
                continue
            good[path] = (metadata.num_rows, file_size)
            directory = str(Path(path).parent)
            supersedes = superseded_by(metadata.metadata)
            replaced |= {(directory, name) for name in supersedes}
            if supersedes:
                compacted.add(path)
        counted = dict(
            zip(json_files, pool.map(partial(_count_lines, filesystem), json_files), strict=True)
        )
    kept = remaining_inputs(good, replaced)
    kept_json = remaining_inputs(json_files, replaced)
    rows = sum(good[path][0] for path in kept) + sum(counted[path][0] for path in kept_json)
    size = sum(good[path][1] for path in kept) + sum(counted[path][1] for path in kept_json)
    return HistoryInputs(
        str(root),
        base,
        protocol,
        tuple(kept),
        rows,
        size,
        tuple(skipped),
        json_files=tuple(kept_json),
        keys_unique=bool(kept)
        and not kept_json
        and all(path in compacted for path in kept)
        and len({str(Path(path).parent) for path in kept}) == len(kept),
    )


def _read_footer(
    filesystem: fsspec.AbstractFileSystem, local: bool, path: str
) -> tuple[pq.FileMetaData | None, int, str | None]:
    """(the Parquet footer, the file's size, why its schema is refused); (None, 0, why) for a
    file that is not readable Parquet."""
    try:
        if local:
            metadata = pq.read_metadata(path)
            size = os.path.getsize(path)
        else:
            with filesystem.open(path, "rb") as handle:
                metadata = pq.read_metadata(handle)
            size = int(filesystem.size(path) or 0)
        schema = metadata.schema.to_arrow_schema()
    except Exception as error:  # pyarrow raises several types for a damaged footer
        return None, 0, f"not readable Parquet ({_short(error)})"
    return metadata, size, check_schema(schema)


def _count_lines(filesystem: fsspec.AbstractFileSystem, path: str) -> tuple[int, int]:
    """(the lines, the bytes) of a JSON-lines history file."""
    with filesystem.open(path, "rb") as handle:
        data = handle.read()
    return data.count(b"\n"), len(data)


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:160]
