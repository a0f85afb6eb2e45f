# mypy: disable-error-code="import-untyped"
"""Which history files the job may read: every file's footer checked before Spark sees it.

Spark fails a whole job on one unreadable file, and silently mixes columns of foreign files; a
footer read per file (a few kB each) lets the job skip what it cannot use and say why. Footers are
read by a few threads at once (pyarrow reads without the GIL), local ones by pyarrow's own file
reader rather than through fsspec's Python file objects: at 23,730 small files this step took 27 s
one by one.

A history on a store Spark reads itself (s3a://, hdfs://, ...; learning.locations) is not opened
here at all: Spark lists it and its executors read it, and rows of a newer schema are dropped by
their schema_version column instead of by a footer check.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from rebalancer.clients.recording import (
    FILE_SCHEMA,
    REQUIRED_COLUMNS,
    VERSION_KEY,
    history_files,
    open_store,
)
from rebalancer.learning.locations import read_by_spark, scheme_of
from rebalancer.structs.history import HISTORY_SCHEMA_VERSION

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
    files: tuple[str, ...]
    rows: int
    size_bytes: int
    skipped: tuple[SkippedFile, ...] = field(default_factory=tuple)
    # Spark lists and reads ROOT itself (files is empty; rows and size are not known up front).
    listed_by_spark: bool = False

    @property
    def readable(self) -> bool:
        return bool(self.files) or self.listed_by_spark

    @property
    def messages(self) -> list[str]:
        lines = [f"skipped {skip.path}: {skip.reason}" for skip in self.skipped]
        if not self.readable:
            lines.append(f"no readable history under {self.root}: nothing to learn from")
        return lines


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


def find_inputs(root: str | os.PathLike[str]) -> HistoryInputs:
    """Every history file under ROOT that the job can read, and why the others are skipped."""
    if read_by_spark(str(root)):
        location = str(root).rstrip("/")
        return HistoryInputs(
            location, location, scheme_of(location), (), 0, 0, listed_by_spark=True
        )
    filesystem, files = history_files(root)
    _, base = open_store(root)
    protocol = (
        filesystem.protocol if isinstance(filesystem.protocol, str) else filesystem.protocol[0]
    )
    local = protocol in ("file", "local")

    def footer(path: str) -> tuple[pq.FileMetaData | None, int, str | None]:
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

    good: list[str] = []
    skipped: list[SkippedFile] = []
    rows = 0
    size = 0
    with ThreadPoolExecutor(max_workers=FOOTER_THREADS) as pool:
        for path, (metadata, file_size, reason) in zip(files, pool.map(footer, files), strict=True):
            if metadata is None or reason is not None:
                skipped.append(SkippedFile(path, reason or "not readable Parquet"))
                continue
            good.append(path)
            rows += metadata.num_rows
            size += file_size
    return HistoryInputs(str(root), base, protocol, tuple(good), rows, size, tuple(skipped))


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:160]
