"""Compaction: a partition's JSON-lines and Parquet files become one Parquet file, nothing lost."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rebalancer.clients.recording import HistoryRecorder, history_files
from rebalancer.learning.compaction import compact, drop_repeats
from rebalancer.learning.history_table import (
    COMPACTED_FROM_KEY,
    VERSION_KEY,
    events_to_table,
    read_history,
    write_table,
)
from rebalancer.learning.inputs import find_inputs
from rebalancer.structs.history import (
    HISTORY_SCHEMA_VERSION,
    RebalanceCause,
    RebalanceEvent,
    RecordType,
    member_event,
)

DAY = 1_700_000_000.0  # 2023-11-14T22:13:20Z
COMMON = {"name": "orders", "group_id": "g", "cluster": "k:9092"}


def rebalance(at: float, namespace: str = "shop") -> RebalanceEvent:
    return RebalanceEvent(
        namespace=namespace,
        **COMMON,
        generation=int(at) % 1000,
        previous_generation=None,
        cause=RebalanceCause.MEMBER_JOINED,
        detected_at=at,
        started_at=None,
        members=2,
        joined=("p-1",),
        left=(),
        source="member-reports",
        state="Stable",
    )


def pod_stop(at: float, key: str, namespace: str = "shop") -> RebalanceEvent:
    return member_event(
        RecordType.POD_STOP,
        namespace=namespace,
        **COMMON,
        member="p-1",
        at=at,
        members=2,
        source="kubernetes",
        departure="crash",
        record_key=key,
    )


def record(root: str | Path, *events: RebalanceEvent) -> None:
    asyncio.run(HistoryRecorder(root).record(events))


def facts(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(
        (row["date"], row["namespace"], row["record_type"], row["detected_at"], row["record_key"])
        for row in rows
    )


@pytest.fixture(params=["directory", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "directory":
        return str(tmp_path / "history")
    return f"memory://compaction-{uuid.uuid4().hex}"


def test_each_partition_becomes_one_parquet_file_with_every_record(root: str) -> None:
    # What an operator leaves: a file per observation, two namespaces, two days; and a Parquet
    # file a compaction of an earlier day's first hours left.
    record(root, rebalance(DAY), pod_stop(DAY + 1, "pod-stop/u1/0"))
    record(root, rebalance(DAY + 5), rebalance(DAY + 6, "billing"))
    record(root, rebalance(DAY + 86_400))
    write_table(root, events_to_table([rebalance(DAY + 2)]))
    before = facts(read_history(root))

    result = compact(root, progress=lambda _: None)

    filesystem, files = history_files(root)
    assert len(files) == 3  # shop on two days, billing on one
    assert all(path.endswith(".parquet") for path in files)
    assert facts(read_history(root)) == before
    assert result.partitions == 3
    assert result.files_read == 5
    assert result.rows_read == result.rows_written == 6
    shop_today = next(path for path in files if "2023-11-14/namespace=shop" in path)
    with filesystem.open(shop_today, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        metadata = parquet.schema_arrow.metadata
        times = parquet.read().column("detected_at").to_pylist()
    assert metadata[VERSION_KEY] == str(HISTORY_SCHEMA_VERSION).encode()
    assert len(json.loads(metadata[COMPACTED_FROM_KEY])) == 3
    assert times == sorted(times)


def test_a_compacted_history_is_left_alone_and_new_files_join_it(root: str) -> None:
    record(root, rebalance(DAY))
    record(root, rebalance(DAY + 1))
    assert not find_inputs(root).keys_unique
    compact(root, progress=lambda _: None)
    _, compacted = history_files(root)
    # One compacted file per partition: the job need not look for repeated keys again.
    assert find_inputs(root).keys_unique

    again = compact(root, progress=lambda _: None)
    assert again.partitions == 0
    assert history_files(root)[1] == compacted

    record(root, rebalance(DAY + 2))
    assert not find_inputs(root).keys_unique
    third = compact(root, progress=lambda _: None)
    assert third.partitions == 1
    assert third.files_read == 2
    _, files = history_files(root)
    assert len(files) == 1
    assert len(read_history(root)) == 3


def test_repeats_of_a_key_are_dropped_and_rows_without_a_key_all_kept(root: str) -> None:
    # An operator that restarted after a compaction writes a stop it had written before.
    record(root, pod_stop(DAY, "pod-stop/u1/0"), rebalance(DAY + 1))
    compact(root, progress=lambda _: None)
    record(root, pod_stop(DAY, "pod-stop/u1/0"), rebalance(DAY + 1), pod_stop(DAY + 3, "k2"))

    result = compact(root, progress=lambda _: None)

    assert result.rows_read == 5
    assert result.repeats_dropped == 1
    kinds = sorted(str(row["record_type"]) for row in read_history(root))
    # Two rebalances: rows without a key are distinct facts, however alike.
    assert kinds == ["pod-stop", "pod-stop", "rebalance", "rebalance"]


def test_files_it_cannot_use_stay_where_they_are(tmp_path: Path) -> None:
    root = tmp_path / "history"
    record(root, rebalance(DAY), rebalance(DAY + 1))
    partition = root / "date=2023-11-14" / "namespace=shop"
    row = json.loads(next(partition.glob("part-*.jsonl")).read_text().splitlines()[0])
    damaged = partition / "part-1-damaged.jsonl"
    damaged.write_text('{"schema_version": 3, "record_type": "rebal')
    newer = partition / "part-2-newer.jsonl"
    newer.write_text(json.dumps({**row, "schema_version": HISTORY_SCHEMA_VERSION + 1}) + "\n")
    foreign = partition / "other-tool.parquet"
    pq.write_table(pa.table({"name": ["orders"]}), foreign)
    hidden = partition / ".part-3.jsonl.tmp"
    hidden.write_text("half")

    result = compact(root, progress=lambda _: None)

    assert result.partitions == 1
    assert result.files_read == 1
    left = {Path(path).name: why for path, why in result.files_left}
    assert set(left) == {damaged.name, newer.name, foreign.name}
    assert f"version {HISTORY_SCHEMA_VERSION + 1}" in left[newer.name]
    assert "not a rebalancer history file" in left[foreign.name]
    for path in (damaged, newer, foreign, hidden):
        assert path.exists()


def test_an_input_a_compacted_file_replaces_is_read_once(tmp_path: Path) -> None:
    # The job stopped after the compacted file was renamed into place, before it deleted the
    # files it had read: one of them is still there.
    root = tmp_path / "history"
    record(root, rebalance(DAY))
    record(root, rebalance(DAY + 1))
    partition = root / "date=2023-11-14" / "namespace=shop"
    first = sorted(partition.glob("part-*.jsonl"))[0]
    kept = tmp_path / first.name
    shutil.copy2(first, kept)
    compact(root, progress=lambda _: None)
    shutil.copy2(kept, first)

    assert len(read_history(root)) == 2
    inputs = find_inputs(root)
    assert inputs.rows == 2
    assert not inputs.json_files

    result = compact(root, progress=lambda _: None)
    assert not first.exists()
    assert result.rows_written == 2
    assert len(read_history(root)) == 2


def test_drop_repeats_keeps_the_first_row_of_each_key() -> None:
    events = [
        pod_stop(DAY + 2, "a"),
        rebalance(DAY),
        replace(pod_stop(DAY + 9, "a"), departure="leave"),
        pod_stop(DAY + 1, "b"),
        rebalance(DAY),
    ]
    table = events_to_table(events)

    unique = drop_repeats(table)

    assert unique.column("record_key").to_pylist() == ["a", None, "b", None]
    assert unique.column("departure").to_pylist()[0] == "crash"


def test_the_operator_reads_its_keys_while_a_compaction_removes_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file listed by the operator is gone when it opens it: compacted in between.
    from rebalancer.clients import recording

    root = tmp_path / "history"
    record(root, pod_stop(DAY, "pod-stop/u1/0"))
    record(root, pod_stop(DAY + 1, "pod-stop/u2/0"))
    real = recording.read_json_rows
    calls: list[str] = []

    def vanishing(filesystem: object, path: str) -> list[dict[str, object]]:
        calls.append(path)
        if len(calls) == 1:
            raise FileNotFoundError(path)
        return real(filesystem, path)  # type: ignore[arg-type]

    monkeypatch.setattr(recording, "read_json_rows", vanishing)

    keys = asyncio.run(HistoryRecorder(root).recorded_keys("shop", ["2023-11-14"]))

    assert len(calls) == 2
    assert len(keys) == 1
