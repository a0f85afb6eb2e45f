"""bench/chaos_checker.py on synthetic event streams (no lab): each invariant is shown to hold
on a clean stream and to be broken by the stream that breaks it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from chaos_checker import Checker, Event, Limits, percentile, table  # noqa: E402

MIB = 1024 * 1024


def ev(t: float, kind: str, fleet: str = "f", **data: Any) -> Event:
    return Event(t, kind, fleet, data)


def rules(checker: Checker) -> list[str]:
    return [violation.rule for violation in checker.violations]


def rollout_stream(done_at: float, updated: bool = True) -> list[Event]:
    return [
        ev(0, "rollout", rolloutId="r1", phase="Completed", updated=True),
        ev(10, "change", change="rollout", revision="2"),
        ev(12, "rollout", rolloutId="r2", phase="BatchJoining", updated=False),
        ev(done_at, "rollout", rolloutId="r2", phase="Completed", updated=updated),
    ]


def test_a_rollout_that_completes_is_timed_and_clean() -> None:
    checker = Checker()
    checker.feed_all(rollout_stream(70))
    checker.finish(100)
    assert checker.violations == []
    figures = checker.figures()
    assert figures["rollouts_completed"] == 1
    assert figures["rollout_s_without_fault"] == {"n": 1, "p50": 60, "p99": 60, "max": 60}
    assert figures["rollout_s_with_fault"]["n"] == 0


def test_completed_is_not_done_until_every_pod_runs_the_new_template() -> None:
    checker = Checker()
    checker.feed_all(rollout_stream(70, updated=False))
    checker.finish(100)
    assert rules(checker) == ["rollout-unfinished"]


def test_the_completed_rollout_of_before_the_change_does_not_count() -> None:
    checker = Checker()
    checker.feed_all(rollout_stream(0)[:2])
    checker.feed(ev(11, "rollout", rolloutId="r1", phase="Completed", updated=True))
    checker.finish(100)
    assert rules(checker) == ["rollout-unfinished"]


def test_a_rollout_past_its_limit_is_stalled_once() -> None:
    checker = Checker(Limits(rollout_s=100))
    checker.feed_all(rollout_stream(12)[:3])
    for t in range(20, 200, 10):
        checker.feed(ev(t, "rollout", rolloutId="r2", phase="BatchJoining", updated=False))
    assert rules(checker) == ["rollout-stalled"]
    assert checker.violations[0].t == 120


def test_a_rollout_overlapped_by_a_fault_is_counted_apart() -> None:
    checker = Checker()
    stream = rollout_stream(90)
    stream.insert(2, ev(20, "fault", "", fault="broker-kill", phase="start", id=1))
    stream.insert(3, ev(40, "fault", "", fault="broker-kill", phase="end", id=1))
    checker.feed_all(stream)
    figures = checker.figures()
    assert figures["rollout_s_with_fault"]["n"] == 1
    assert figures["rollout_s_without_fault"]["n"] == 0
    assert figures["faults"] == {"broker-kill": 1}


def test_a_newer_template_supersedes_the_pending_one() -> None:
    checker = Checker()
    checker.feed_all(rollout_stream(0)[:2])
    checker.feed(ev(20, "change", change="rollout", revision="3"))
    checker.feed(ev(80, "rollout", rolloutId="r3", phase="Completed", updated=True))
    checker.finish(100)
    assert checker.violations == []
    assert checker.figures()["rollouts_superseded"] == 1


def test_a_pod_at_the_latest_revision_deleted_is_replaced_twice() -> None:
    checker = Checker()
    checker.feed(ev(10, "change", change="rollout", revision="2"))
    checker.feed(ev(20, "pod_gone", pod="f-0", uid="u-old", revision="1"))  # the rollout's
    checker.feed(ev(30, "pod_new", pod="f-0", uid="u-new", revision="2"))
    assert checker.violations == []
    checker.feed(ev(60, "pod_gone", pod="f-0", uid="u-new", revision="2"))
    assert rules(checker) == ["replaced-twice"]
    assert "f-0" in checker.violations[0].what


def test_a_scale_down_explains_a_pod_of_the_latest_revision_gone() -> None:
    checker = Checker()
    checker.feed(ev(10, "change", change="rollout", revision="2"))
    checker.feed(ev(50, "change", change="scale", replicas=2, previous=3))
    checker.feed(ev(60, "pod_gone", pod="f-2", uid="u", revision="2"))
    assert checker.violations == []


def test_a_gate_silent_past_its_bypass_is_told_once_per_pod() -> None:
    checker = Checker(Limits(bypass_s=120, bypass_slack_s=30))
    checker.feed(ev(10, "gate", pod="f-0", uid="u", silent=140))
    assert checker.violations == []
    checker.feed(ev(30, "gate", pod="f-0", uid="u", silent=160))
    checker.feed(ev(32, "gate", pod="f-0", uid="u", silent=162))
    assert rules(checker) == ["gate-past-bypass"]


def test_a_lost_message_is_a_violation_and_duplicates_are_counted() -> None:
    checker = Checker()
    checker.feed(ev(100, "ledger", produced=1000, lost=0, unknown=0, redeliveries=12))
    assert checker.violations == []
    checker.feed(ev(100, "ledger", fleet="g", produced=500, lost=1, unknown=0, redeliveries=0))
    assert rules(checker) == ["message-lost"]
    figures = checker.figures()
    assert (figures["produced"], figures["lost"], figures["redeliveries"]) == (1500, 1, 12)


def group(t: float, status: Any, broker: Any, fresh: bool = True, **rest: Any) -> Event:
    return ev(t, "group", status=status, broker=broker, fresh=fresh, **rest)


def test_status_must_agree_with_the_broker_within_an_observe_interval_once_quiet() -> None:
    checker = Checker(Limits(observe_s=2, agree_slack_s=10))
    # During faults nothing is compared.
    checker.feed(group(5, [3, "Stable"], None))
    checker.feed(ev(10, "quiet", ""))
    checker.feed(group(12, [2, "Stable"], [3, "Stable"]))
    checker.feed(group(20, [2, "Stable"], [3, "Stable"]))
    assert checker.violations == []
    checker.feed(group(23, [3, "Stable"], [3, "Stable"]))
    checker.feed(group(40, [3, "Stable"], [3, "Stable"], fresh=False))
    checker.feed(group(53, [3, "Stable"], [3, "Stable"], fresh=False))
    assert rules(checker) == ["status-disagrees"]


def test_a_broker_change_restarts_the_allowance() -> None:
    checker = Checker(Limits(observe_s=2, agree_slack_s=10))
    checker.feed(ev(0, "quiet", ""))
    checker.feed(group(5, [3, "Stable"], [3, "Stable"]))
    checker.feed(group(30, [3, "Stable"], [2, "PreparingRebalance"]))
    checker.feed(group(40, [3, "Stable"], [2, "PreparingRebalance"]))
    checker.feed(group(41, [2, "PreparingRebalance"], [2, "PreparingRebalance"]))
    assert checker.violations == []


def test_every_sidecar_back_in_the_group_at_the_end() -> None:
    back = Checker()
    back.feed(group(5, [3, "Stable"], None, sidecars=None))  # during faults: not looked at
    back.feed(ev(10, "quiet", ""))
    back.feed(group(12, [3, "Stable"], [3, "Stable"], sidecars=[2, 3]))  # one still rejoining
    back.feed(group(14, [3, "Stable"], [3, "Stable"], sidecars=[3, 3]))
    back.finish(20)
    assert back.violations == []
    missing = Checker()
    missing.feed(ev(10, "quiet", ""))
    missing.feed(group(12, [3, "Stable"], [3, "Stable"], sidecars=[3, 3]))
    missing.feed(group(14, [3, "Stable"], [3, "Stable"], sidecars=[2, 3]))
    missing.finish(20)
    assert rules(missing) == ["sidecar-missing"]
    assert "2 sidecars members of the group for 3 pods" in missing.violations[0].what


def test_degraded_after_its_cause_is_gone() -> None:
    checker = Checker(Limits(degraded_grace_s=60))
    checker.feed(ev(0, "fault", "", fault="broker-kill", phase="start", id=1))
    checker.feed(group(10, None, None, degraded=True, reason="CoordinatorUnavailable"))
    checker.feed(group(200, None, None, degraded=True, reason="CoordinatorUnavailable"))
    assert checker.violations == []  # the fault is still on
    checker.feed(ev(210, "fault", "", fault="broker-kill", phase="end", id=1))
    checker.feed(group(260, None, None, degraded=True, reason="CoordinatorUnavailable"))
    assert checker.violations == []
    checker.feed(group(275, None, None, degraded=True, reason="CoordinatorUnavailable"))
    checker.feed(group(280, None, None, degraded=True, reason="CoordinatorUnavailable"))
    assert rules(checker) == ["degraded-after-cause"]
    # Cleared and set again: a new span, told again when it lasts.
    checker.feed(group(290, None, None, degraded=False))
    checker.feed(group(300, None, None, degraded=True, reason="X"))
    checker.feed(group(361, None, None, degraded=True, reason="X"))
    assert rules(checker) == ["degraded-after-cause", "degraded-after-cause"]


def test_rebalances_counted_from_the_generation() -> None:
    checker = Checker()
    checker.feed(ev(0, "change", change="scale", replicas=4, previous=3))
    for t, generation in ((1, 5), (2, 5), (3, 7), (4, 8)):
        checker.feed(group(t, None, None, generation=generation))
    assert checker.figures()["rebalances"] == 3
    assert checker.figures()["rebalances_per_change"] == 3.0


def proc_stream(pid: int, rss: list[float], fds: list[int], every: float = 10.0) -> list[Event]:
    return [
        ev(i * every, "proc", "", replica="a", pid=pid, rss=int(r * MIB), fds=f)
        for i, (r, f) in enumerate(zip(rss, fds, strict=True))
    ]


def test_operator_memory_and_files_flat() -> None:
    flat = Checker()
    flat.feed_all(proc_stream(1, [100 + (i % 3) for i in range(60)], [40] * 60))
    assert flat.finish(600) == []
    growing = Checker()
    growing.feed_all(proc_stream(2, [100 + 2 * i for i in range(60)], [40 + i for i in range(60)]))
    assert sorted(v.rule for v in growing.finish(600)) == [
        "operator-files-grow",
        "operator-memory-grows",
    ]
    # A process too short-lived to judge (restarted by a fault) is not judged.
    short = Checker()
    short.feed_all(proc_stream(3, [100 + 20 * i for i in range(10)], [40] * 10))
    assert short.finish(100) == []


def test_percentile_and_table() -> None:
    assert percentile([3, 1, 2], 50) == 2
    assert percentile(list(range(1, 101)), 99) == 99
    checker = Checker()
    checker.feed_all(rollout_stream(70))
    checker.feed(ev(100, "ledger", produced=10, lost=1, unknown=0, redeliveries=0))
    text = table(checker.figures(), checker.violations, 7)
    assert "1 of 1 template changes" in text
    assert "seed 7 t=100s message-lost f" in text


def test_an_operator_exit_is_listed_in_the_table_not_as_a_violation() -> None:
    checker = Checker()
    checker.feed(ev(40, "exit", replica="first", code=1))
    figures = checker.figures()
    assert figures["operator_exits"] == [{"t": 40, "replica": "first", "code": 1}]
    assert checker.violations == []
    text = table(figures, checker.violations, 1)
    assert "1 (first at 40 s (1); each started again)" in text and "operator exits" in text
