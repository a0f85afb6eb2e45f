"""Which shard a ConsumerGroup is in, and which shard Leases a replica takes and gives back."""

from __future__ import annotations

from collections import Counter

import pytest

from rebalancer.planning.shards import (
    SHARD_LABEL,
    LeaseView,
    Member,
    ShardedGroup,
    ShardLabelInvalid,
    TakeUp,
    fair_share,
    groups_to_take_up,
    hashed_shard,
    member_lease_name,
    plan_shards,
    serving_deadline,
    shard_lease_name,
    shard_of,
    shard_of_lease,
    target_holders,
    waits_for,
)

NOW = 1_800_000_000.0


def held(holder: str, ago: float = 1.0, duration: float = 10.0) -> LeaseView:
    return LeaseView(holder=holder, renewed_at=NOW - ago, duration_seconds=duration)


def test_the_hash_is_stable_across_processes_and_spreads_groups() -> None:
    # Fixed values: Python's hash() of a str changes per process (PYTHONHASHSEED).
    assert hashed_shard("default", "orders", 8) == hashed_shard("default", "orders", 8)
    assert [hashed_shard("team-a", f"group-{i}", 4) for i in range(6)] == [
        hashed_shard("team-a", f"group-{i}", 4) for i in range(6)
    ]
    counts = Counter(hashed_shard("ns", f"group-{i}", 4) for i in range(4000))
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 900  # about 1000 each


def test_the_namespace_is_part_of_the_key() -> None:
    spots = {hashed_shard(f"ns-{i}", "orders", 16) for i in range(40)}
    assert len(spots) > 8


def test_a_known_value_pins_the_hash_function() -> None:
    # sha256("default/orders")[:8] as a big-endian integer, mod 1000.
    import hashlib

    expected = int.from_bytes(hashlib.sha256(b"default/orders").digest()[:8], "big") % 1000
    assert hashed_shard("default", "orders", 1000) == expected


def test_the_label_overrides_the_hash() -> None:
    hashed = hashed_shard("default", "orders", 4)
    other = (hashed + 1) % 4
    assert shard_of("default", "orders", {SHARD_LABEL: str(other)}, 4) == other
    assert shard_of("default", "orders", {"app": "x"}, 4) == hashed
    assert shard_of("default", "orders", None, 4) == hashed


@pytest.mark.parametrize("value", ["4", "-1", "two", "", "1.5"])
def test_a_label_out_of_range_names_the_label_and_the_fix(value: str) -> None:
    with pytest.raises(ShardLabelInvalid) as error:
        shard_of("default", "orders", {SHARD_LABEL: value}, 4)
    message = str(error.value)
    assert SHARD_LABEL in message
    assert "0 to 3" in message
    assert "default/orders" in message
    assert "remove it" in message


def test_no_shards_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        hashed_shard("a", "b", 0)


@pytest.mark.parametrize(
    ("shards", "replicas", "share"), [(8, 1, 8), (8, 2, 4), (8, 3, 3), (10, 3, 4), (2, 5, 1)]
)
def test_fair_share(shards: int, replicas: int, share: int) -> None:
    assert fair_share(shards, replicas) == share


def test_a_lone_replica_takes_every_shard() -> None:
    moves = plan_shards("a", 4, {}, ["a"], NOW)
    assert moves.take == (0, 1, 2, 3)
    assert moves.renew == () and moves.release == ()


def test_it_renews_what_it_holds_and_takes_expired_leases_only() -> None:
    leases = {0: held("a"), 1: held("b"), 2: held("b", ago=11.0), 3: held("", ago=1.0)}
    moves = plan_shards("a", 4, leases, ["a"], NOW)  # b's member Lease has expired
    assert moves.renew == (0,)
    assert moves.take == (2, 3)  # 1 is b's and live: never taken while it lasts
    assert moves.release == ()


def test_a_live_holder_keeps_a_shard_even_above_the_reckoned_share() -> None:
    leases = {shard: held("b") for shard in range(4)}
    moves = plan_shards("a", 4, leases, ["a", "b"], NOW)
    assert moves.take == ()  # b gives them back itself


def test_a_replica_above_its_share_gives_back_the_surplus() -> None:
    leases = {shard: held("a") for shard in range(4)}
    moves = plan_shards("a", 4, leases, ["a", "b"], NOW)
    assert len(moves.release) == 2
    assert len(moves.renew) == 2
    assert set(moves.release) | set(moves.renew) == {0, 1, 2, 3}


