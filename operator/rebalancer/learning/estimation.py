# mypy: disable-error-code="import-untyped"
"""Estimation: what the history says about each group, as Spark aggregations.

One function per statistic, each a DataFrame over the cached history events (`history_events`):
start-up latencies (pod start to JoinGroup), join offsets and spreads per batch, the cost of a
rebalance, the group's size and current settings, and how members leave and come back.
`estimate` joins them into one row per group; the job turns each row into a simulator profile.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from rebalancer.learning.scoring import DOWNTIME_POINTS, QUANTILE_SHARES
from rebalancer.structs.history import HISTORY_SCHEMA_VERSION

KEY = ["cluster", "namespace", "name", "group_id"]
# Every aggregation groups by a 64-bit hash of KEY rather than its four strings, and by hashes of
# a batch's and a member's ids: hashing and shuffling a long costs a fraction of four strings'
# (the pod/batch pairing shuffles 4 million rows at 1e7 records). group_overall checks that no
# two groups share a hash, and it alone carries the strings.
GROUP = "group"
# A member that is not back within this long was scaled away or lost, not restarted.
RETURN_WINDOW_S = 1800.0
# The history's columns any estimate reads (record_key only to drop repeated facts).
WANTED = [
    *KEY,
    "record_type",
    "detected_at",
    "member",
    "departure",
    "batch_id",
    "rollout_id",
    "generation",
    "previous_generation",
    "started_at",
    "members",
    "partitions",
    "time_to_stable_ms",
    "stop_the_world_partition_s",
    "initial_rebalance_delay_ms",
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "max_poll_interval_ms",
    "assignor",
    "static_membership",
    "batch_size",
    "source",
    "record_key",
    "group_protocol",
]


# The settings a group last recorded (group_overall), as (history column, estimate column).
SETTINGS = (
    ("initial_rebalance_delay_ms", "current_delay_ms"),
    ("session_timeout_ms", "current_session_ms"),
    ("heartbeat_interval_ms", "heartbeat_interval_ms"),
    ("max_poll_interval_ms", "max_poll_interval_ms"),
    ("assignor", "assignor"),
    ("static_membership", "static_membership"),
    ("batch_size", "current_batch_size"),
    # Whose delay the group waits: the broker's, or a streams group's own.
    ("group_protocol", "protocol"),
)


@dataclass(frozen=True)
class Estimates:
    profiles: DataFrame  # KEY and GROUP among the columns
    spreads: DataFrame  # GROUP, not KEY: profiles has the KEY of each GROUP
    events: DataFrame  # persisted: unpersist when done


def estimate(
    history: DataFrame, partitions: int | None = None, *, keys_unique: bool = False
) -> Estimates:
    """Per-group statistics the scoring needs (one row per group) and join spreads per batch."""
    events = history_events(history, partitions, keys_unique=keys_unique)
    per_batch = batch_joins(events)
    profiles = (
        group_overall(events)
        .join(startup_latencies(events), on=GROUP, how="left")
        .join(join_offsets(per_batch), on=GROUP, how="left")
        .join(bursts(per_batch), on=GROUP, how="left")
        .join(rebalance_costs(events), on=GROUP, how="left")
        .join(departures(events), on=GROUP, how="left")
    )
    return Estimates(profiles=profiles, spreads=join_spreads(per_batch), events=events)


def history_events(
    history: DataFrame, partitions: int | None = None, *, keys_unique: bool = False
) -> DataFrame:
    """The rows every estimate reads, persisted and counted (the caller unpersists them)."""
    events = history.filter(sf.col("schema_version") <= HISTORY_SCHEMA_VERSION).select(*WANTED)
    events = events.filter(sf.col("group_id").isNotNull() & sf.col("cluster").isNotNull())
    # A fact written twice (an operator that restarted before it knew it had written it) has
    # one key: keep one row of it. Rows without a key (older files, rebalances) are each one.
    # A compacted history has none left, and this pass would read every file once more.
    if not keys_unique:
        keyed = events.filter(sf.col("record_key").isNotNull()).dropDuplicates(["record_key"])
        events = events.filter(sf.col("record_key").isNull()).unionByName(keyed)
    events = events.drop("record_key")  # nothing below reads it: not cached
    for column in ("namespace", "name"):
        events = events.withColumn(column, sf.coalesce(sf.col(column), sf.lit("")))
    events = events.withColumn(GROUP, sf.xxhash64(*KEY))
    for column, hashed in (("batch_id", "batch"), ("member", "pod"), ("rollout_id", "rollout")):
        # xxhash64 of a null is its seed: a null id stays null.
        present = sf.col(column).isNotNull()
        events = events.withColumn(hashed, sf.when(present, sf.xxhash64(column))).drop(column)
    # Five aggregations read the same rows: read the files once, and before they start (adaptive
    # execution runs their first stages side by side, each waiting on the same cache blocks).
    if partitions is not None:
        # One cached partition per file split would make every aggregation below a stage of
        # that many tasks (781 at 1e7 records, seven times over): a few per core do the same.
        events = events.coalesce(partitions)
    events = events.persist(StorageLevel.MEMORY_AND_DISK)
    events.count()
    return events


def startup_latencies(events: DataFrame) -> DataFrame:
    """Per group: quantiles of pod start to JoinGroup (latency_q) and how many (join_samples)."""
    pod_in_batch = [GROUP, "batch", "pod"]
    # A pod the stagger released has two starts in its batch: its release (source
    # "operator"), which its latency counts from, and its container's start (source
    # "kubernetes"); a pod started outside the stagger has the container's start only.
    # The first start by that order is the earliest of the first tier that has one (a release,
    # then a container start, then a start of unknown source). Each join of the pod in its
    # batch pairs with that start. One hashed aggregation per pod and batch gathers both, where
    # a ranking window and a join sorted 4 million rows each at 1e7 records.
    is_start = sf.col("record_type") == "pod-start"
    operator_start = sf.col("source") == "operator"
    tiers = (operator_start, ~operator_start, operator_start.isNull())
    in_batch = sf.col("batch").isNotNull() & sf.col("pod").isNotNull()
    paired = (
        events.filter(in_batch & (is_start | (sf.col("record_type") == "member-join")))
        .groupBy(*pod_in_batch)
        .agg(
            *(
                sf.min(sf.when(is_start & tier, sf.col("detected_at"))).alias(f"tier_{number}")
                for number, tier in enumerate(tiers)
            ),
            # collect_list leaves the starts' nulls out: the pod's joins in its batch.
            sf.collect_list(sf.when(~is_start, sf.col("detected_at"))).alias("join_times"),
        )
        .select(
            GROUP,
            sf.coalesce("tier_0", "tier_1", "tier_2").alias("start_at"),
            sf.explode("join_times").alias("join_at"),
        )
        .withColumn("latency_ms", (sf.col("join_at") - sf.col("start_at")) * 1000.0)
        .filter(sf.col("latency_ms") >= 0)
    )
    return paired.groupBy(GROUP).agg(
        sf.percentile_approx("latency_ms", list(QUANTILE_SHARES), 10000).alias("latency_q"),
        sf.count(sf.lit(1)).alias("join_samples"),
    )


def batch_joins(events: DataFrame) -> DataFrame:
    """One row per batch of a group: its joins' times, spread and whether a rollout made it."""
    joins = events.filter(sf.col("record_type") == "member-join")
    batched = joins.filter(sf.col("batch").isNotNull())
    return batched.groupBy(GROUP, "batch").agg(
        ((sf.max("detected_at") - sf.min("detected_at")) * 1000.0).alias("spread_ms"),
        sf.count(sf.lit(1)).alias("batch_members"),
        sf.min("detected_at").alias("first_join_at"),
        # Whether the batch was a rollout's: a flag hashes, a string's max needs a sort.
        sf.max(sf.col("rollout").isNotNull()).alias("of_rollout"),
        sf.collect_list("detected_at").alias("join_times"),
    )


