"""The learning job on real Spark (local[2]): good histories, bad ones, and the atomic swap."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from rebalancer.clients.recording import HistoryRecorder
from rebalancer.learning import outputs
from rebalancer.learning.fleets import Fleet, fleet_history, true_profile, write_history
from rebalancer.learning.history_table import FILE_SCHEMA, VERSION_KEY, read_history, write_table
from rebalancer.learning.inputs import HistoryInputs, find_inputs
from rebalancer.learning.jobs import LearnOptions, LearnResult, learn, read_history_frame
from rebalancer.learning.scoring import (
    DEFAULT_DELAY_MS,
    DELAY_CANDIDATES_MS,
    departures_cost_per_day_s,
    startup_cost_s,
)
from rebalancer.planning.history_pods import PodRecordContext, PodTracking, track_pods
from rebalancer.planning.history_records import (
    JoinContext,
    JoinTracking,
    RecordedJoin,
    track_joins,
)
from rebalancer.planning.rollout_states import RolloutState
from rebalancer.planning.streams_observing import StreamsMemberWatch, streams_joins
from rebalancer.structs.gates import GateState
from rebalancer.structs.history import HISTORY_SCHEMA_VERSION, SettingsInForce
from rebalancer.structs.history_pods import PodLifecycle
from rebalancer.structs.recommendations import SUMMARY_SCHEMA
from rebalancer.structs.reports import MemberJoin
from rebalancer.structs.streams_groups import StreamsAssignment, StreamsGroupView, StreamsMember
from rebalancer.structs.workloads import PodView

HELD_OUT_SEED = 99
DAY0 = 1_800_000_000.0
NEWER = HISTORY_SCHEMA_VERSION + 1


def fleet(index: int, cluster: str, latency_ms: float, processing_ms: float) -> Fleet:
    return Fleet(
        cluster=cluster,
        namespace="shop",
        name=f"orders-{index}",
        members=4 + index % 3,
        partitions=12,
        latency_median_ms=latency_ms,
        latency_sigma=0.4,
        processing_ms=processing_ms,
        static=index % 2 == 0,
        rollouts_per_day=3.0,
        crash_per_day=1.0,
        leave_per_day=1.0,
        downtime_median_ms=15000.0,
    )


# Two clusters where 3000 ms is not the best delay: pods that join within a few hundred ms with
# cheap rebalances, and slow, spread-out pods with costly rebalances.
FLEETS = [fleet(i, "fast:9092", 150.0, 300.0) for i in range(3)] + [
    fleet(i + 3, "slow:9092", 6000.0, 30000.0) for i in range(3)
]


def run(spark: SparkSession, history: str, output: Path) -> LearnResult:
    lines: list[str] = []
    result = learn(
        LearnOptions(history=history, output=str(output), samples=16),
        spark=spark,
        progress=lines.append,
    )
    assert any(line.startswith("learn [5/5]") for line in lines), lines
    return result


def summary_of(output: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((output / "recommendations.json").read_text())
    assert loaded["schema"] == SUMMARY_SCHEMA
    return loaded


def true_cost(members: list[Fleet], delay: float, choose: dict[str, dict[str, object]]) -> float:
    """Held-out start-up cost per day of a cluster's fleets at `delay` with chosen batches."""
    total = 0.0
    for item in members:
        profile = true_profile(item)
        entry = choose.get(f"{item.namespace}/{item.name}", {})
        batch = int(entry.get("batchSize") or item.members)  # type: ignore[call-overload]
        total += profile.rollouts_per_day * startup_cost_s(
            profile, delay, batch, samples=16, seed=HELD_OUT_SEED
        )
    return total


