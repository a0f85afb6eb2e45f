"""What the actor writes for each action the ledger decides (structs.enforcement outcomes)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rebalancer.clients.group_visiting import GroupVisitor
from rebalancer.planning.group_levers import Lever, LeverChoice
from rebalancer.sidecar.actor import Actor, Changes, GroupStates, InFlight
from rebalancer.sidecar.ledger import Action, RequestEntry
from rebalancer.sidecar.settings import load_settings
from rebalancer.structs.enforcement import EnforceOutcome, EnforceRequest, EnforceStatus

ENV = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
    "KAFKA_GROUP_ID": "orders",
    "REBALANCER_SIDECAR_TOKEN_FILE": "/var/run/token",
    "POD_NAME": "orders-0",
}


class Writer:
    def __init__(self) -> None:
        self.written: list[tuple[str, Any]] = []

    async def write(self, key: str, record: Any) -> None:
        self.written.append((key, record))


class Member:
    def __init__(self) -> None:
        self.flips = 0

    def flip(self) -> None:
        self.flips += 1


def no_visitor() -> GroupVisitor:
    raise AssertionError("these actions make no visit")


def agent(lever: Lever = Lever.REJOIN) -> tuple[Actor, Writer, Member]:
    writer, member = Writer(), Member()
    sidecar = Actor(
        load_settings(env=ENV),
        member,  # type: ignore[arg-type]
        LeverChoice(lever),
        writer=writer,  # type: ignore[arg-type]
        changes=Changes(asyncio.get_running_loop()),
        # Asked by the actor's loop only, which these tests do not run.
        states=GroupStates(None, "orders"),  # type: ignore[arg-type]
        visiting=no_visitor,
    )
    return sidecar, writer, member


def entry(retry: bool = False, outcome: EnforceOutcome | None = None) -> RequestEntry:
    request = EnforceRequest("r1", "test", retry, "orders-1-sidecar", time.time())
    return RequestEntry(request, offset=3, outcome=outcome)


def only_outcome(writer: Writer) -> EnforceOutcome:
    [(key, outcome)] = writer.written
    assert key == "r1" and isinstance(outcome, EnforceOutcome)
    assert outcome.actor == "orders-0-sidecar"
    return outcome


async def test_waiting_writes_nothing() -> None:
    sidecar, writer, member = agent()
    await sidecar._perform(entry(), Action.WAIT, 7)
    assert writer.written == [] and member.flips == 0


@pytest.mark.parametrize(
    ("retry", "words"),
    [(True, "; retrying once the group is Stable"), (False, "; it does the same job")],
)
async def test_a_rebalance_under_way_is_reported(retry: bool, words: str) -> None:
    sidecar, writer, _ = agent()
    await sidecar._perform(entry(retry), Action.REPORT_IN_PROGRESS, 7)
    outcome = only_outcome(writer)
    assert outcome.status is EnforceStatus.IN_PROGRESS
    assert outcome.message == "a rebalance is already in progress" + words
    assert (outcome.from_generation, outcome.will_retry) == (7, retry)


async def test_enforcing_rejoins_and_keeps_the_request_in_flight() -> None:
    sidecar, writer, member = agent()
    await sidecar._perform(entry(), Action.ENFORCE, 7)
    outcome = only_outcome(writer)
    assert outcome.status is EnforceStatus.ENFORCING
    assert outcome.message == "rejoining with changed subscription metadata"
    assert outcome.from_generation == 7
    assert member.flips == 1
    assert sidecar._in_flight is not None and sidecar._in_flight.request_id == "r1"


async def test_a_visit_names_no_generation_and_does_not_rejoin() -> None:
    sidecar, writer, member = agent(Lever.VISIT)
    visits: list[str] = []

    async def visit(entry: RequestEntry, lever: Any) -> None:
        visits.append(entry.request.request_id)

    sidecar._visit_group = visit  # type: ignore[method-assign]
    await sidecar._perform(entry(), Action.ENFORCE, 7)
    assert sidecar._visit is not None
    await sidecar._visit
    outcome = only_outcome(writer)
    assert outcome.message.startswith("joining with the group's protocol")
    assert outcome.from_generation is None
    assert (member.flips, visits) == (0, ["r1"])


async def test_confirming_its_own_request_says_how_long_it_took() -> None:
    sidecar, writer, _ = agent()
    sidecar._in_flight = InFlight("r1", 7, time.monotonic() - 2.0)
    enforcing = EnforceOutcome("r1", EnforceStatus.ENFORCING, "x", 0.0, from_generation=7)
    await sidecar._perform(entry(outcome=enforcing), Action.CONFIRM, 8)
    outcome = only_outcome(writer)
    assert outcome.status is EnforceStatus.ENFORCED
    assert outcome.message.startswith("new generation 8 after 2.")
    assert (outcome.from_generation, outcome.generation) == (7, 8)
    assert sidecar._in_flight is None


async def test_confirming_another_actors_request_keeps_its_own_in_flight() -> None:
    sidecar, writer, _ = agent()
    sidecar._in_flight = InFlight("r0", 6, time.monotonic())
    await sidecar._perform(entry(), Action.CONFIRM, 8)
    outcome = only_outcome(writer)
    assert outcome.message == "new generation 8"
    assert (outcome.from_generation, outcome.generation) == (None, 8)
    assert sidecar._in_flight is not None and sidecar._in_flight.request_id == "r0"


async def test_expiring_names_the_time_to_live() -> None:
    sidecar, writer, _ = agent()
    await sidecar._perform(entry(), Action.EXPIRE, 7)
    outcome = only_outcome(writer)
    assert outcome.status is EnforceStatus.EXPIRED
    assert outcome.message == "no sidecar could act within 120 s"


async def test_failing_drops_the_request_in_flight() -> None:
    sidecar, writer, _ = agent()
    sidecar._in_flight = InFlight("r1", 7, time.monotonic())
    enforcing = EnforceOutcome("r1", EnforceStatus.ENFORCING, "x", 0.0, from_generation=7)
    await sidecar._perform(entry(outcome=enforcing), Action.FAIL, 7)
    outcome = only_outcome(writer)
    assert outcome.status is EnforceStatus.FAILED
    assert outcome.message == "no new generation within 120 s of the rejoin"
    assert outcome.from_generation == 7
    assert sidecar._in_flight is None
