"""Pod records from what Kubernetes says, and the stop-the-world estimate of rebalances of a
group that was consuming: plain tables, no I/O but a store in memory."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.planning.report_samples import member_report as sample_report

from rebalancer.clients.recording import HistoryRecorder, recorded_keys
from rebalancer.learning.history_table import VERSION_KEY, events_to_table, read_history
from rebalancer.planning.history_pods import (
    PAIR_WAIT_SECONDS,
    PodRecordContext,
    PodTracking,
    pod_lifecycle,
    track_pods,
)
from rebalancer.planning.history_records import (
    JoinContext,
    JoinTracking,
    RecordedJoin,
    enrich_rebalances,
)
from rebalancer.structs.brokers import TopicPartition
from rebalancer.structs.gates import GateState
from rebalancer.structs.history import RebalanceCause, RebalanceEvent, RecordType, SettingsInForce
from rebalancer.structs.history_pods import PodLifecycle
from rebalancer.structs.history_stalls import PartitionStalls
from rebalancer.structs.reports import MemberReport, ReportBook, ReportEvent
from rebalancer.structs.workloads import PodView

T0 = 1_700_000_000.0
CONTEXT = PodRecordContext(
    JoinContext("shop", "orders", "orders", "k:9092"), 3, "Stable", 6, SettingsInForce()
)


def pod(name: str = "orders-0", uid: str = "u0", **life: object) -> PodView:
    return PodView(
        name=name,
        uid=uid,
        ordinal=0,
        updated=True,
        gate=GateState.NONE,
        gate_batch=None,
        held_at=None,
        ready=True,
        terminating=False,
        created_at=T0,
        lifecycle=PodLifecycle(container="consumer", **life),  # type: ignore[arg-type]
    )


def facts(events: list[RebalanceEvent]) -> list[tuple[str, str, float, str | None, str | None]]:
    return [
        (e.record_type.value, str(e.member), e.detected_at, e.departure, e.record_key)
        for e in events
    ]


def look(
    tracking: PodTracking,
    pods: list[PodView] | None,
    now: float,
    joins: tuple[RecordedJoin, ...] = (),
) -> tuple[list[RebalanceEvent], PodTracking]:
    return track_pods(tracking, pods, now=now, context=CONTEXT, joins=joins)


def test_a_start_waits_for_its_join_and_shares_its_batch() -> None:
    events, tracking = look(PodTracking(), [pod(started_at=T0 + 1)], T0 + 2)
    assert events == [] and len(tracking.waiting) == 1
    join = RecordedJoin("orders-0", 4, T0 + 3.5, T0 + 3.5, "start-1700000003500", None)
    events, tracking = look(tracking, None, T0 + 4, (join,))
    assert facts(events) == [("pod-start", "orders-0", T0 + 1, None, "pod-start/u0/0")]
    assert events[0].source == "kubernetes" and events[0].batch_id == "start-1700000003500"
    assert tracking.waiting == ()
    # Looking again at the same run writes nothing.
    events, tracking = look(tracking, [pod(started_at=T0 + 1)], T0 + 10, (join,))
    assert events == []


def test_a_start_without_a_join_is_written_unpaired_after_the_wait() -> None:
    _, tracking = look(PodTracking(), [pod(started_at=T0)], T0 + 1)
    events, tracking = look(tracking, None, T0 + PAIR_WAIT_SECONDS - 1)
    assert events == []
    events, tracking = look(tracking, None, T0 + PAIR_WAIT_SECONDS)
    assert facts(events) == [("pod-start", "orders-0", T0, None, "pod-start/u0/0")]
    assert events[0].batch_id is None and tracking.waiting == ()


@pytest.mark.parametrize(
    ("life", "expected"),
    [
        # Crashed and restarted by the kubelet: the old run's stop, the new run's start.
        (
            {"restarts": 1, "started_at": T0 + 20, "previous_finished_at": T0 + 15,
             "previous_exit_code": 137},
            [("pod-stop", "orders-0", T0 + 15, "crash", "pod-stop/u0/0"),
             ("pod-start", "orders-0", T0 + 20, None, "pod-start/u0/1")],
        ),
        # Exited 0 and restarted: it left on its own.
        (
            {"restarts": 1, "started_at": T0 + 20, "previous_finished_at": T0 + 15,
             "previous_exit_code": 0},
            [("pod-stop", "orders-0", T0 + 15, "leave", "pod-stop/u0/0"),
             ("pod-start", "orders-0", T0 + 20, None, "pod-start/u0/1")],
        ),
        # Being deleted: it was told to stop.
        (
            {"started_at": T0, "deleting_at": T0 + 30},
            [("pod-stop", "orders-0", T0 + 30, "leave", "pod-stop/u0/0")],
        ),
        # Crashed, then deleted: the crash came first.
        (
            {"started_at": T0, "finished_at": T0 + 25, "exit_code": 1, "deleting_at": T0 + 30},
            [("pod-stop", "orders-0", T0 + 25, "crash", "pod-stop/u0/0")],
        ),
    ],
)  # fmt: skip
def test_stops_and_restarts_from_the_container_status(
    life: dict[str, object], expected: list[tuple[str, str, float, str | None, str | None]]
) -> None:
    _, tracking = look(PodTracking(), [pod(started_at=T0)], T0 + 1)
    events, tracking = look(tracking, [pod(**life)], T0 + 40)
    later, tracking = look(tracking, None, T0 + 40 + PAIR_WAIT_SECONDS)
    first = ("pod-start", "orders-0", T0, None, "pod-start/u0/0")
    by_time = sorted(facts(events + later), key=lambda fact: fact[2])
    assert by_time == sorted([first, *expected], key=lambda fact: fact[2])
    # Looking again, and the pod's disappearance after its stop, write nothing more.
    again, tracking = look(tracking, [pod(**life)], T0 + 400)
    gone, tracking = look(tracking, [], T0 + 500)
    assert again == []
    assert [e for e in gone if e.record_type is RecordType.POD_STOP] == (
        [] if expected[-1][0] == "pod-stop" else gone
    )


def test_the_first_runs_start_says_when_the_pod_reached_its_gate() -> None:
    """The planner's measured arrivals (planning.startup_history) come from this moment: a
    restart does not pass the gate again, so only run 0 carries it."""
    gated = pod(started_at=T0 + 9, gate_started_at=T0 + 2)
    _, tracking = look(PodTracking(), [gated], T0 + 10)
    events, tracking = look(tracking, None, T0 + 10 + PAIR_WAIT_SECONDS)
    assert [(e.detected_at, e.started_at) for e in events] == [(T0 + 9, T0 + 2)]
    restarted = pod(
        restarts=1, started_at=T0 + 60, previous_finished_at=T0 + 50, gate_started_at=T0 + 2
    )
    events, tracking = look(tracking, [restarted], T0 + 61)
    later, _ = look(tracking, None, T0 + 61 + PAIR_WAIT_SECONDS)
    starts = [e for e in events + later if e.record_type is RecordType.POD_START]
    assert [(e.record_key, e.started_at) for e in starts] == [("pod-start/u0/1", None)]
    ungated, _ = look(PodTracking(), [pod(started_at=T0)], T0 + PAIR_WAIT_SECONDS)
    assert [e.started_at for e in ungated] == [None]


def test_a_pod_deleted_while_its_gate_held_it_never_started_nor_stopped() -> None:
    _, tracking = look(PodTracking(), [pod()], T0 + 1)
    events, tracking = look(tracking, [pod(deleting_at=T0 + 30)], T0 + 40)
    gone, tracking = look(tracking, [], T0 + 50)
    assert events == [] and gone == [] and tracking.waiting == ()


def test_a_pod_gone_between_two_looks_stopped_at_the_look_that_missed_it() -> None:
    _, tracking = look(PodTracking(), [pod(started_at=T0), pod("orders-1", "u1")], T0 + 1)
    events, tracking = look(tracking, [], T0 + 50)
    stops = [e for e in events if e.record_type is RecordType.POD_STOP]
    # orders-1 never ran (held at its gate): no stop for it.
    assert facts(stops) == [("pod-stop", "orders-0", T0 + 50, None, "pod-stop/u0/0")]
    assert dict(tracking.pods) == {}, "gone pods are forgotten: memory holds the pods present"


def test_a_vanished_pod_whose_member_said_it_stopped_left_then() -> None:
    _, tracking = look(PodTracking(), [pod(started_at=T0)], T0 + 1)
    events, _ = track_pods(
        tracking, [], now=T0 + 50, context=CONTEXT, joins=(), stopped={"orders-0": T0 + 44.5}
    )
    stops = [e for e in events if e.record_type is RecordType.POD_STOP]
    assert facts(stops) == [("pod-stop", "orders-0", T0 + 44.5, "leave", "pod-stop/u0/0")]
    # A stopped report from an earlier run of the same member says nothing about this one.
    events, _ = track_pods(
        tracking, [], now=T0 + 50, context=CONTEXT, joins=(), stopped={"orders-0": T0 - 30}
    )
    stops = [e for e in events if e.record_type is RecordType.POD_STOP]
    assert facts(stops) == [("pod-stop", "orders-0", T0 + 50, None, "pod-stop/u0/0")]


def test_the_lifecycle_comes_from_the_consumer_container_not_the_sidecar() -> None:
    raw = {
        "metadata": {"deletionTimestamp": "2023-11-14T22:14:00Z"},
        "spec": {"containers": [{"name": "rebalancer-sidecar"}, {"name": "consumer"}]},
        "status": {
            "startTime": "2023-11-14T22:13:20Z",
            "containerStatuses": [
                {"name": "rebalancer-sidecar", "restartCount": 5,
                 "state": {"running": {"startedAt": "2023-11-14T22:13:21Z"}}},
                {"name": "consumer", "restartCount": 2,
                 "state": {"running": {"startedAt": "2023-11-14T22:13:30Z"}},
                 "lastState": {"terminated": {"exitCode": 137,
                                              "finishedAt": "2023-11-14T22:13:28Z"}}},
            ],
        },
    }  # fmt: skip
    raw["status"]["initContainerStatuses"] = [
        {"name": "rebalancer-gate",
         "state": {"terminated": {"exitCode": 0, "startedAt": "2023-11-14T22:13:22Z"}}},
    ]  # fmt: skip
    assert pod_lifecycle(raw) == PodLifecycle(
        container="consumer",
        scheduled_at=T0,
        restarts=2,
        started_at=T0 + 10,
        previous_finished_at=T0 + 8,
        previous_exit_code=137,
        deleting_at=T0 + 40,
        gate_started_at=T0 + 2,
    )
    assert pod_lifecycle({}) == PodLifecycle()


# --- stop-the-world -------------------------------------------------------------------------

P = [TopicPartition("t", n) for n in range(4)]


def member_report(
    host: str,
    event: ReportEvent,
    generation: int,
    at: float,
    partitions: list[TopicPartition],
    member_id: str | None = None,
) -> MemberReport:
    return sample_report(host, generation, at, event, partitions=partitions, member_id=member_id)


A, R, H, S = ReportEvent.ASSIGNED, ReportEvent.REVOKED, ReportEvent.HEARTBEAT, ReportEvent.STOPPED
CONSUMING = [("a", A, 1, 0.0, P[:2]), ("b", A, 1, 0.0, P[2:])]


@pytest.mark.parametrize(
    ("reports", "generation", "expected"),
    [
        # A cold start: nobody owned the partitions before; not known from the reports.
        (CONSUMING, 1, None),
        # a leaves (revokes at close) and b takes its two partitions 2.5 s later.
        ([*CONSUMING, ("a", R, 1, 10.0, []), ("a", S, 1, 10.1, []), ("b", A, 2, 12.5, P)],
         2, 5.0),
        # The same with b's report arriving before a's.
        ([*CONSUMING, ("b", A, 2, 12.5, P), ("a", R, 1, 10.0, [])], 2, 5.0),
        # a crashed: nothing gave its partitions up: unknown.
        ([*CONSUMING, ("b", A, 2, 40.0, P)], 2, None),
        # Eager: everyone revokes everything, and gets its share back a second later.
        ([*CONSUMING, ("a", R, 1, 10.0, []), ("b", R, 1, 10.0, []),
          ("a", A, 2, 11.0, P[:2]), ("b", A, 2, 11.0, P[2:])], 2, 4.0),
        # Cooperative: c joins; gen 2 moves nothing yet (a revokes t-1), gen 3 hands it over.
        ([*CONSUMING, ("a", A, 2, 9.9, P[:2]), ("b", A, 2, 9.9, P[2:]),
          ("a", R, 2, 10.0, P[:1]), ("c", A, 3, 11.5, [P[1]]), ("a", A, 3, 11.5, P[:1]),
          ("b", A, 3, 11.5, P[2:])], 3, 1.5),
        # ... but only once every member reported the generation: c's share is not known yet.
        ([*CONSUMING, ("a", A, 2, 9.9, P[:2]), ("b", A, 2, 9.9, P[2:]),
          ("a", R, 2, 10.0, P[:1]), ("a", A, 3, 11.5, P[:1]), ("b", A, 3, 11.5, P[2:])],
         3, None),
        ([*CONSUMING, ("a", A, 2, 9.9, P[:2]), ("b", A, 2, 9.9, P[2:]),
          ("a", R, 2, 10.0, P[:1]), ("c", A, 3, 11.5, [P[1]])], 2, 0.0),
        # Known from heartbeats only (the operator started meanwhile), then a clean leave.
        ([("a", H, 4, 0.0, P[:2]), ("b", H, 4, 0.0, P[2:]), ("a", R, 4, 10.0, []),
          ("b", A, 5, 13.0, P)], 5, 6.0),
        # a restarted under a new member id: what its old incarnation held was never given up.
        ([*CONSUMING, ("b", A, 2, 20.0, [*P[2:], P[1]]),
          ("a", A, 2, 20.0, [P[0]], "a-2")], 2, None),
        # ... also when it gets back what it held: it did not hold it while it was down.
        ([*CONSUMING, ("a", A, 2, 20.0, P[:2], "a-2"), ("b", A, 2, 20.0, P[2:])], 2, None),
    ],
)  # fmt: skip
def test_partition_seconds_without_an_owner_per_generation(
    reports: list[tuple[object, ...]], generation: int, expected: float | None
) -> None:
    book = ReportBook()
    for host, event, gen, at, parts, *incarnation in reports:
        member_id = str(incarnation[0]) if incarnation else None
        book.add(member_report(str(host), event, gen, at, parts, member_id))  # type: ignore[arg-type]
    tally = book.stalls.tallies().get(generation)
    assert tally is not None
    assert tally.estimate(len(P)) == (None if expected is None else pytest.approx(expected))


def test_stall_tallies_are_bounded_and_members_that_stop_reporting_are_dropped() -> None:
    stalls = PartitionStalls(max_generations=3)
    for generation in range(10):
        stalls.note("a", incarnation="a-1", assigned=True, generation=generation,
                    partitions=P[: generation % 2 + 1], at=float(generation))  # fmt: skip
    assert sorted(stalls.tallies()) == [7, 8, 9]
    stalls.forget([])
    stalls.note("b", incarnation="b-1", assigned=True, generation=10, partitions=P, at=20.0)
    assert stalls.tallies()[10].estimate(4) is None, "a's partitions: never given up"


def rebalance(generation: int, joined: tuple[str, ...], left: tuple[str, ...]) -> RebalanceEvent:
    return RebalanceEvent(
        namespace="shop", name="orders", group_id="orders", cluster="k:9092",
        generation=generation, previous_generation=generation - 1,
        cause=RebalanceCause.MEMBER_LEFT, detected_at=T0, started_at=None, members=1,
        joined=joined, left=left, source="member-reports", state="Stable",
    )  # fmt: skip


def test_rebalances_of_a_consuming_group_carry_the_estimate() -> None:
    book = ReportBook()
    for host, event, gen, at, parts in [
        *CONSUMING,
        ("a", R, 1, T0, []),
        ("b", A, 2, T0 + 2.0, P),
    ]:
        book.add(member_report(str(host), event, gen, at, parts))  # type: ignore[arg-type]
    sightings = book.generations_after(0)
    (left,) = enrich_rebalances(
        [rebalance(2, (), ("a",))], sightings, JoinTracking(), SettingsInForce(), 4,
        book.stalls.tallies(),
    )  # fmt: skip
    assert left.stop_the_world_partition_s == pytest.approx(4.0)
    # Without the tallies (no member reported assignments) it stays unknown.
    (unknown,) = enrich_rebalances(
        [rebalance(2, (), ("a",))], sightings, JoinTracking(), SettingsInForce(), 4
    )
    assert unknown.stop_the_world_partition_s is None
    # A cold start keeps its estimate: every partition waited the whole time to Stable.
    cold = JoinTracking(recent=(RecordedJoin("a", 1, 0.0, 0.0), RecordedJoin("b", 1, 0.0, 0.0)))
    (first,) = enrich_rebalances(
        [replace(rebalance(1, ("a", "b"), ()), previous_generation=None)],
        sightings, cold, SettingsInForce(), 4, book.stalls.tallies(),
    )  # fmt: skip
    assert first.stop_the_world_partition_s == pytest.approx(0.0)


def test_record_keys_are_read_back_from_the_store_and_old_files_have_none() -> None:
    root = f"memory://history-{uuid.uuid4().hex}"
    start = replace(
        rebalance(3, (), ()), record_type=RecordType.POD_START, member="orders-0",
        record_key="pod-start/u0/0",
    )  # fmt: skip
    asyncio.run(HistoryRecorder(root).record([start, rebalance(4, (), ())]))
    assert recorded_keys(root, "shop", ["2023-11-14"]) == {"pod-start/u0/0"}
    assert recorded_keys(root, "shop", ["2023-11-15"]) == set()
    assert recorded_keys(root, "billing", ["2023-11-14"]) == set()


def test_a_members_stopped_report_outlives_its_next_start() -> None:
    book = ReportBook()
    book.add(member_report("a", A, 1, 0.0, P))
    book.add(member_report("a", S, 1, 10.0, []))
    # The pod's replacement reports under the same name before the operator looks again.
    book.add(member_report("a", A, 2, 12.0, P, member_id="a-2"))
    assert book.stopped_at == {"a": 10.0}
    assert [r.identity for r in book.live_members(13.0, 60.0)] == ["a"]
    assert book.stopped_at == {"a": 10.0}
    book.live_members(100.0, 60.0)
    assert book.stopped_at == {}, "forgotten with the member"


def test_files_from_before_record_keys_read_beside_newer_ones(tmp_path: Path) -> None:
    older = replace(rebalance(3, (), ()), record_key=None)
    table = events_to_table([older]).drop_columns(["record_key", "date", "namespace"])
    folder = tmp_path / "date=2023-11-14" / "namespace=shop"
    folder.mkdir(parents=True)
    pq.write_table(
        table.cast(table.schema.with_metadata({VERSION_KEY: b"3"})), folder / "a.parquet"
    )
    start = replace(
        rebalance(4, (), ()), record_type=RecordType.POD_START, member="orders-0",
        record_key="pod-start/u0/0",
    )  # fmt: skip
    asyncio.run(HistoryRecorder(tmp_path).record([start]))
    keys = {(r["record_type"], r["record_key"]) for r in read_history(tmp_path)}
    assert keys == {("rebalance", None), ("pod-start", "pod-start/u0/0")}
    assert recorded_keys(tmp_path, "shop", ["2023-11-14"]) == {"pod-start/u0/0"}


def test_the_first_look_of_a_process_skips_what_an_earlier_one_wrote() -> None:
    from types import SimpleNamespace

    from rebalancer.reconcilers.learning import PodWatch

    root = f"memory://history-{uuid.uuid4().hex}"
    recorder = HistoryRecorder(root)
    _, earlier = look(PodTracking(), [pod(started_at=T0), pod("orders-1", "u1", started_at=T0)], T0)
    first, _ = look(earlier, None, T0 + PAIR_WAIT_SECONDS)
    asyncio.run(recorder.record(first[:1]))  # the earlier process wrote orders-0's start only
    # A new process: both starts again at its first look (one written, one waiting).
    events, tracking = look(
        PodTracking(),
        [pod(started_at=T0), pod("orders-1", "u1", started_at=T0 + PAIR_WAIT_SECONDS)],
        T0 + PAIR_WAIT_SECONDS + 1,
    )
    watch = PodWatch(tracking=tracking)
    deps = SimpleNamespace(recorder=recorder)
    kept = asyncio.run(watch._unwritten(deps, "shop", events))  # type: ignore[arg-type]
    assert kept == [] and [e.record_key for e in watch.tracking.waiting] == ["pod-start/u1/0"]


def test_with_no_history_store_the_pods_are_not_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from rebalancer.clients.workload_cache import WorkloadCache
    from rebalancer.reconcilers import learning

    async def listed(*_: object) -> None:
        raise AssertionError("the pods were listed with nowhere to record them")

    monkeypatch.setattr(learning, "read_workload", listed)
    # The workload as the watch told it: no request at all (kube is None).
    workloads = WorkloadCache(watched={"StatefulSet"})
    workloads.seen("shop", "StatefulSet", "orders", 3)
    workloads.verified.add(("workload", "shop", "StatefulSet", "orders"))  # read at its first look
    spec = SimpleNamespace(
        workload=SimpleNamespace(kind=SimpleNamespace(value="StatefulSet"), name="orders"),
        policy=SimpleNamespace(history_enabled=True),
    )
    deps = SimpleNamespace(recorder=HistoryRecorder(None), kube=None, workloads=workloads)
    looked = asyncio.run(
        learning.PodWatch().look(deps, "shop", spec, context=None, joins=())  # type: ignore[arg-type]
    )
    assert looked == ([], 3)
    assert (workloads.hits, workloads.reads) == (1, 0)