def test_learned_settings_beat_the_default_where_it_is_not_optimal(
    spark: SparkSession, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    written = write_history(str(history), FLEETS, days=40, seed=3)
    assert written > 1000

    result = run(spark, str(history), tmp_path / "out")

    assert result.groups == len(FLEETS)
    summary = summary_of(tmp_path / "out")
    groups: dict[str, dict[str, object]] = summary["groups"]  # type: ignore[assignment]
    clusters: dict[str, dict[str, object]] = summary["clusters"]  # type: ignore[assignment]
    assert set(clusters) == {"fast:9092", "slow:9092"}
    for cluster in clusters:
        members = [item for item in FLEETS if item.cluster == cluster]
        chosen = float(clusters[cluster]["initialRebalanceDelayMs"])  # type: ignore[arg-type]
        everyone = {f"{m.namespace}/{m.name}": {"batchSize": m.members} for m in members}
        curve = {d: true_cost(members, d, everyone) for d in DELAY_CANDIDATES_MS}
        best = min(curve.values())
        default = curve[DEFAULT_DELAY_MS]
        learned = true_cost(members, chosen, groups)
        assert default > best * 1.05, f"{cluster}: the default should not be optimal here"
        assert learned < default, (cluster, chosen, learned, default)
    assert float(clusters["fast:9092"]["initialRebalanceDelayMs"]) < DEFAULT_DELAY_MS  # type: ignore[arg-type]
    # The session timeout is chosen from departures, and never worse than the default's.
    for item in FLEETS:
        entry = groups[f"{item.namespace}/{item.name}"]
        session = float(entry["sessionTimeoutMs"])  # type: ignore[arg-type]
        profile = true_profile(item)
        learned = departures_cost_per_day_s(profile, session, HELD_OUT_SEED)
        default = departures_cost_per_day_s(profile, 45000.0, HELD_OUT_SEED)
        assert learned <= default * 1.05, (item.name, session, learned, default)
    run_dir = tmp_path / "out" / str(summary["report"]).rsplit("/", 1)[0]
    assert (run_dir / "report.png").read_bytes().startswith(b"\x89PNG")
    assert "Initial delay per cluster" in (run_dir / "report.md").read_text()
    table = pq.read_table(run_dir / "recommendations.parquet")
    assert table.num_rows == len(FLEETS)
    assert pq.read_table(run_dir / "spreads.parquet").num_rows >= len(FLEETS)


def test_bad_files_are_skipped_with_reasons_and_one_group_still_gets_a_choice(
    spark: SparkSession, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    write_table(str(history), fleet_history(FLEETS[3], days=10, seed=1))
    partition = sorted(history.glob("date=*/namespace=*"))[0]
    (partition / "part-0-corrupt.parquet").write_bytes(b"PAR1 this is not parquet at all")
    pq.write_table(pa.table({"x": [1, 2, 3]}), partition / "part-0-foreign.parquet")
    newer = pa.table(
        {name: pa.nulls(1, FILE_SCHEMA.field(name).type) for name in FILE_SCHEMA.names},
        schema=FILE_SCHEMA.with_metadata({VERSION_KEY: str(NEWER).encode()}),
    )
    pq.write_table(newer, partition / "part-0-newer.parquet")

    result = run(spark, str(history), tmp_path / "out")

    text = "\n".join(result.messages)
    assert "part-0-corrupt.parquet: not readable Parquet" in text
    assert "part-0-foreign.parquet: not a rebalancer history file" in text
    assert (
        f"part-0-newer.parquet: written by a newer rebalancer (history schema version {NEWER}"
        in text
    )
    assert "one group only" in text
    summary = summary_of(tmp_path / "out")
    assert len(summary["skippedFiles"]) == 3  # type: ignore[arg-type]
    groups: dict[str, dict[str, object]] = summary["groups"]  # type: ignore[assignment]
    assert list(groups) == ["shop/orders-3"]
    assert groups["shop/orders-3"]["initialRebalanceDelayMs"] is not None


def test_a_history_in_memory_is_read_through_fsspec(spark: SparkSession, tmp_path: Path) -> None:
    root = "memory://learning-test-history"
    write_table(root, fleet_history(FLEETS[0], days=5, seed=2))
    assert read_history(root)

    result = run(spark, root, tmp_path / "out")

    assert result.groups == 1
    assert "shop/orders-0" in summary_of(tmp_path / "out")["groups"]  # type: ignore[operator]


def test_a_history_spark_lists_itself_reads_as_the_checked_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    # What an s3a:// or hdfs:// history gets: no footer read in Python, Spark's own listing of
    # the partitions (here on local files, the same code path), temp files left out.
    root = tmp_path / "history"
    write_history(str(root), FLEETS[:2], days=3, seed=4)
    hidden = root / "date=2027-01-01" / "namespace=shop" / ".part-x.parquet.tmp"
    hidden.parent.mkdir(parents=True)
    hidden.write_bytes(b"half a file")
    checked = find_inputs(str(root))
    listed = HistoryInputs(str(root), str(root), "file", (), 0, 0, listed_by_spark=True)

    def rows(inputs: HistoryInputs) -> list[tuple[object, ...]]:
        frame = read_history_frame(spark, inputs)
        picked = frame.select("namespace", "date", "member", "detected_at", "record_type")
        return sorted((tuple(row) for row in picked.collect()), key=repr)

    assert len(rows(listed)) == checked.rows > 100
    assert rows(listed) == rows(checked)


def test_a_history_as_the_operator_writes_it_learns_as_its_compaction_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The same rows as JSON lines (the operator's files) and as Parquet (a compaction's): the
    # job reads the JSON as it is when told not to compact, and compacts it by default; all
    # three runs recommend the same, and the compacted history holds every record once.
    chosen = FLEETS[:2]
    as_parquet, as_json = tmp_path / "parquet", tmp_path / "json"
    write_history(str(as_parquet), chosen, days=5, seed=8)
    write_history(str(as_json), chosen, days=5, seed=8, as_written=True)
    before = read_history(as_json)
    assert {Path(p).suffix for p in map(str, as_json.rglob("part-*"))} == {".jsonl"}
    # A file cut short on disk: its one line is damaged, and read as nothing.
    partition = next(as_json.glob("date=*/namespace=*"))
    damaged = partition / "part-0-damaged.jsonl"
    damaged.write_text('{"schema_version": 3, "record_type": "member-join", "group_id": "g')

    def recommended(history: Path, output: Path, *, compact: bool) -> dict[str, object]:
        learn(
            LearnOptions(history=str(history), output=str(output), samples=16, compact=compact),
            spark=spark,
            progress=lambda _: None,
        )
        groups: dict[str, object] = summary_of(output)["groups"]  # type: ignore[assignment]
        return groups

    read_as_is = recommended(as_json, tmp_path / "as-is", compact=False)
    assert {Path(p).suffix for p in map(str, as_json.rglob("part-*"))} == {".jsonl"}
    compacted = recommended(as_json, tmp_path / "compacted", compact=True)
    reference = recommended(as_parquet, tmp_path / "reference", compact=False)

    assert read_as_is == compacted == reference
    assert len(compacted) == len(chosen)
    assert damaged.exists()  # left for the reader, which skips its line
    damaged.unlink()
    files = [path for path in as_json.rglob("*") if path.is_file()]
    assert files and all(path.suffix == ".parquet" for path in files)
    partitions = {path.parent for path in files}
    assert len(files) == len(partitions)  # one file per day and namespace
    assert sorted(map(repr, read_history(as_json))) == sorted(map(repr, before))


def test_an_empty_history_gives_an_empty_valid_set(spark: SparkSession, tmp_path: Path) -> None:
    result = run(spark, str(tmp_path / "nothing-here"), tmp_path / "out")

    assert any("nothing to learn from" in message for message in result.messages)
    summary = summary_of(tmp_path / "out")
    assert summary["groups"] == {}
    assert summary["clusters"] == {}


def test_a_failed_run_keeps_the_previous_recommendations(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "out"
    run(spark, str(tmp_path / "empty"), output)
    before = (output / "recommendations.json").read_text()
    runs_before = sorted(p.name for p in (output / "runs").iterdir())

    def broken_write(*_: object, **__: object) -> bytes:
        raise OSError("disk full")

    # Fail half-way through writing the run: after the first files are staged.
    monkeypatch.setattr(outputs, "_parquet_bytes", broken_write)
    with pytest.raises(OSError, match="disk full"):
        run(spark, str(tmp_path / "empty"), output)

    assert (output / "recommendations.json").read_text() == before
    assert sorted(p.name for p in (output / "runs").iterdir()) == runs_before
    previous = json.loads(before)["report"]
    assert (output / previous).exists()


def operator_history(root: str, starts: int, members: int, seed: int) -> int:
    """What the operator itself records for `starts` cold starts of one group: joins only (no
    pod starts), grouped into start-up bursts by the same planner the observer runs."""
    rng = random.Random(seed)
    context = JoinContext("shop", "payments", "payments", "k:9092")
    tracking = JoinTracking()
    events = []
    sequence = 0
    for start in range(starts):
        released = DAY0 + start * 6 * 3600.0
        times = sorted(
            (released + rng.lognormvariate(math.log(2.0), 0.6), pod) for pod in range(members)
        )
        joins = []
        for at, pod in times:
            sequence += 1
            joins.append(MemberJoin(sequence, f"payments-{pod}", f"m{sequence}", start, at, at))
        recorded, tracking = track_joins(
            tracking,
            joins,
            context=context,
            rollout=RolloutState(),
            members=members,
            state="Stable",
            partitions=8,
            settings=SettingsInForce(session_timeout_ms=10000.0, assignor="cooperative-sticky"),
        )
        events += recorded
    asyncio.run(HistoryRecorder(root).record(events))
    return len(events)


def test_joins_the_operator_records_give_spreads_and_a_delay(
    spark: SparkSession, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    assert operator_history(str(history), starts=8, members=4, seed=5) == 32

    run(spark, str(history), tmp_path / "out")

    summary = summary_of(tmp_path / "out")
    entry = summary["groups"]["shop/payments"]  # type: ignore[index]
    assert entry["initialRebalanceDelayMs"] is not None, entry
    assert entry["evidence"]["joins"] == 32, entry  # type: ignore[index]
    assert any("no pod-start records" in note for note in entry["notes"]), entry
    run_dir = tmp_path / "out" / str(summary["report"]).rsplit("/", 1)[0]
    spreads = pq.read_table(run_dir / "spreads.parquet").to_pylist()
    assert [(row["batch_members"], row["batches"]) for row in spreads] == [(4, 8)]
    # Latencies of median 2 s with sigma 0.6 spread four pods over seconds, not milliseconds.
    assert 500.0 < spreads[0]["spread_p50_ms"] < 10000.0


def test_container_starts_from_kubernetes_pair_with_joins_and_count_once_per_key(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Starts outside the stagger, as the operator records them from the pods' status, give
    start-up latencies; the same starts written again (an operator restarted without knowing
    it had written them) count once."""
    history = tmp_path / "history"
    assert operator_history(str(history), starts=8, members=4, seed=5) == 32
    joins = [
        r for r in read_history(str(history)) if r["record_type"] == "member-join"
    ]  # fmt: skip
    recent = tuple(
        RecordedJoin(
            str(r["member"]), int(str(r["generation"])), float(str(r["detected_at"])),
            float(str(r["detected_at"])), str(r["batch_id"]),
        )
        for r in joins
    )  # fmt: skip
    context = PodRecordContext(
        JoinContext("shop", "payments", "payments", "k:9092"), 4, "Stable", 8, SettingsInForce()
    )
    pods = [
        PodView(
            name=str(r["member"]), uid=f"uid-{i}", ordinal=None, updated=True,
            gate=GateState.NONE, gate_batch=None, held_at=None, ready=True, terminating=False,
            created_at=0.0,
            lifecycle=PodLifecycle(container="c", started_at=float(str(r["detected_at"])) - 1.5),
        )
        for i, r in enumerate(joins)
    ]  # fmt: skip
    starts, tracking = track_pods(PodTracking(), pods, now=DAY0, context=context, joins=recent)
    assert len(starts) == 32 and all(s.batch_id for s in starts)
    # Every pod deleted a day later: 32 stops.
    last = max(float(str(r["detected_at"])) for r in joins)
    stops, _ = track_pods(tracking, [], now=last + 86400.0, context=context, joins=recent)
    assert len(stops) == 32
    for _ in range(2):
        asyncio.run(HistoryRecorder(str(history)).record([*starts, *stops]))

    run(spark, str(history), tmp_path / "out")

    entry = summary_of(tmp_path / "out")["groups"]["shop/payments"]  # type: ignore[index]
    assert entry["evidence"]["joins"] == 32, entry  # type: ignore[index]
    assert entry["evidence"]["departures"] == 32, entry  # type: ignore[index]
    assert entry["evidence"]["latencyP50Ms"] == pytest.approx(1500.0, abs=1.0), entry  # type: ignore[index]
    assert not any("no pod-start records" in note for note in entry["notes"]), entry


def streams_history(root: str, starts: int, members: int, seed: int) -> int:
    """What the operator records for `starts` cold starts of a streams group: its members as
    the describe shows them appearing, look by look, with the group's own delay in force."""
    rng = random.Random(seed)
    context = JoinContext("shop", "counts", "counts", "k:9092")
    settings = SettingsInForce(
        initial_rebalance_delay_ms=10000.0, static_membership=True, group_protocol="streams"
    )
    tracking, watch = JoinTracking(), StreamsMemberWatch(looked=True)
    events = []
    for start in range(starts):
        released = DAY0 + start * 6 * 3600.0 + 60.0
        arrivals = sorted(released + rng.lognormvariate(math.log(2.0), 0.6) for _ in range(members))
        present: list[StreamsMember] = []
        for index, at in enumerate(arrivals):
            present.append(streams_member(f"counts-{index}", f"{start}-{index}"))
            view = StreamsGroupView("counts", "Assigning", start + 1, start, None, tuple(present))
            joins, watch = streams_joins(watch, view, at, tracking.sequence)
            recorded, tracking = track_joins(
                tracking, joins, context=context, rollout=RolloutState(), members=len(present),
                state="Assigning", partitions=8, settings=settings,
            )  # fmt: skip
            events += recorded
    asyncio.run(HistoryRecorder(root).record(events))
    return len(events)


def streams_member(name: str, incarnation: str) -> StreamsMember:
    return StreamsMember(
        member_id=f"{name}-{incarnation}", member_epoch=1, instance_id=name,
        process_id=incarnation, client_id=name, client_host="/10.0.0.1",
        assignment=StreamsAssignment(), target=StreamsAssignment(),
    )  # fmt: skip


def test_a_streams_groups_delay_is_learned_as_its_own(spark: SparkSession, tmp_path: Path) -> None:
    """A classic and a streams group of one cluster: the cluster's delay is the classic
    group's, the streams group's is its own, and the summary says whose each is."""
    history = tmp_path / "history"
    assert operator_history(str(history), starts=8, members=4, seed=5) == 32
    assert streams_history(str(history), starts=8, members=4, seed=6) == 32

    run(spark, str(history), tmp_path / "out")

    summary = summary_of(tmp_path / "out")
    cluster = summary["clusters"]["k:9092"]  # type: ignore[index]
    assert (cluster["groups"], cluster["ownDelayGroups"]) == (1, 1), cluster
    classic = summary["groups"]["shop/payments"]  # type: ignore[index]
    streams = summary["groups"]["shop/counts"]  # type: ignore[index]
    assert classic["delayScope"] == "cluster"
    assert classic["initialRebalanceDelayMs"] == cluster["initialRebalanceDelayMs"]
    assert (streams["delayScope"], streams["protocol"]) == ("group", "streams"), streams
    assert streams["initialRebalanceDelayMs"] is not None, streams
    assert streams["current"]["initialRebalanceDelayMs"] == 10000.0
    assert streams["evidence"]["joins"] == 32, streams
    assert streams["notes"][0].startswith("a streams group: the delay is its own"), streams
