# mypy: disable-error-code="import-untyped"
"""The learning job: history in, recommendations out, on any Spark master.

Stages (each prints a progress line, and long Spark stages print task counts as they run):
1. compact each partition's small files into one Parquet file (learning.compaction), then find
   the history files and check their footers (learning.inputs);
2. read them (Spark's own Parquet and JSON readers for paths Spark can open, pyarrow through
   fsspec for the rest, such as memory:// in tests);
3. estimate per group (learning.estimation): start-up latency quantiles (pod start to
   JoinGroup), join spreads per batch size, the cost of a rebalance (its duration, fitted to the
   simulator's model), fleet size, rollout and departure rates, and downtime quantiles of
   members that come back;
4. score every candidate on the simulator, one group per pandas UDF call (mapInPandas), spread
   over the executors;
5. choose (learning.choosing) and write (learning.outputs) atomically.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from rebalancer.clients.recording import JSON_SUFFIX, PARQUET_SUFFIX, partition_of
from rebalancer.learning.choosing import GroupFacts, GroupScores, choose
from rebalancer.learning.compaction import compact
from rebalancer.learning.estimation import GROUP, KEY, estimate
from rebalancer.learning.history_table import (
    FILE_SCHEMA,
    TABLE_SCHEMA,
    conform,
    read_json_table,
)
from rebalancer.learning.inputs import HistoryInputs, find_inputs
from rebalancer.learning.locations import read_by_spark
from rebalancer.learning.outputs import LearnOutput, build_output, write_output
from rebalancer.learning.scoring import (
    DEFAULT_TASK_RESTORE_MS,
    P50_INDEX,
    P90_INDEX,
    STREAMS_HEARTBEAT_MS,
    STREAMS_PROTOCOL,
    DepartureProfile,
    GroupProfile,
    ScoreRow,
    score_group,
)

# Spark reads these itself; anything else (memory://, fsspec-only filesystems) goes via pyarrow.
SPARK_SCHEMES = ("file", "local", "hdfs", "s3a", "gs", "abfs", "abfss", "wasb", "wasbs", "viewfs")
# Fewer start-up latencies than this and the group's start-ups are not scored.
MIN_LATENCY_SAMPLES = 5
PROTOCOL_MS = 200.0  # the simulator's JoinGroup + SyncGroup round trips

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LearnOptions:
    history: str
    output: str
    master: str = "local[*]"
    driver_memory: str = "2g"
    conf: tuple[tuple[str, str], ...] = ()
    samples: int = 16
    seed: int = 0
    # Scoring tasks; None: four per core, or one per eight groups if that is more.
    scoring_partitions: int | None = None
    keep_runs: int = 5
    app_name: str = "rebalancer-learn"
    # Compact the history's small files before reading (learning.compaction); a history the
    # job may not write to is read as it is.
    compact: bool = True
    # A streams group's restoration of a moved task's store, ms; None: the history's, or
    # DEFAULT_TASK_RESTORE_MS (noted) since the history records none.
    task_restore_ms: float | None = None


@dataclass
class LearnResult:
    output: LearnOutput | None
    messages: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    events: int = 0
    groups: int = 0


def build_session(options: LearnOptions) -> SparkSession:
    """A session for `options.master`; workers run this interpreter (they need pandas)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if options.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(options.master)
        .appName(options.app_name)
        .config("spark.driver.memory", options.driver_memory)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        # The job prints its own progress lines; Spark's bar would interleave with them.
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in options.conf:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class StageProgress:
    """Prints the running Spark stages' task counts every `interval` seconds."""

    def __init__(self, spark: SparkSession, progress: Progress, interval: float = 10.0) -> None:
        self.spark = spark
        self.progress = progress
        self.interval = interval
        self.label = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StageProgress:
        self._thread = threading.Thread(target=self._run, name="learn-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(self.interval):
            parts = []
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id} {info.numCompletedTasks}/{info.numTasks} tasks")
            if parts:
                self.progress(f"      {self.label}: " + ", ".join(parts))


