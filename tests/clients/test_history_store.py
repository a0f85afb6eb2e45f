"""The history store: events go in as Parquet and come back as the same records."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from dataclasses import replace
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rebalancer.clients.recording import HistoryRecorder, history_files
from rebalancer.learning.history_table import FILE_SCHEMA, VERSION_KEY, read_history
from rebalancer.structs.history import (
    HISTORY_SCHEMA_VERSION,
    RebalanceCause,
    RebalanceEvent,
    RecordType,
    SettingsInForce,
)

DAY = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def rebalance(namespace: str = "shop", at: float = DAY) -> RebalanceEvent:
    return RebalanceEvent(
        namespace=namespace,
        name="orders",
        group_id="orders-v1",
        cluster="kafka-0:9092,kafka-1:9092",
        generation=7,
        previous_generation=6,
        cause=RebalanceCause.MEMBER_JOINED,
        detected_at=at,
        started_at=at - 2.5,
        members=3,
        joined=("orders-2",),
        left=(),
        source="member-reports",
        state="Stable",
        join_offsets_ms=(0.0, 120.5, 900.0),
        time_to_stable_ms=2500.0,
        stop_the_world_partition_s=30.0,
        partitions=12,
        batch_id="r1-b0",
        rollout_id="r1",
        settings=SettingsInForce(3000.0, 45000.0, 3000.0, 300000.0, "cooperative-sticky", True, 3),
    )


def pod_start(at: float) -> RebalanceEvent:
    return RebalanceEvent(
        namespace="shop",
        name="orders",
        group_id="orders-v1",
        cluster="kafka-0:9092",
        generation=None,
        previous_generation=None,
        cause=RebalanceCause.UNKNOWN,
        detected_at=at,
        started_at=None,
        members=2,
        joined=(),
        left=(),
        source="operator",
        state="Stable",
        record_type=RecordType.POD_START,
        member="orders-2",
    )


@pytest.fixture(params=["directory", "file-url", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "directory":
        return str(tmp_path / "history")
    if request.param == "file-url":
        return f"file://{tmp_path}/history"
    return f"memory://history-{uuid.uuid4().hex}"


def test_round_trip_keeps_every_field(root: str) -> None:
    events = [rebalance(), pod_start(DAY + 1), rebalance("billing", DAY + 86400)]
    asyncio.run(HistoryRecorder(root).record(events))

    records = read_history(root)

    assert len(records) == 3
    first = records[0]
    expected = events[0].to_record()
    for key, value in expected.items():
        assert first[key] == value, key
    assert first["date"] == "2023-11-14"
    assert records[1]["record_type"] == "pod-start"
    assert records[1]["member"] == "orders-2"
    assert records[1]["batch_size"] is None
    assert records[2]["namespace"] == "billing"
    assert records[2]["date"] == "2023-11-15"


def test_files_are_partitioned_versioned_and_never_appended(root: str) -> None:
    recorder = HistoryRecorder(root)
    asyncio.run(recorder.record([rebalance()]))
    asyncio.run(recorder.record([rebalance(at=DAY + 10)]))

    filesystem, files = history_files(root)

    assert len(files) == 2
    assert all("/date=2023-11-14/namespace=shop/part-" in path for path in files)
    assert all(path.endswith(".jsonl") for path in files)
    with filesystem.open(files[0], "rb") as handle:
        (line,) = handle.read().decode().splitlines()
    row = json.loads(line)
    # Every file column, in the schema's order, the version on every row; no partition column.
    assert list(row) == FILE_SCHEMA.names
    assert row["schema_version"] == HISTORY_SCHEMA_VERSION
    assert len(read_history(root)) == 2


def test_a_float_that_is_not_finite_is_written_as_unknown(tmp_path: Path) -> None:
    event = replace(rebalance(), time_to_stable_ms=math.nan, join_offsets_ms=(0.0, math.inf))
    asyncio.run(HistoryRecorder(tmp_path).record([event]))

    (record,) = read_history(tmp_path)

    assert record["time_to_stable_ms"] is None
    assert record["join_offsets_ms"] == [0.0, None]


def test_readers_skip_hidden_files_a_write_in_progress_leaves(tmp_path: Path) -> None:
    root = tmp_path / "history"
    asyncio.run(HistoryRecorder(root).record([rebalance()]))
    partition = root / "date=2023-11-14" / "namespace=shop"
    (partition / ".part-123.parquet.tmp").write_bytes(b"PAR1 half a file")

    assert len(read_history(root)) == 1


def test_no_root_records_nothing_and_an_empty_root_reads_empty(tmp_path: Path) -> None:
    asyncio.run(HistoryRecorder(None).record([rebalance()]))
    assert read_history(tmp_path / "missing") == []
    fs = fsspec.filesystem("memory")
    assert not fs.exists("/missing")


def test_member_events_carry_the_batch_and_the_settings(tmp_path: Path) -> None:
    from rebalancer.structs.history import member_event

    settings = SettingsInForce(initial_rebalance_delay_ms=3000.0, batch_size=4)
    common = {"namespace": "shop", "name": "orders", "group_id": "g", "cluster": "k:9092"}
    events = [
        member_event(
            RecordType.POD_START,
            **common,
            member="p-0",
            at=DAY,
            members=0,
            batch_id="r1-b0",
            rollout_id="r1",
            settings=settings,
        ),
        member_event(
            RecordType.MEMBER_JOIN,
            **common,
            member="p-0",
            at=DAY + 1.5,
            members=1,
            batch_id="r1-b0",
            rollout_id="r1",
            settings=settings,
        ),
        member_event(
            RecordType.POD_STOP, **common, member="p-0", at=DAY + 60, members=1, departure="crash"
        ),
    ]
    asyncio.run(HistoryRecorder(tmp_path).record(events))
    records = read_history(tmp_path)
    assert [r["record_type"] for r in records] == ["pod-start", "member-join", "pod-stop"]
    assert records[1]["batch_size"] == 4
    assert records[2]["departure"] == "crash"
    with pytest.raises(ValueError, match="not rebalances"):
        member_event(RecordType.REBALANCE, **common, member="p", at=DAY, members=1)


def write_version(root: Path, version: int, at: float) -> Path:
    """A history file as a writer of `version` leaves it: column and footer say the version."""
    from rebalancer.learning.history_table import events_to_table

    table = events_to_table([rebalance(at=at)]).drop_columns(["date", "namespace"])
    table = table.set_column(
        table.schema.get_field_index("schema_version"),
        "schema_version",
        pa.array([version], pa.int32()),
    ).replace_schema_metadata({VERSION_KEY: str(version).encode()})
    folder = root / "date=2023-11-14" / "namespace=shop"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-v{version}.parquet"
    pq.write_table(table, path)
    return path


def test_older_versions_stay_readable_and_newer_ones_are_refused(tmp_path: Path) -> None:
    from rebalancer.learning.inputs import find_inputs

    old = write_version(tmp_path, 2, DAY)
    current = write_version(tmp_path, HISTORY_SCHEMA_VERSION, DAY + 1)
    newer = write_version(tmp_path, HISTORY_SCHEMA_VERSION + 1, DAY + 2)

    inputs = find_inputs(tmp_path)

    assert sorted(inputs.files) == sorted([str(old), str(current)])
    (skipped,) = inputs.skipped
    assert skipped.path == str(newer)
    assert f"history schema version {HISTORY_SCHEMA_VERSION + 1}" in skipped.reason
    versions = {row["detected_at"]: row["schema_version"] for row in read_history(tmp_path)}
    assert versions[DAY] == 2 and versions[DAY + 1] == HISTORY_SCHEMA_VERSION


def test_a_streams_groups_records_keep_its_protocol_and_old_lines_read_it_as_unknown(
    tmp_path: Path,
) -> None:
    streams = replace(rebalance(), settings=SettingsInForce(10000.0, group_protocol="streams"))
    asyncio.run(HistoryRecorder(tmp_path).record([streams]))
    # A line written before the column existed.
    older = {**rebalance(at=DAY + 1).to_record(), "namespace": "shop"}
    older.pop("group_protocol")
    folder = tmp_path / "date=2023-11-14" / "namespace=shop"
    (folder / "part-0-older.jsonl").write_text(json.dumps(older) + "\n")
    rows = read_history(tmp_path)
    assert [(row["group_protocol"], row["initial_rebalance_delay_ms"]) for row in rows] == [
        ("streams", 10000.0),
        (None, 3000.0),
    ]
    assert "group_protocol" in FILE_SCHEMA.names
