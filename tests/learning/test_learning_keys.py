"""Estimation groups by a hash of each group's KEY: the job maps results back, and refuses a
history where two groups hashed alike rather than merging them."""

from __future__ import annotations

import pandas as pd
import pytest

from rebalancer.learning.jobs import keyed_spreads


def profiles(collision: bool) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "group": [7, -3],
            "cluster": ["k:9092", "k:9092"],
            "namespace": ["shop", "shop"],
            "name": ["payments", "orders"],
            "group_id": ["payments", "orders"],
            "key_collision": [False, collision],
        }
    )


SPREADS = pd.DataFrame(
    {
        "group": [7, -3, 7],
        "batch_members": [4, 2, 2],
        "batches": [8, 1, 3],
        "spread_p50_ms": [10.0, 20.0, 30.0],
        "spread_p90_ms": [11.0, 21.0, 31.0],
    }
)


def test_spreads_carry_their_groups_key_in_key_order() -> None:
    rows = keyed_spreads(profiles(False), SPREADS)

    assert [(row["name"], row["batch_members"], row["batches"]) for row in rows] == [
        ("orders", 2, 1),
        ("payments", 2, 3),
        ("payments", 4, 8),
    ]
    assert all("group" not in row for row in rows)


def test_two_groups_whose_keys_hash_alike_are_refused_by_name() -> None:
    with pytest.raises(RuntimeError, match="k:9092/shop/orders/orders"):
        keyed_spreads(profiles(True), SPREADS)
