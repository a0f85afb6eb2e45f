"""The rollout daemon's loop without a cluster: each step starts from the state the previous
one left, its status is written when it changed, and the next step comes as pace() says."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from tests.stopping import Stopped

from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.clients.receiving import ReportHub
from rebalancer.clients.recommending import RecommendationReader
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.operator_settings import OperatorSettings
from rebalancer.planning.rollout_states import RolloutPhase, RolloutState
from rebalancer.reconcilers import rollouts
from rebalancer.reconcilers.dependencies import Dependencies

BODY = {
    "apiVersion": "rebalancer.dev/v1alpha1",
    "kind": "ConsumerGroup",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "groupId": "web",
        "kafka": {"bootstrapServers": ["kafka:9092"]},
        "subscription": {"topics": ["web"]},
        "workload": {"kind": "Deployment", "name": "web-consumer"},
        "policy": {"rollout": {"enabled": True, "maxBatchSize": 1}},
    },
}
PHASES = [RolloutPhase.BATCH_JOINING, RolloutPhase.BATCH_SETTLING, RolloutPhase.BATCH_SETTLING]


def dependencies(tmp_path: Path) -> Dependencies:
    return Dependencies(
        settings=OperatorSettings(rollout_resting_poll_seconds=60.0),
        kube=cast(Any, None),
        pool=AdminPool(),
        hub=ReportHub(),
        recorder=HistoryRecorder(str(tmp_path / "history")),
        sidecars=SidecarClient(),
        recommender=RecommendationReader(None),
    )


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any], Stopped]:
    """A planner stepping through PHASES, then told to stop; the statuses it writes."""
    steps: list[Any] = []
    writes: list[Any] = []
    stopped = Stopped()

    async def step_once(*args: Any, **_: Any) -> tuple[RolloutState, list[Any]]:
        state: RolloutState = args[4]
        steps.append((state.phase, time.monotonic()))
        if len(steps) == len(PHASES):
            stopped.event.set()
        return RolloutState(phase=PHASES[len(steps) - 1]), []

    async def write_rollout(*args: Any) -> bool:
        writes.append(args[4].rollout["phase"])
        return True

    monkeypatch.setattr(rollouts, "_step_once", step_once)
    monkeypatch.setattr(rollouts, "_write_rollout", write_rollout)
    return steps, writes, stopped


async def test_each_step_starts_where_the_last_ended_and_comes_as_paced(
    stepped: tuple[list[Any], list[Any], Stopped], tmp_path: Path
) -> None:
    steps, writes, stopped = stepped
    deps = dependencies(tmp_path)
    body = kopf.Body(BODY)
    await asyncio.wait_for(
        rollouts._roll_out_forever(deps, body, "shop", "web", cast(kopf.DaemonStopped, stopped)),
        10,
    )
    assert [phase for phase, _ in steps] == [
        RolloutPhase.IDLE,
        RolloutPhase.BATCH_JOINING,
        RolloutPhase.BATCH_SETTLING,
    ]
    # A new active phase is looked at again at once, but not twice in a row.
    (_, first), (_, second), (_, third) = steps
    assert second - first < 0.5
    assert third - second >= rollouts.ACTIVE_POLL_SECONDS - 0.05
    # Written when the status changed; the third step left it as the second wrote it.
    assert writes == [RolloutPhase.BATCH_JOINING.value, RolloutPhase.BATCH_SETTLING.value]
    # A batch out wakes the observer: settling is what the rollout waits for.
    assert deps.hub.wakeup("web").is_set()