def run_rounds(replicas: list[str], shards: int, leases: dict[int, LeaseView], rounds: int) -> None:
    """Every replica plans in turn and its writes all land (no races)."""
    for _ in range(rounds):
        for replica in replicas:
            moves = plan_shards(replica, shards, leases, replicas, NOW)
            for shard in moves.renew + moves.take:
                leases[shard] = held(replica, ago=0.0)
            for shard in moves.release:
                leases[shard] = held("", ago=0.0)


def test_shards_spread_when_a_replica_joins_and_move_when_one_dies() -> None:
    leases: dict[int, LeaseView] = {}
    run_rounds(["a"], 10, leases, 1)
    assert Counter(lease.holder for lease in leases.values()) == {"a": 10}
    run_rounds(["a", "b", "c"], 10, leases, 3)
    counts = Counter(lease.holder for lease in leases.values())
    assert sum(counts.values()) == 10 and max(counts.values()) == 4 and min(counts.values()) >= 2
    # c dies: its Leases expire, a and b take them.
    for shard, lease in list(leases.items()):
        if lease.holder == "c":
            leases[shard] = held("c", ago=11.0)
    run_rounds(["a", "b"], 10, leases, 2)
    assert Counter(lease.holder for lease in leases.values()) == {"a": 5, "b": 5}


def test_two_replicas_racing_for_free_shards_try_different_ones_first() -> None:
    first_a = plan_shards("a", 8, {}, ["a", "b"], NOW).take
    first_b = plan_shards("b", 8, {}, ["a", "b"], NOW).take
    assert len(first_a) == len(first_b) == 4
    assert set(first_a).isdisjoint(first_b)
    for shard in first_a:
        assert target_holders(8, ["b", "a"])[shard] == "a"


def test_names() -> None:
    assert shard_lease_name("rebalancer", 3) == "rebalancer-shard-3"
    assert shard_of_lease("rebalancer", "rebalancer-shard-3") == 3
    assert shard_of_lease("rebalancer", "rebalancer-shard-x") is None
    assert shard_of_lease("rebalancer", "other-shard-3") is None
    assert member_lease_name("rebalancer", "Host.local/123") == "rebalancer-member-host.local-123"


def test_a_holder_stops_acting_before_the_others_may_take() -> None:
    assert serving_deadline(NOW, 10.0) < NOW + 10.0


def test_targets_give_each_replica_its_share_and_keep_most_shards_in_place() -> None:
    before = target_holders(12, ["a", "b", "c"])
    assert Counter(before.values()) == {"a": 4, "b": 4, "c": 4}
    after = target_holders(12, ["a", "b", "c", "d"])
    assert Counter(after.values()) == {"a": 3, "b": 3, "c": 3, "d": 3}
    moved = [shard for shard in range(12) if before[shard] != after[shard]]
    assert len(moved) <= 6  # a full reshuffle would move about 9


def test_a_replica_with_a_new_shard_count_waits_for_the_older_count_to_go() -> None:
    old = [Member("a", 8, 100.0), Member("b", 8, 101.0)]
    new = Member("c", 12, 200.0)
    assert waits_for("c", 12, [*old, new]) == ["a", "b"]
    # The older count does not wait for the newer, and does not count it as a member.
    assert waits_for("a", 8, [*old, new]) == []
    assert waits_for("c", 12, [new, Member("d", 12, 201.0)]) == []
    # A Lease that does not say its count is not waited for.
    assert waits_for("c", 12, [Member("x", None, 1.0), new]) == []


def test_a_taken_shard_takes_up_the_groups_without_their_daemons_here() -> None:
    ours = "pod-b (shard 1 of 4)"
    groups = [
        ShardedGroup("a", "elsewhere", "pod-a (shard 1 of 4)"),
        ShardedGroup("a", "new", None),
        ShardedGroup("a", "running", "pod-a (shard 1 of 4)"),
        ShardedGroup("a", "ours-no-daemon", ours),
        ShardedGroup("a", "ours-running", ours),
    ]
    running = {("a", "running"), ("a", "ours-running")}
    taken = groups_to_take_up(groups, ours, running, just_taken=True)
    assert taken == [
        TakeUp("a", "elsewhere", clear_first=False),
        TakeUp("a", "new", clear_first=False),
        TakeUp("a", "ours-no-daemon", clear_first=True),
    ]
    # A later look writes only what names another replica: the same value again would be
    # a write for nothing while kopf is about to start the daemon anyway.
    later = groups_to_take_up(groups, ours, running, just_taken=False)
    assert [one.name for one in later] == ["elsewhere", "new"]
