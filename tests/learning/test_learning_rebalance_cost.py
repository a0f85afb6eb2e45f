"""The rebalance cost is fitted to a rebalance's time from its first JoinGroup, as the simulator
times a rebalance, not from its joiners' start-up, which the operator's records count from."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")

from pyspark.sql import SparkSession

from rebalancer.learning.estimation import GROUP, rebalance_costs

COLUMNS = (
    f"{GROUP} long, record_type string, detected_at double, generation long, "
    "previous_generation long, started_at double, time_to_stable_ms double, members int, "
    "stop_the_world_partition_s double"
)


def test_a_joined_rebalance_is_timed_from_its_first_join(spark: SparkSession) -> None:
    rows = [
        # Group 1: released at 100 s, pods joined from 104.5 s, Stable at 106 s.
        (1, "member-join", 104.5, 2, None, None, None, 4, None),
        (1, "member-join", 105.0, 2, None, None, None, 4, None),
        (1, "rebalance", 106.2, 2, 1, 100.0, 6000.0, 4, 3.0),
        # Group 2: no member-join of its generation recorded: its time to Stable as it is.
        (2, "rebalance", 50.0, 7, 6, 40.0, 2500.0, 8, 1.0),
        # Group 3: a join recorded after the Stable moment (another pass): not subtracted.
        (3, "member-join", 20.0, 3, None, None, None, 2, None),
        (3, "rebalance", 19.0, 3, 2, 10.0, 4000.0, 2, 1.0),
    ]
    events = spark.createDataFrame(rows, schema=COLUMNS)
    costs = {row[GROUP]: row["rebalance_ms"] for row in rebalance_costs(events).collect()}
    assert costs[1] == pytest.approx(1500.0)
    assert costs[2] == pytest.approx(2500.0)
    assert costs[3] == pytest.approx(4000.0)