def spark_schema() -> st.StructType:
    """The history table as Spark sees it: the file columns plus the partition columns."""
    fields = [
        st.StructField(arrow_field.name, _spark_type(arrow_field.type), True)
        for arrow_field in FILE_SCHEMA
    ]
    fields += [
        st.StructField("date", st.StringType(), True),
        st.StructField("namespace", st.StringType(), True),
    ]
    return st.StructType(fields)


def _spark_type(kind: pa.DataType) -> st.DataType:
    mapping: dict[pa.DataType, st.DataType] = {
        pa.int32(): st.IntegerType(),
        pa.int64(): st.LongType(),
        pa.float64(): st.DoubleType(),
        pa.string(): st.StringType(),
        pa.bool_(): st.BooleanType(),
    }
    if pa.types.is_list(kind):
        return st.ArrayType(_spark_type(kind.value_type), True)
    return mapping[kind]


def read_history_frame(spark: SparkSession, inputs: HistoryInputs) -> DataFrame:
    schema = spark_schema()
    if inputs.listed_by_spark:
        # Spark lists the partitions itself (on a store, not the driver's business): the same
        # layout history_files globs, hidden temp files excluded by the file name filters.
        return _union(
            spark.read.schema(schema)
            .option("basePath", inputs.base)
            .option("pathGlobFilter", f"*{suffix}")
            .format(kind)
            .load(inputs.base)
            for kind, suffix in (("parquet", PARQUET_SUFFIX), ("json", JSON_SUFFIX))
        )
    if inputs.protocol in SPARK_SCHEMES:
        prefix = "file://" if inputs.protocol in ("file", "local") else f"{inputs.protocol}://"
        frames = []
        for kind, files in (("parquet", inputs.files), ("json", inputs.json_files)):
            if files:
                paths = [_with_scheme(prefix, path) for path in files]
                reader = spark.read.schema(schema).option(
                    "basePath", _with_scheme(prefix, inputs.base)
                )
                frames.append(reader.format(kind).load(paths))
        return _union(frames)
    # fsspec-only filesystems: read in the driver, hand Spark the Arrow table (small histories).
    import fsspec

    filesystem, _ = fsspec.core.url_to_fs(inputs.root)
    tables = []
    for path in [*inputs.files, *inputs.json_files]:
        if path.endswith(JSON_SUFFIX):
            table = read_json_table(filesystem, path)
        else:
            with filesystem.open(path, "rb") as handle:
                table = conform(pq.read_table(handle))
        place = partition_of(path)
        for column in ("date", "namespace"):
            table = table.append_column(
                column, pa.array([place.get(column)] * table.num_rows, pa.string())
            )
        tables.append(table)
    whole = pa.concat_tables(tables) if tables else TABLE_SCHEMA.empty_table()
    return spark.createDataFrame(whole.to_pandas(), schema=schema)


