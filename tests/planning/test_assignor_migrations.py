"""KIP-429's eager -> cooperative-sticky path, as a table of (running, rolled out) -> rendered."""

from __future__ import annotations

import pytest

from rebalancer.planning.assignor_migrations import (
    parse_strategy,
    plan_assignor,
    render_strategy,
)
from rebalancer.structs.consumer_settings_policy import AssignmentStrategy as A
from rebalancer.structs.consumer_settings_policy import ClientLibrary as L

COOP = "cooperative-sticky"

# (case, wanted, library, running, rolled out, group active) -> (rendered, step, problem?)
STEPS = [
    ("empty group: straight there", A.COOPERATIVE_STICKY, L.LIBRDKAFKA, ("range",), True, False,
     (COOP,), 0, False),
    ("already cooperative", A.COOPERATIVE_STICKY, L.JAVA, (COOP,), True, True, (COOP,), 0, False),
    ("java, eager range: step 1 lists both, cooperative first", A.COOPERATIVE_STICKY, L.JAVA,
     ("range",), True, True, (COOP, "range"), 1, False),
    ("java, eager roundrobin keeps its own eager assignor", A.COOPERATIVE_STICKY, L.JAVA,
     ("roundrobin",), True, True, (COOP, "roundrobin"), 1, False),
    ("java, step 1 still rolling out: stay", A.COOPERATIVE_STICKY, L.JAVA, (COOP, "range"),
     False, True, (COOP, "range"), 1, False),
    ("java, step 1 everywhere: step 2 removes the eager one", A.COOPERATIVE_STICKY, L.JAVA,
     (COOP, "range"), True, True, (COOP,), 2, False),
    ("java 3.0 default list counts as step 1 done", A.COOPERATIVE_STICKY, L.JAVA,
     ("range", COOP), True, True, (COOP,), 2, False),
    ("java default assumed when unknown", A.COOPERATIVE_STICKY, L.JAVA, None, True, True,
     (COOP,), 2, False),
    ("librdkafka, eager: refused (cannot mix protocol types)", A.COOPERATIVE_STICKY,
     L.LIBRDKAFKA, ("range", "roundrobin"), True, True, (COOP,), 0, True),
    ("librdkafka, unknown means its eager default: refused", A.COOPERATIVE_STICKY, L.LIBRDKAFKA,
     None, True, True, (COOP,), 0, True),
    ("back to eager is one rollout", A.RANGE, L.LIBRDKAFKA, (COOP,), True, True, ("range",), 0,
     False),
    ("custom assignor: one rollout", A.COOPERATIVE_STICKY, L.JAVA, ("com.example.MyAssignor",),
     True, True, (COOP,), 0, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("wanted", "library", "running", "rolled_out", "active", "rendered", "step", "refused"),
    [case[1:] for case in STEPS],
    ids=[case[0] for case in STEPS],
)
def test_kip429_upgrade_path(
    wanted: A,
    library: L,
    running: tuple[str, ...] | None,
    rolled_out: bool,
    active: bool,
    rendered: tuple[str, ...],
    step: int,
    refused: bool,
) -> None:
    plan = plan_assignor(wanted, library, running, rolled_out=rolled_out, group_active=active)
    assert (plan.strategies, plan.step, plan.problem is not None) == (rendered, step, refused)
    if step:
        assert f"step {step} of 2" in (plan.note or "")


def test_two_rollouts_from_range_to_cooperative_sticky() -> None:
    """Walk the whole path: each plan's output is the next plan's running list."""
    running: tuple[str, ...] = ("range",)
    seen = []
    # After each render the new list is rolling out; the second look sees it everywhere.
    for rolled_out in (True, False, True, False, True):
        plan = plan_assignor(
            A.COOPERATIVE_STICKY, L.JAVA, running, rolled_out=rolled_out, group_active=True
        )
        seen.append((plan.strategies, plan.step))
        running = plan.strategies
    assert seen == [
        ((COOP, "range"), 1),  # the first rollout starts
        ((COOP, "range"), 1),  # ... and is still on its way
        ((COOP,), 2),  # it reached every pod: the second rollout removes range
        ((COOP,), 0),  # done, whether or not the second has finished
        ((COOP,), 0),
    ]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("range,roundrobin", ("range", "roundrobin")),
        (" Cooperative-Sticky , range ", (COOP, "range")),
        (
            "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            ("range", COOP),
        ),
        ("RangeAssignor", ("range",)),
        ("com.example.MyAssignor", ("com.example.MyAssignor",)),
        ("", ()),
        (None, ()),
    ],
)
def test_strategies_are_read_in_either_spelling(text: str | None, names: tuple[str, ...]) -> None:
    assert parse_strategy(text) == names


def test_java_gets_class_names() -> None:
    assert render_strategy((COOP, "range"), L.LIBRDKAFKA) == "cooperative-sticky,range"
    assert render_strategy((COOP, "range"), L.JAVA) == (
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor,"
        "org.apache.kafka.clients.consumer.RangeAssignor"
    )
