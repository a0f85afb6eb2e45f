"""The rollout reconciler reads the group's start-ups from the history store the operator
writes, and hands them to the planner through the rollout setup."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from rebalancer.clients.recording import HistoryRecorder
from rebalancer.planning.rollout_choices import arrival_question
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.reconcilers.rollouts import (
    DAY_SECONDS,
    STARTUP_HISTORY_DAYS,
    read_startups,
    rollout_setup,
)
from rebalancer.structs.brokers import BrokerProfile
from rebalancer.structs.history import RebalanceEvent, RecordType, member_event
from rebalancer.structs.rollout_policy import RolloutPolicy
from rebalancer.structs.specs import ConsumerGroupSpec, WorkloadKind
from rebalancer.structs.workloads import WorkloadView

NOW = 1_700_000_000.0


def start_up(first: float, pods: int, prefix: str) -> list[RebalanceEvent]:
    """`pods` pods reaching their gates 2 s apart, each joining 3 s after its container."""
    events: list[RebalanceEvent] = []
    for index in range(pods):
        pod, gate = f"{prefix}-{index}", first + 2.0 * index
        start = member_event(
            RecordType.POD_START, namespace="shop", name="orders", group_id="orders",
            cluster="k:9092", member=pod, at=gate + 1, members=index, source="kubernetes",
            record_key=f"pod-start/{pod}/0",
        )  # fmt: skip
        events.append(replace(start, started_at=gate))
        events.append(replace(start, record_type=RecordType.MEMBER_JOIN, detected_at=gate + 4,
                              source="member-reports", record_key=None))  # fmt: skip
    return events


def deps_with(root: Path | None) -> Dependencies:
    return cast(Dependencies, SimpleNamespace(recorder=HistoryRecorder(root)))


def spec(history: bool = True) -> ConsumerGroupSpec:
    policy = SimpleNamespace(history_enabled=history)
    return cast(ConsumerGroupSpec, SimpleNamespace(group_id="orders", policy=policy))


async def test_the_planner_is_fed_the_start_ups_the_store_holds(tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path)
    await recorder.record(start_up(NOW - 3600, 6, "a") + start_up(NOW - 2 * DAY_SECONDS, 6, "b"))
    # Older than the days read: another image, perhaps; not measured.
    await recorder.record(start_up(NOW - (STARTUP_HISTORY_DAYS + 1) * DAY_SECONDS, 6, "old"))
    startups = await read_startups(deps_with(tmp_path), "shop", "orders", spec(), NOW)
    assert startups is not None and startups.enough
    assert (startups.starts, startups.pods) == (2, 12)
    assert startups.join_delays_ms == (3000.0,) * 12
    setup = rollout_setup(RolloutPolicy(), BrokerProfile.APACHE_KAFKA, startups=startups)
    workload = WorkloadView(
        kind=WorkloadKind.STATEFULSET, name="orders", replicas=6, current_replicas=6,
        updated_replicas=6, ready_replicas=6,
        update_revision="r1", current_revision="r1", generation=1, observed_generation=1,
    )  # fmt: skip
    question = arrival_question(setup, workload, None, 6)
    assert question.measured and question.start_ms == 3000.0
    assert question.arrivals_ms == (0.0, 2000.0, 4000.0, 6000.0, 8000.0, 10000.0)


async def test_without_a_store_or_with_history_off_nothing_is_read(tmp_path: Path) -> None:
    await HistoryRecorder(tmp_path).record(start_up(NOW - 60, 10, "a"))
    assert await read_startups(deps_with(None), "shop", "orders", spec(), NOW) is None
    off = spec(history=False)
    assert await read_startups(deps_with(tmp_path), "shop", "orders", off, NOW) is None