def configure_estimation(session: SparkSession, inputs: HistoryInputs) -> None:
    """The session settings estimation runs under, sized to the history `inputs` found."""
    cores = session.sparkContext.defaultParallelism
    # Unknown up front when Spark lists the files: Spark's default, which adaptive
    # execution coalesces.
    if not inputs.listed_by_spark:
        shuffle = max(2 * cores, min(400, inputs.rows // 250_000))
        session.conf.set("spark.sql.shuffle.partitions", str(shuffle))
        # Sized to the history already: adaptive execution would merge them into
        # fewer tasks than cores (its measure is bytes, and the bytes are few: the
        # work is percentile summaries and lists per group), leaving a core idle.
        session.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    # percentile_approx, max_by and collect_set keep a buffer per group; past 128
    # groups in a task Spark falls back to sorting every row by group instead (240
    # groups sorted 1e7 rows several times over). Groups number in the thousands at
    # most, and their buffers are small.
    session.conf.set("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "100000")
    # A file whose footer reads but whose pages are damaged is skipped, not fatal.
    session.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
    if inputs.protocol in ("file", "local") and not inputs.listed_by_spark:
        # Above 32 paths Spark lists files with a job of one task per path (10,000
        # tasks for a year of daily files); the driver stats local files faster
        # than the executors can be scheduled.
        session.conf.set(
            "spark.sql.sources.parallelPartitionDiscovery.threshold",
            str(len(inputs.files) + len(inputs.json_files) + 1),
        )


def shuffle_partitions(session: SparkSession) -> int:
    """The shuffle partitions configure_estimation chose (Spark's default if it did not)."""
    cores = session.sparkContext.defaultParallelism
    return int(session.conf.get("spark.sql.shuffle.partitions") or 2 * cores)


def _union(frames: Iterator[DataFrame] | list[DataFrame]) -> DataFrame:
    listed = list(frames)
    whole = listed[0]
    for frame in listed[1:]:
        whole = whole.unionByName(frame)
    return whole


def _with_scheme(prefix: str, path: str) -> str:
    return path if "://" in path else prefix + path


SCORE_SCHEMA = st.StructType(
    [
        *(st.StructField(column, st.StringType(), False) for column in KEY),
        st.StructField("kind", st.StringType(), False),
        st.StructField("delay_ms", st.DoubleType(), False),
        st.StructField("batch_size", st.IntegerType(), False),
        st.StructField("session_timeout_ms", st.DoubleType(), False),
        st.StructField("cost_s", st.DoubleType(), False),
        st.StructField("per_day_s", st.DoubleType(), False),
        st.StructField("unowned_s", st.DoubleType(), False),
        st.StructField("rebalances", st.DoubleType(), False),
        st.StructField("tasks_moved", st.DoubleType(), False),
    ]
)


def profile_from_row(
    row: dict[str, Any], task_restore_ms: float | None = None
) -> tuple[GroupProfile, GroupFacts]:
    """A group's simulator profile and its facts for the report, from one estimates row."""
    days = max(((row["last_at"] or 0.0) - (row["first_at"] or 0.0)) / 86400.0, 1.0)
    members = max(int(_number(row.get("members_p95"), 1)), 1)
    partitions = max(int(_number(row.get("partitions"), 12)), 1)
    notes: list[str] = []
    processing = _processing_ms(row, members, notes)
    quantiles, joins = _latency_quantiles(row, notes)
    departures, stops_total = _departures(row, days)
    rollouts = int(_number(row.get("rollouts"), 0)) + int(_number(row.get("bursts"), 0))
    rollouts_per_day = rollouts / days
    static = (
        bool(row.get("static_membership")) if not _missing(row.get("static_membership")) else False
    )
    protocol = _text(row.get("protocol"))
    heartbeat, restore = _protocol_settings(row, protocol, task_restore_ms, notes)
    profile = GroupProfile(
        cluster=row["cluster"],
        namespace=row["namespace"],
        name=row["name"],
        group_id=row["group_id"],
        members=members,
        partitions=partitions,
        latency_quantiles_ms=quantiles,
        processing_ms=min(processing, 600000.0),
        static=static,
        assignor=str(row.get("assignor") or "round-robin"),
        heartbeat_interval_ms=heartbeat,
        max_poll_interval_ms=_number(row.get("max_poll_interval_ms"), 300000.0),
        rollouts_per_day=rollouts_per_day,
        departures=tuple(departures),
        rolling_updates_per_day=rolling_updates_per_day(rollouts_per_day, departures, members),
        protocol=protocol,
        task_restore_ms=restore,
    )
    facts = GroupFacts(
        cluster=profile.cluster,
        namespace=profile.namespace,
        name=profile.name,
        group_id=profile.group_id,
        members=members,
        partitions=partitions,
        rollouts_per_day=profile.rollouts_per_day,
        rolling_updates_per_day=profile.rolling_updates_per_day,
        departures_per_day=sum(d.per_day for d in departures),
        processing_ms=profile.processing_ms,
        latency_p50_ms=quantiles[P50_INDEX] if quantiles else None,
        latency_p90_ms=quantiles[P90_INDEX] if quantiles else None,
        join_samples=joins,
        rebalance_samples=int(_number(row.get("rebalance_samples"), 0)),
        departure_samples=stops_total,
        current_delay_ms=_optional(row.get("current_delay_ms")),
        current_batch_size=_optional_int(row.get("current_batch_size")),
        current_session_ms=_optional(row.get("current_session_ms")),
        notes=tuple(notes),
        protocol=protocol,
    )
    return profile, facts


def _protocol_settings(
    row: dict[str, Any], protocol: str | None, task_restore_ms: float | None, notes: list[str]
) -> tuple[float, float]:
    """(the heartbeat interval, a moved task's restoration) the group's start-ups are scored
    with. A streams group's heartbeat is the broker's group.streams.heartbeat.interval.ms unless
    the history recorded one; the history records no restorations, so theirs is the job's
    option or the default, noted either way."""
    if protocol != STREAMS_PROTOCOL:
        return _number(row.get("heartbeat_interval_ms"), 3000.0), DEFAULT_TASK_RESTORE_MS
    heartbeat = _number(row.get("heartbeat_interval_ms"), STREAMS_HEARTBEAT_MS)
    if task_restore_ms is not None:
        notes.append(f"a moved task's hand-over: {task_restore_ms:.0f} ms (--task-restore-ms)")
        return heartbeat, task_restore_ms
    notes.append(
        f"a moved task's hand-over to processing again assumed {DEFAULT_TASK_RESTORE_MS:.0f} ms, "
        "as measured on the example application (the history records none; --task-restore-ms "
        "sets it)"
    )
    return heartbeat, DEFAULT_TASK_RESTORE_MS


def _processing_ms(row: dict[str, Any], members: int, notes: list[str]) -> float:
    """A member's processing time between polls, from the recorded rebalances of a Stable
    group; 500 ms, noted, without any."""
    rebalance_ms = row.get("rebalance_ms")
    if rebalance_ms is None or _missing(rebalance_ms):
        notes.append("no rebalance of a Stable group recorded: rebalance cost assumed (500 ms)")
        return 500.0
    # The model's rebalance of a Stable group lasts the round trips plus the slowest member's
    # wait for its next poll, processing x U^(1/m); its median is processing x 0.5^(1/m).
    rejoining = max(int(_number(row.get("rebalance_members"), members)), 1)
    processing: float = max(float(rebalance_ms) - PROTOCOL_MS, 0.0) / (0.5 ** (1.0 / rejoining))
    return processing


def _latency_quantiles(row: dict[str, Any], notes: list[str]) -> tuple[tuple[float, ...], int]:
    """(the start-up latency quantiles, the joins they come from): pod starts where enough were
    recorded, else the joins' offsets within their batch (noted), else none."""
    latency_q = row.get("latency_q")
    joins = int(_number(row.get("join_samples"), 0))
    offset_q = row.get("offset_q")
    offset_samples = int(_number(row.get("offset_samples"), 0))
    if latency_q is not None and joins >= MIN_LATENCY_SAMPLES:
        return tuple(float(value) for value in latency_q), joins
    if offset_q is not None and offset_samples >= MIN_LATENCY_SAMPLES:
        notes.append(
            "no pod-start records: start-up latencies are the joins' offsets within their "
            "batch (the fastest pod of each counts as 0 ms)"
        )
        return tuple(float(value) for value in offset_q), offset_samples
    return (), joins


def _departures(row: dict[str, Any], days: float) -> tuple[list[DepartureProfile], int]:
    """(each kind of departure per day with its downtime, the stops counted)."""
    departures: list[DepartureProfile] = []
    stops_total = 0
    entries = row.get("departures")
    for entry in [] if entries is None else list(entries):
        stops = int(entry["stops"])
        returned = int(entry["returned"] or 0)
        stops_total += stops
        downtime = entry["downtime_q"]
        downtime = [] if downtime is None else list(downtime)
        departures.append(
            DepartureProfile(
                kind=str(entry["kind"]),
                per_day=stops / days,
                downtime_quantiles_ms=tuple(float(v) for v in downtime) if returned else (),
                no_return_share=1.0 - returned / stops if stops else 0.0,
            )
        )
    return departures, stops_total


def rolling_updates_per_day(
    rollouts_per_day: float, departures: Sequence[DepartureProfile], members: int
) -> float:
    """Rollouts that replaced a running group: a rolling update stops every member once, so
    the members' leaves per member count them (no more than there were rollouts; the rest
    started the group from zero)."""
    leaves = sum(departure.per_day for departure in departures if departure.kind == "leave")
    return min(rollouts_per_day, leaves / max(members, 1))


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: object, default: float) -> float:
    return default if _missing(value) else float(value)  # type: ignore[arg-type]


def _optional(value: object) -> float | None:
    return None if _missing(value) else float(value)  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _optional_int(value: object) -> int | None:
    return None if _missing(value) else int(value)  # type: ignore[call-overload]


def profile_to_json(profile: GroupProfile) -> str:
    return json.dumps(dataclasses.asdict(profile))


def profile_from_json(text: str) -> GroupProfile:
    data = json.loads(text)
    data["latency_quantiles_ms"] = tuple(data["latency_quantiles_ms"])
    data["departures"] = tuple(
        DepartureProfile(
            kind=entry["kind"],
            per_day=entry["per_day"],
            downtime_quantiles_ms=tuple(entry["downtime_quantiles_ms"]),
            no_return_share=entry["no_return_share"],
        )
        for entry in data["departures"]
    )
    return GroupProfile(**data)


def score_partitions(
    batches: Iterator[pd.DataFrame], samples: int, seed: int
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: every candidate of every group in these batches, on the simulator."""
    for frame in batches:
        out: list[dict[str, Any]] = []
        for text in frame["profile"]:
            profile = profile_from_json(str(text))
            # Without start-up latencies only the session timeout can be scored.
            delays = None if profile.latency_quantiles_ms else ()
            if delays is None:
                profile_rows = score_group(profile, samples=samples, seed=seed)
            else:
                profile_rows = score_group(profile, delays_ms=delays, samples=samples, seed=seed)
            for scored in profile_rows:
                out.append(
                    {
                        "cluster": profile.cluster,
                        "namespace": profile.namespace,
                        "name": profile.name,
                        "group_id": profile.group_id,
                        "kind": scored.kind,
                        "delay_ms": scored.delay_ms,
                        "batch_size": scored.batch_size,
                        "session_timeout_ms": scored.session_timeout_ms,
                        "cost_s": scored.cost_s,
                        "per_day_s": scored.per_day_s,
                        "unowned_s": scored.unowned_s,
                        "rebalances": scored.rebalances,
                        "tasks_moved": scored.tasks_moved,
                    }
                )
        yield pd.DataFrame(out, columns=SCORE_SCHEMA.fieldNames())


def learn(
    options: LearnOptions,
    spark: SparkSession | None = None,
    progress: Progress = print,
) -> LearnResult:
    """Run the whole job; the previous recommendations stay in place unless it succeeds."""
    result = LearnResult(output=None)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    watch = _Stopwatch(result, progress)
    watch.step(1, f"compacting and checking history files under {options.history}")
    if options.compact and not read_by_spark(options.history):
        _compact(options, result, progress)
        watch.lap("compact")
    inputs = _find_inputs(options, result, progress)
    watch.lap("inputs")
    clusters: list[Any] = []
    choices: list[Any] = []
    spread_rows: list[dict[str, Any]] = []
    if inputs.readable:
        inputs, facts, scores, spread_rows = _estimate_and_score(options, spark, inputs, watch)
        watch.step(4, "choosing a delay per cluster, a batch size and session timeout per group")
        clusters, choices = choose(_group_scores(facts, scores))
        for cluster in clusters:
            for note in cluster.notes:
                result.messages.append(f"cluster {cluster.cluster}: {note}")
        if result.groups == 1:
            result.messages.append(
                "the history holds one group only: recommendations cover it alone"
            )
        watch.lap("choose")
    else:
        watch.step(2, "no readable history: writing an empty recommendation set")
    watch.step(5, f"writing recommendations to {options.output}")
    output = build_output(
        run_id=run_id,
        options_history=options.history,
        inputs=inputs,
        clusters=clusters,
        choices=choices,
        spreads=spread_rows,
        messages=result.messages,
    )
    result.output = write_output(options.output, output, keep_runs=options.keep_runs)
    watch.lap("write")
    progress(f"      run {run_id}: {len(choices)} groups, {len(clusters)} clusters")
    return result


@dataclass
class _Stopwatch:
    """The job's numbered steps, told through `progress`, and each stage's time in the result."""

    result: LearnResult
    progress: Progress
    clock: float = field(default_factory=time.perf_counter)

    def step(self, number: int, text: str) -> None:
        self.progress(f"learn [{number}/5] {text}")

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.result.timings_s[name] = now - self.clock
        self.clock = now


def _estimate_and_score(
    options: LearnOptions,
    spark: SparkSession | None,
    inputs: HistoryInputs,
    watch: _Stopwatch,
) -> tuple[HistoryInputs, list[GroupFacts], pd.DataFrame, list[dict[str, Any]]]:
    """Steps 2 and 3 on Spark (the given session, or one of the job's own, stopped after):
    (the inputs as Spark counted them, each group's facts, the candidates' scores, the join
    spreads per batch size)."""
    result, progress = watch.result, watch.progress
    owned = spark is None
    session = spark if spark is not None else build_session(options)
    try:
        with StageProgress(session, progress) as tracker:
            watch.step(
                2,
                f"reading and estimating on {options.master if owned else 'the given session'}",
            )
            tracker.label = "estimating"
            configure_estimation(session, inputs)
            history = read_history_frame(session, inputs)
            if inputs.listed_by_spark:
                # Spark's own listing, for the summary's file count.
                inputs = dataclasses.replace(inputs, files=tuple(history.inputFiles()))
            estimates = estimate(
                history, shuffle_partitions(session), keys_unique=inputs.keys_unique
            )
            profiles_frame: Any = estimates.profiles.toPandas()
            spread_rows = keyed_spreads(profiles_frame, estimates.spreads.toPandas())
            estimates.events.unpersist()
            estimated = [
                profile_from_row(row, options.task_restore_ms)
                for row in profiles_frame.to_dict("records")
            ]
            if inputs.listed_by_spark:
                records = int(profiles_frame["records"].sum()) if len(profiles_frame) else 0
                inputs = dataclasses.replace(inputs, rows=records)
            result.events = inputs.rows
            result.groups = len(profiles_frame)
            watch.lap("estimate")
            progress(f"      {len(profiles_frame)} groups, {len(spread_rows)} batch sizes")
            watch.step(3, f"scoring candidates for {len(profiles_frame)} groups on the simulator")
            tracker.label = "scoring"
            scores = _score(session, [profile for profile, _ in estimated], options)
            watch.lap("score")
        facts = [fact for _, fact in estimated]
    finally:
        if owned:
            session.stop()
    return inputs, facts, scores, spread_rows


def _compact(options: LearnOptions, result: LearnResult, progress: Progress) -> None:
    """Step 1's compaction of the history, told as it goes; a failure is a message, not an end."""
    try:
        compacted = compact(options.history, progress)
    except OSError as error:  # a read-only history: read what is there as it is
        result.messages.append(f"history not compacted ({error}): read as it is")
        progress(f"      {result.messages[-1]}")
    else:
        progress(
            f"      compacted {compacted.partitions:,} partitions: "
            f"{compacted.files_read:,} files into {compacted.partitions:,}, "
            f"{compacted.repeats_dropped:,} repeated records dropped "
            f"({compacted.seconds:.1f} s)"
        )


def _find_inputs(options: LearnOptions, result: LearnResult, progress: Progress) -> HistoryInputs:
    """Step 1's listing of the history files, told with what was skipped and why."""
    inputs = find_inputs(options.history)
    result.messages.extend(inputs.messages)
    for message in inputs.messages:
        progress(f"      {message}")
    if inputs.listed_by_spark:
        progress(f"      {inputs.root} is listed and read by Spark (no footer checks here)")
    else:
        progress(
            f"      {len(inputs.files) + len(inputs.json_files)} files, {inputs.rows:,} records, "
            f"{inputs.size_bytes / 1e6:.1f} MB; {len(inputs.skipped)} skipped"
        )
    return inputs


def keyed_spreads(profiles: pd.DataFrame, spreads: pd.DataFrame) -> list[dict[str, Any]]:
    """The spreads with their groups' KEY, in KEY order; refuses a history where two groups'
    KEYs hashed alike (estimation groups by the hash)."""
    collided = profiles[profiles["key_collision"].astype(bool)] if len(profiles) else profiles
    if len(collided):
        names = ", ".join(
            "/".join(str(row[column]) for column in KEY) for _, row in collided.iterrows()
        )
        raise RuntimeError(
            f"two consumer groups hash to the same key ({names}): rename one of them, or learn "
            "from a history that holds one of them only"
        )
    keys = profiles[[GROUP, *KEY]]
    joined = spreads.merge(keys, on=GROUP, how="inner").drop(columns=[GROUP])
    joined = joined.sort_values([*KEY, "batch_members"], kind="stable")
    records: list[dict[str, Any]] = joined.to_dict("records")
    return records


def _score(
    spark: SparkSession, profiles: Sequence[GroupProfile], options: LearnOptions
) -> pd.DataFrame:
    """Score on the executors: the profiles are small, the simulations are the work."""
    if not profiles:
        return pd.DataFrame(columns=SCORE_SCHEMA.fieldNames())
    parallelism = spark.sparkContext.defaultParallelism
    # Groups differ a lot in cost (members, batches): many small tasks keep every core busy
    # to the end instead of waiting on the one that drew the big groups.
    partitions = options.scoring_partitions or max(4 * parallelism, len(profiles) // 8)
    partitions = max(1, min(partitions, len(profiles)))
    samples, seed = options.samples, options.seed

    def body(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        return score_partitions(batches, samples, seed)

    frame = spark.createDataFrame(
        [(profile_to_json(profile),) for profile in profiles], schema="profile string"
    )
    scored = frame.repartition(partitions).mapInPandas(body, SCORE_SCHEMA)
    return scored.toPandas()


def _group_scores(facts: Sequence[GroupFacts], scores: pd.DataFrame) -> list[GroupScores]:
    rows_by_key: dict[tuple[str, str, str, str], list[ScoreRow]] = {}
    for record in scores.to_dict("records"):
        key = (record["cluster"], record["namespace"], record["name"], record["group_id"])
        rows_by_key.setdefault(key, []).append(
            ScoreRow(
                kind=str(record["kind"]),
                delay_ms=float(record["delay_ms"]),
                batch_size=int(record["batch_size"]),
                session_timeout_ms=float(record["session_timeout_ms"]),
                cost_s=float(record["cost_s"]),
                per_day_s=float(record["per_day_s"]),
                unowned_s=float(record["unowned_s"]),
                rebalances=float(record["rebalances"]),
                tasks_moved=float(record["tasks_moved"]),
            )
        )
    return [GroupScores(fact, tuple(rows_by_key.get(fact.key, ()))) for fact in facts]
