"""The operator's start-up handler: kopf's settings, the election, and what it starts."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kopf
import pytest
import yaml
from tests.deploy.chart.support import CHART

from rebalancer.handlers import startup
from rebalancer.operator_settings import OperatorSettings, PeeringSettings

PEERING = PeeringSettings(name="rebalancer", lifetime_seconds=30, identity="op-0", priority=1)


class Server:
    started: list[Server] = []

    def __init__(self, hub: Any, host: str, port: int, token: str | None) -> None:
        self.port = port

    async def start(self) -> None:
        Server.started.append(self)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every client the handler reaches replaced by one that notes the call."""
    seen: list[Any] = []
    Server.started = []

    async def noted(*args: Any, **kwargs: Any) -> None:
        seen.append(args[1:])

    async def followable(kube: Any, namespaces: Any) -> tuple[list[str], list[Any]]:
        return ["statefulsets", "deployments"], []

    async def forever(*args: Any, **kwargs: Any) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(startup, "connect", lambda *args: "kube")
    monkeypatch.setattr(startup, "check_peering", noted)
    monkeypatch.setattr(startup, "label_pod", noted)
    monkeypatch.setattr(startup, "record_leader", lambda leader: seen.append(("leader", leader)))
    monkeypatch.setattr(startup, "ReportServer", Server)
    monkeypatch.setattr(startup, "follow_permissions", forever)
    monkeypatch.setattr(startup, "follow_leadership", forever)
    monkeypatch.setattr(startup, "followable_workloads", followable)
    monkeypatch.setattr(startup.rebalancer.handlers.workloads, "register", seen.append)
    return seen


async def started(config: OperatorSettings) -> tuple[kopf.OperatorSettings, Any]:
    settings = kopf.OperatorSettings()
    memo = SimpleNamespace(settings=config)
    await startup.start(settings=settings, memo=memo)  # type: ignore[arg-type]
    return settings, memo.deps


async def test_a_single_replica_leads_and_follows_the_workloads(calls: list[Any]) -> None:
    settings, deps = await started(OperatorSettings(max_workers=7, reports_port=8123))
    try:
        assert settings.persistence.finalizer == "rebalancer.dev/observer"
        assert settings.execution.max_workers == 7
        assert calls == [("leader", True), ["statefulsets", "deployments"]]
        assert [server.port for server in Server.started] == [8123]
        assert deps.server is Server.started[0] and deps.kube == "kube"
        assert deps.leadership is None and deps.permission_check is not None
        assert deps.workloads.watched == {"StatefulSet", "Deployment"}
    finally:
        deps.permission_check.cancel()


async def test_a_replica_of_several_waits_as_a_standby(calls: list[Any]) -> None:
    settings, deps = await started(OperatorSettings(peering=PEERING))
    try:
        assert settings.peering.clusterwide is True
        assert settings.peering.lifetime == 30
        assert calls[:3] == [(PEERING,), (PEERING, False), ("leader", False)]
        assert deps.leadership is not None
    finally:
        deps.permission_check.cancel()
        deps.leadership.cancel()


async def test_a_replica_that_cannot_elect_does_not_start(
    calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def missing(kube: Any, peering: PeeringSettings) -> None:
        raise startup.PeeringMissing("no ClusterKopfPeering rebalancer")

    monkeypatch.setattr(startup, "check_peering", missing)
    with pytest.raises(kopf.PermanentError, match="leader election: no ClusterKopfPeering"):
        await started(OperatorSettings(peering=PEERING))
    assert Server.started == [] and ("leader", False) not in calls


async def test_a_stop_that_hangs_ends_within_the_pods_grace_period(calls: list[Any]) -> None:
    # kopf's own default leaves a hung stop (one it began itself, with no kubelet asking)
    # alive for ten minutes, serving nothing; the kubelet gives a stop it asks for
    # terminationGracePeriodSeconds before its SIGKILL.
    settings, deps = await started(OperatorSettings())
    try:
        values = yaml.safe_load((CHART / "values.yaml").read_text())
        limit = settings.process.ultimate_exiting_timeout
        assert limit is not None
        assert limit < values["terminationGracePeriodSeconds"]
        # Still long enough for a clean stop: the daemons' cancellation timeout and more.
        assert limit > 10
    finally:
        deps.permission_check.cancel()
