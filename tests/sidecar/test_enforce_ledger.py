"""The control log: record encoding, the ledger every sidecar builds, the actor's next step."""

from __future__ import annotations

import pytest

from rebalancer.sidecar.ledger import Action, ActorView, Ledger, RequestEntry, next_action
from rebalancer.structs.enforcement import (
    ActorClaim,
    EnforceOutcome,
    EnforceRequest,
    EnforceStatus,
    RecordInvalid,
    control_topic,
    decode_record,
    encode_record,
    flip_topic,
    pattern_takes_control_topics,
)

REQUEST = EnforceRequest("r1", "because", False, "app-0-sidecar", 100.0)
RETRYING = EnforceRequest("r1", "because", True, "app-0-sidecar", 100.0)


def outcome(status: EnforceStatus, **extra: object) -> EnforceOutcome:
    return EnforceOutcome("r1", status, "app-1-sidecar", 101.0, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "record",
    [
        REQUEST,
        outcome(EnforceStatus.ENFORCED, from_generation=3, generation=4),
        outcome(EnforceStatus.IN_PROGRESS, will_retry=True, message="busy"),
        ActorClaim("app-1-sidecar", "n1", 5.0),
    ],
)
def test_records_round_trip(record) -> None:
    assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"[]",
        b'{"kind":"request","at":1}',
        b'{"kind":"what","at":1}',
        b'{"kind":"outcome","requestId":"r","status":"odd","at":1}',
        b'{"kind":"claim"}',
    ],
)
def test_unreadable_records_are_refused(raw) -> None:
    with pytest.raises(RecordInvalid):
        decode_record(raw)


# (group id, control topic)
TOPICS = [
    ("orders", "__rebalancer.orders"),
    ("team/orders:v2", None),  # unsafe characters: replaced and told apart by a digest
    ("x" * 249, None),
]


@pytest.mark.parametrize(("group", "expected"), TOPICS)
def test_control_topics_are_legal_names(group, expected) -> None:
    name, flip = control_topic(group), flip_topic(group)
    if expected is not None:
        assert name == expected
    assert flip == name + ".flip"
    assert len(flip) <= 249
    assert all(c.isalnum() or c in "._-" for c in flip)
    assert control_topic(group) == name


def test_unsafe_group_ids_do_not_collide() -> None:
    assert control_topic("a/b") != control_topic("a:b")


@pytest.mark.parametrize(
    ("pattern", "takes"),
    [(".*", True), ("__rebalancer\\..*", True), ("orders\\..*", False), ("(", False)],
)
def test_patterns_that_would_consume_the_control_topics(pattern, takes) -> None:
    assert pattern_takes_control_topics(pattern, "orders") is takes


def test_ledger_keeps_the_first_request_and_counts_duplicates() -> None:
    ledger = Ledger()
    assert ledger.apply(REQUEST, 0) == "r1"
    assert ledger.apply(EnforceRequest("r1", "again", True, "app-1-sidecar", 102.0), 1) == "r1"
    entry = ledger.get("r1")
    assert entry is not None and entry.duplicates == 1 and entry.request.reason == "because"
    assert entry.status is EnforceStatus.ACCEPTED
    ledger.apply(outcome(EnforceStatus.ENFORCED, generation=4), 2)
    assert ledger.get("r1").status is EnforceStatus.ENFORCED  # type: ignore[union-attr]
    assert ledger.unfinished() == []
    assert ledger.apply(ActorClaim("a", "n", 1.0), 3) is None and ledger.claim_seen("n")
    assert ledger.position == 3


def test_ledger_forgets_only_finished_requests() -> None:
    ledger = Ledger(capacity=2)
    for number in range(3):
        ledger.apply(EnforceRequest(f"r{number}", "", False, "s", 1.0), number)
    assert len(ledger) == 3  # nothing finished yet: nothing may be forgotten
    ledger.apply(EnforceOutcome("r0", EnforceStatus.ENFORCED, "s", 2.0), 3)
    ledger.apply(EnforceRequest("r3", "", False, "s", 1.0), 4)
    assert ledger.get("r0") is None and ledger.get("r3") is not None


def view(**changes: object) -> ActorView:
    base: dict[str, object] = {"now": 110.0, "group_state": "Stable", "generation": 3}
    base.update(changes)
    return ActorView(**base)  # type: ignore[arg-type]


# (name, entry, view, action)
ACTIONS = [
    ("new request, group stable", RequestEntry(REQUEST, 0), view(), Action.ENFORCE),
    (
        "new request, rebalancing",
        RequestEntry(REQUEST, 0),
        view(group_state="PreparingRebalance"),
        Action.REPORT_IN_PROGRESS,
    ),
    (
        "new request, KIP-848 group computing its target: served by it",
        RequestEntry(REQUEST, 0),
        view(group_state="Assigning"),
        Action.REPORT_IN_PROGRESS,
    ),
    (
        "new request, KIP-848 group reconciling a target computed before it: a new epoch",
        RequestEntry(REQUEST, 0),
        view(group_state="Reconciling"),
        Action.ENFORCE,
    ),
    (
        "new request while another is in flight: coalesced",
        RequestEntry(REQUEST, 0),
        view(in_flight="r0"),
        Action.REPORT_IN_PROGRESS,
    ),
    (
        "retrying request, still rebalancing",
        RequestEntry(RETRYING, 0, outcome(EnforceStatus.IN_PROGRESS, will_retry=True)),
        view(group_state="CompletingRebalance"),
        Action.WAIT,
    ),
    (
        "retrying request, stable again",
        RequestEntry(RETRYING, 0, outcome(EnforceStatus.IN_PROGRESS, will_retry=True)),
        view(),
        Action.ENFORCE,
    ),
    ("too old", RequestEntry(REQUEST, 0), view(now=1000.0), Action.EXPIRE),
    (
        "enforcing, new generation seen",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCING, from_generation=3)),
        view(generation=4, in_flight="r1"),
        Action.CONFIRM,
    ),
    (
        "enforcing, waiting for the generation",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCING, from_generation=3)),
        view(in_flight="r1", group_state="PreparingRebalance"),
        Action.WAIT,
    ),
    (
        "enforcing, too long",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCING, from_generation=3)),
        view(in_flight="r1", now=300.0),
        Action.FAIL,
    ),
    (
        "enforcing by an actor that left; takeover generation counts",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCING, from_generation=3)),
        view(generation=5),
        Action.CONFIRM,
    ),
    (
        "enforcing by an actor that left before rejoining",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCING, from_generation=3)),
        view(),
        Action.ENFORCE,
    ),
    (
        "enforced is final",
        RequestEntry(REQUEST, 0, outcome(EnforceStatus.ENFORCED)),
        view(),
        Action.WAIT,
    ),
]


@pytest.mark.parametrize(
    ("entry", "actor_view", "action"), [a[1:] for a in ACTIONS], ids=[a[0] for a in ACTIONS]
)
def test_next_action(entry, actor_view, action) -> None:
    assert next_action(entry, actor_view) is action