def _shared(per_batch: DataFrame) -> DataFrame:
    return per_batch.filter(sf.col("batch_members") >= 2)


def join_offsets(per_batch: DataFrame) -> DataFrame:
    """Per group: quantiles of how far behind its batch's first join each pod joined.

    Without pod-start records (the operator records joins only) the latencies are not known,
    but these are: the latency distribution up to the fastest pod's latency, which every
    candidate shares.
    """
    return (
        _shared(per_batch)
        .select(GROUP, "first_join_at", sf.explode("join_times").alias("joined_at"))
        .withColumn("offset_ms", (sf.col("joined_at") - sf.col("first_join_at")) * 1000.0)
        .groupBy(GROUP)
        .agg(
            sf.percentile_approx("offset_ms", list(QUANTILE_SHARES), 10000).alias("offset_q"),
            sf.count(sf.lit(1)).alias("offset_samples"),
        )
    )


def bursts(per_batch: DataFrame) -> DataFrame:
    """Per group: start-ups outside rollouts (cold starts, scale-ups without the stagger)."""
    return (
        _shared(per_batch)
        .filter(~sf.col("of_rollout"))
        .groupBy(GROUP)
        .agg(sf.count(sf.lit(1)).alias("bursts"))
    )


def join_spreads(per_batch: DataFrame) -> DataFrame:
    """Per group and batch size: how many batches, and their joins' spread (p50, p90)."""
    spreads = per_batch.groupBy(GROUP, "batch_members").agg(
        sf.count(sf.lit(1)).alias("batches"),
        sf.percentile_approx("spread_ms", [0.5, 0.9], 1000).alias("spread_q"),
    )
    return spreads.select(
        GROUP,
        "batch_members",
        "batches",
        sf.col("spread_q")[0].alias("spread_p50_ms"),
        sf.col("spread_q")[1].alias("spread_p90_ms"),
    )


