"""The sidecar's choice of lever from what the broker says of the group (planning/group_levers)."""

from __future__ import annotations

import pytest

from rebalancer.planning.group_levers import GroupFacts, Lever, choose_lever

LIVE = {"kind": "classic", "has_members": True, "protocol_type": "consumer"}


@pytest.mark.parametrize(
    ("facts", "strategy", "protocol", "lever", "offered"),
    [
        # kafkajs' default assignor, and an application naming its own: a visit with that name.
        (
            GroupFacts(**LIVE, protocol_name="RoundRobinAssigner"),
            None,
            None,
            Lever.VISIT,
            "RoundRobinAssigner",
        ),
        (
            GroupFacts(**LIVE, protocol_name="my-assignor"),
            "range",
            None,
            Lever.VISIT,
            "my-assignor",
        ),
        # librdkafka's names: a member, with the group's strategy where the settings name another.
        (GroupFacts(**LIVE, protocol_name="range"), None, None, Lever.REJOIN, "range"),
        (
            GroupFacts(**LIVE, protocol_name="cooperative-sticky"),
            "range,roundrobin",
            None,
            Lever.REJOIN,
            "cooperative-sticky",
        ),
        (
            GroupFacts(**LIVE, protocol_name="roundrobin"),
            "range,roundrobin",
            None,
            Lever.REJOIN,
            None,
        ),
        # KIP-848, by the application's settings or by the group's kind.
        (GroupFacts(kind="consumer", has_members=True), None, None, Lever.SUBSCRIPTION, None),
        (GroupFacts(), None, "consumer", Lever.SUBSCRIPTION, None),
        # An empty group: join with the application's settings only when they name a strategy.
        (GroupFacts(), "cooperative-sticky", None, Lever.REJOIN, None),
        (GroupFacts(), None, None, Lever.WAIT, None),
        (GroupFacts(**LIVE, protocol_name=""), None, None, Lever.WAIT, None),
        # What the sidecar cannot join.
        (
            GroupFacts(
                kind="classic", has_members=True, protocol_type="connect", protocol_name="sessioned"
            ),
            None,
            None,
            Lever.UNSUPPORTED,
            None,
        ),
        (GroupFacts(kind="share", has_members=True), None, None, Lever.UNSUPPORTED, None),
    ],
)
def test_lever_follows_the_group(
    facts: GroupFacts, strategy: str | None, protocol: str | None, lever: Lever, offered: str | None
) -> None:
    choice = choose_lever(facts, configured_strategy=strategy, configured_protocol=protocol)
    assert choice.lever is lever
    assert (choice.protocol_name or choice.strategy) == offered


def test_unsupported_names_the_protocol_and_the_fix() -> None:
    facts = GroupFacts(
        kind="classic", has_members=True, protocol_type="connect", protocol_name="sessioned"
    )
    reason = choose_lever(facts, configured_strategy=None, configured_protocol=None).reason
    assert "'connect'" in reason and "'sessioned'" in reason and "spec.policy.enforce" in reason


# A classic Kafka Streams group as the broker describes it (protocol type, then name).
STREAMS_APP = GroupFacts(
    kind="classic", has_members=True, protocol_type="consumer", protocol_name="stream"
)


@pytest.mark.parametrize("strategy", [None, "range", "cooperative-sticky", "stream"])
@pytest.mark.parametrize("protocol", [None, "classic"])
@pytest.mark.parametrize("kind", ["classic", "unknown", None])
def test_a_classic_streams_group_is_never_visited(
    strategy: str | None, protocol: str | None, kind: str | None
) -> None:
    """The Streams leader fails on a member it cannot decode: whatever the sidecar's settings
    say, no lever may put one in the group."""
    facts = GroupFacts(kind, True, "consumer", "stream")
    choice = choose_lever(facts, configured_strategy=strategy, configured_protocol=protocol)
    assert choice.lever is Lever.UNSUPPORTED
    assert choice.protocol_name is None and choice.strategy is None


def test_the_streams_refusal_names_the_risk_and_the_fix() -> None:
    reason = choose_lever(STREAMS_APP, configured_strategy=None, configured_protocol=None).reason
    assert "Kafka Streams" in reason and "'stream'" in reason
    assert "ERROR" in reason and "spec.policy.enforce" in reason


def test_another_assignor_named_like_streams_is_still_visited() -> None:
    """Only Kafka Streams' own name is refused; an application's assignor keeps the visit."""
    facts = GroupFacts(**LIVE, protocol_name="streams-like")
    choice = choose_lever(facts, configured_strategy=None, configured_protocol=None)
    assert choice.lever is Lever.VISIT


@pytest.mark.parametrize(
    "facts, protocol",
    [(GroupFacts(), "streams"), (GroupFacts(kind="streams", has_members=True), None)],
)
def test_a_streams_protocol_group_is_refused_with_its_fix(
    facts: GroupFacts, protocol: str | None
) -> None:
    choice = choose_lever(facts, configured_strategy="range", configured_protocol=protocol)
    assert choice.lever is Lever.UNSUPPORTED
    assert "KIP-1071" in choice.reason and "spec.policy.enforce" in choice.reason
