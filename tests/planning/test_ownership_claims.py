"""Who owns a group and a workload, decided from claims alone (planning.ownership)."""

from __future__ import annotations

from rebalancer.planning.ownership import (
    Claim,
    ClaimedField,
    Sighting,
    admission_refusal,
    claim_keys,
    find_conflicts,
    group_mismatch,
    group_mismatch_message,
    normalise_servers,
    not_owner_message,
    sightings_by_workload,
    workload_pod,
    yielding_to,
)


def claim(
    name: str,
    created: str,
    group: str = "orders",
    servers: tuple[str, ...] = ("kafka:9092",),
    workload: str = "orders-consumer",
    namespace: str = "default",
) -> Claim:
    return Claim(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        created=created,
        group_id=group,
        servers=normalise_servers(servers),
        workload_kind="StatefulSet",
        workload_name=workload,
    )


OLD = claim("orders", "2026-01-01T00:00:00Z")


def test_same_group_on_the_same_cluster_conflicts_and_the_newer_yields() -> None:
    twin = claim("orders-2", "2026-01-02T00:00:00Z", workload="other-consumer")
    conflicts = find_conflicts(twin, [OLD, twin])
    assert [(c.field, c.other.name) for c in conflicts] == [(ClaimedField.GROUP, "orders")]
    assert yielding_to(twin, [OLD, twin]) == conflicts
    assert yielding_to(OLD, [OLD, twin]) == []  # the older keeps working


def test_same_workload_conflicts_whatever_the_group() -> None:
    other = claim("other", "2026-01-02T00:00:00Z", group="other")
    conflicts = yielding_to(other, [OLD])
    assert [c.field for c in conflicts] == [ClaimedField.WORKLOAD]
    message = conflicts[0].message(other)
    assert "spec.workload StatefulSet/orders-consumer" in message
    assert "default/orders" in message and "'orders'" in message


def test_no_conflict_on_another_cluster_namespace_or_workload() -> None:
    elsewhere = claim(
        "orders-b", "2026-01-02T00:00:00Z", servers=("other-kafka:9092",), workload="b-consumer"
    )
    assert find_conflicts(elsewhere, [OLD]) == []
    # A workload of the same name in another namespace is another workload.
    other_ns = claim("orders", "2026-01-02T00:00:00Z", group="x", namespace="team-b")
    assert find_conflicts(other_ns, [OLD]) == []


def test_bootstrap_lists_that_share_a_broker_name_one_cluster() -> None:
    twin = claim(
        "orders-2",
        "2026-01-02T00:00:00Z",
        servers=("KAFKA:9092 ", "kafka-1:9092"),
        workload="w",
    )
    assert [c.field for c in find_conflicts(twin, [OLD])] == [ClaimedField.GROUP]


def test_admission_refuses_any_rival_and_names_it() -> None:
    # An older resource updated to point at a younger one's workload is refused as well.
    young = claim("young", "2026-03-01T00:00:00Z", group="young", workload="young-consumer")
    moved = claim("orders", "2026-01-01T00:00:00Z", workload="young-consumer")
    refusal = admission_refusal(moved, [young, OLD])
    assert refusal is not None and "default/young" in refusal
    assert admission_refusal(OLD, [OLD]) is None  # itself is no rival


def test_ties_break_by_name_so_every_reader_picks_the_same_owner() -> None:
    a = claim("a", "2026-01-01T00:00:00Z", workload="wa")
    b = claim("b", "2026-01-01T00:00:00Z", workload="wb")
    assert yielding_to(a, [b]) == [] and len(yielding_to(b, [a])) == 1


def test_keys_file_a_claim_under_its_group_and_its_workload() -> None:
    assert claim_keys(OLD) == [
        ("group", "orders"),
        ("workload", "default", "StatefulSet", "orders-consumer"),
    ]


def test_not_owner_message_says_it_takes_no_action() -> None:
    twin = claim("orders-2", "2026-01-02T00:00:00Z")
    message = not_owner_message(twin, yielding_to(twin, [OLD]))
    assert "spec.groupId 'orders'" in message and "spec.workload" in message
    assert "takes no action" in message and "default/orders" in message


def test_consumers_of_the_workload_using_another_group_are_a_mismatch() -> None:
    intruder = claim("intruder", "2026-01-02T00:00:00Z", group="intruder")
    seen = [
        Sighting("orders", "default", "orders-consumer-0"),
        Sighting("orders", None, "orders-consumer-1"),
        Sighting("orders", "team-b", "orders-consumer-2"),  # another namespace's pod
        Sighting("billing", "default", "billing-consumer-0"),  # another workload's pod
    ]
    assert group_mismatch(intruder, seen) == (
        "orders",
        ("orders-consumer-0", "orders-consumer-1"),
    )
    message = group_mismatch_message(intruder, "orders", ("orders-consumer-0",))
    assert "'orders'" in message and "spec.groupId 'intruder'" in message
    # One pod already on spec.groupId: a change of group under way, no mismatch.
    assert (
        group_mismatch(intruder, [*seen, Sighting("intruder", None, "orders-consumer-2")]) is None
    )
    assert group_mismatch(intruder, []) is None


def test_pod_names_of_a_workload() -> None:
    assert workload_pod("StatefulSet", "orders", "orders-12")
    assert not workload_pod("StatefulSet", "orders", "orders-consumer-0")
    assert workload_pod("Deployment", "web", "web-7d4b9c8f6d-x2kqz")
    assert not workload_pod("Deployment", "web", "web-canary-7d4b9c8f6d-x2kqz")
    assert not workload_pod("Deployment", "web", "web-0")


def test_sightings_are_filed_under_every_workload_their_pod_name_fits() -> None:
    seen = [
        Sighting("orders", None, "orders-consumer-0"),
        Sighting("web", None, "web-7d4b9c8f6d-x2kqz"),
        Sighting("x", None, "laptop"),
    ]
    filed = sightings_by_workload(seen)
    assert filed[("StatefulSet", "orders-consumer")] == [seen[0]]
    assert filed[("Deployment", "web")] == [seen[1]]
    assert all(seen[2] not in found for found in filed.values())