def rebalance_costs(events: DataFrame) -> DataFrame:
    """Per group: how long a Stable group's rebalance took, with how many members."""
    rebalances = events.filter(sf.col("record_type") == "rebalance").join(
        first_joins(events), on=[GROUP, "generation"], how="left"
    )
    of_stable_group = sf.col("previous_generation").isNotNull()
    return rebalances.groupBy(GROUP).agg(
        sf.count(sf.lit(1)).alias("rebalance_samples"),
        sf.percentile_approx(sf.when(of_stable_group, from_first_join_ms()), 0.5, 1000).alias(
            "rebalance_ms"
        ),
        sf.percentile_approx(sf.when(of_stable_group, sf.col("members")), 0.5, 1000).alias(
            "rebalance_members"
        ),
        sf.avg("stop_the_world_partition_s").alias("stw_per_rebalance"),
    )


def first_joins(events: DataFrame) -> DataFrame:
    """Per group and generation: its first member-join."""
    joins = events.filter(
        (sf.col("record_type") == "member-join") & sf.col("generation").isNotNull()
    )
    return joins.groupBy(GROUP, "generation").agg(sf.min("detected_at").alias("first_join_at"))


def from_first_join_ms() -> Column:
    """A rebalance's time to Stable counted from its first JoinGroup, as the simulator's
    rebalance is. The operator counts a joined rebalance's time to Stable from its joiners'
    start-up (docs/history.md), which holds their pods' start-up latency: fitted to the
    rebalance cost, that latency would count again as every rebalance's wait for polls."""
    stable_at = sf.col("started_at") + sf.col("time_to_stable_ms") / 1000.0
    from_join = (stable_at - sf.col("first_join_at")) * 1000.0
    known = sf.col("first_join_at").isNotNull() & sf.col("started_at").isNotNull()
    return sf.when(known & (from_join >= 0), from_join).otherwise(sf.col("time_to_stable_ms"))


def group_overall(events: DataFrame) -> DataFrame:
    """Per group: the history's span, size, rollouts, and the settings it last recorded."""
    latest = sf.col("detected_at")
    # Two groups whose KEYs hash alike would be one here: a second, independent hash of the KEY
    # differs within the group if so (the job refuses such a history). Projected once per row,
    # for both its minimum and its maximum.
    checked = events.withColumn("key_check", sf.hash(*KEY))
    # One struct per row rather than one aggregate per column: one buffer and one comparison
    # each, where seven max_by kept seven (a third of this aggregation's time at 1e7 records),
    # and every setting comes from the same latest row even when two rows tie on time.
    overall = checked.groupBy(GROUP).agg(
        sf.first(sf.struct(*KEY)).alias("key"),
        (sf.min("key_check") != sf.max("key_check")).alias("key_collision"),
        sf.min("detected_at").alias("first_at"),
        sf.max("detected_at").alias("last_at"),
        sf.count(sf.lit(1)).alias("records"),
        # The same count as countDistinct, without the row-doubling Expand Spark plans for a
        # distinct count next to other aggregates.
        sf.size(sf.collect_set("rollout")).alias("rollouts"),
        sf.percentile_approx("members", 0.95, 1000).alias("members_p95"),
        sf.max("partitions").alias("partitions"),
        sf.max_by(
            sf.struct(*(sf.col(column).alias(alias) for column, alias in SETTINGS)), latest
        ).alias("settings"),
    )
    return overall.select(
        GROUP,
        *(sf.col(f"key.{column}").alias(column) for column in KEY),
        "key_collision",
        "first_at",
        "last_at",
        "records",
        "rollouts",
        "members_p95",
        "partitions",
        *(sf.col(f"settings.{alias}").alias(alias) for _, alias in SETTINGS),
    )


def departures(events: DataFrame) -> DataFrame:
    """Per group: each kind of stop (crash, leave), how often, and how long members stayed away."""
    # Each stop's next join of the same member: the nearest later join, found by a running
    # frame over time descending (an unbounded-following frame would be quadratic).
    later = (
        Window.partitionBy(GROUP, "pod")
        .orderBy(sf.col("detected_at").desc())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    stops = (
        events.filter(sf.col("record_type").isin("pod-stop", "member-join"))
        .filter(sf.col("pod").isNotNull())
        .withColumn(
            "join_at", sf.when(sf.col("record_type") == "member-join", sf.col("detected_at"))
        )
        .withColumn("next_join_at", sf.last("join_at", ignorenulls=True).over(later))
        .filter(sf.col("record_type") == "pod-stop")
        .withColumn("downtime_ms", (sf.col("next_join_at") - sf.col("detected_at")) * 1000.0)
        .withColumn(
            "back",
            sf.col("downtime_ms").isNotNull() & (sf.col("downtime_ms") <= RETURN_WINDOW_S * 1000),
        )
        .withColumn("kind", sf.coalesce(sf.col("departure"), sf.lit("crash")))
    )
    return (
        stops.groupBy(GROUP, "kind")
        .agg(
            sf.count(sf.lit(1)).alias("stops"),
            sf.sum(sf.col("back").cast("int")).alias("returned"),
            sf.percentile_approx(
                sf.when(sf.col("back"), sf.col("downtime_ms")), list(DOWNTIME_POINTS), 1000
            ).alias("downtime_q"),
        )
        .groupBy(GROUP)
        .agg(
            sf.collect_list(sf.struct("kind", "stops", "returned", "downtime_q")).alias(
                "departures"
            )
        )
    )
