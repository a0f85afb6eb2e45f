"""The operator's rollout daemon on the real control plane: woken by a settings write instead of
waiting out its resting poll, and handing back a Deployment paused for a planner that was
turned off before it took the hold over (an operator restarted in between). The Deployment
controller is the real one; the Deployment has no replicas, so no pod runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from tests.reconcilers.rollouts.support import until
from tests.stopping import Stopped

from rebalancer.clients import patching
from rebalancer.clients.enforcing import SidecarClient
from rebalancer.clients.kafka_admin import AdminPool
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.clients.receiving import ReportHub
from rebalancer.clients.recommending import RecommendationReader
from rebalancer.clients.recording import HistoryRecorder
from rebalancer.operator_settings import OperatorSettings
from rebalancer.reconcilers import rollouts
from rebalancer.reconcilers.dependencies import Dependencies
from rebalancer.structs.workloads import ROLLOUT_HOLD_ANNOTATION

NAME, WORKLOAD = "web", "web-consumer"
POST_ACTIONS = rollouts._post  # the real poster, before the fixture below replaces it
GROUP, VERSION, PLURAL = "rebalancer.dev", "v1alpha1", "consumergroups"


@pytest.fixture(autouse=True)
def posted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The daemon's Events, kept here: posting them needs kopf's running operator."""
    kept: list[Any] = []

    async def keep(_deps: Any, _body: Any, actions: list[Any]) -> None:
        kept.extend(actions)

    monkeypatch.setattr(rollouts, "_post", keep)
    return kept


def dependencies(
    kube: KubernetesApi, tmp_path: Path, resting_poll_seconds: float = 10.0
) -> Dependencies:
    return Dependencies(
        settings=OperatorSettings(
            history_dir=str(tmp_path / "history"),
            rollout_resting_poll_seconds=resting_poll_seconds,
        ),
        kube=kube,
        pool=AdminPool(),
        hub=ReportHub(),
        recorder=HistoryRecorder(str(tmp_path / "history")),
        sidecars=SidecarClient(),
        recommender=RecommendationReader(None),
    )


async def install(kube: KubernetesApi, ns: str, rollout: dict[str, Any]) -> kopf.Body:
    container = {"name": "consumer", "image": "x", "command": ["sleep", "3600"]}
    kube.apps.create_namespaced_deployment(
        ns,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": WORKLOAD},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": WORKLOAD}},
                "template": {
                    "metadata": {"labels": {"app": WORKLOAD}},
                    "spec": {"containers": [container]},
                },
            },
        },
    )
    await caught_up(kube, ns)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": NAME, "namespace": ns},
        "spec": {
            "groupId": NAME,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [NAME]},
            "workload": {"kind": "Deployment", "name": WORKLOAD},
            "policy": {"rollout": rollout},
        },
    }
    created = kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    return kopf.Body(created)


async def hold(kube: KubernetesApi, ns: str, image: str) -> None:
    """What the settings write does to a Deployment under managed rollouts (rollout_holds)."""
    patch = {
        "metadata": {"annotations": {ROLLOUT_HOLD_ANNOTATION: "true"}},
        "spec": {
            "paused": True,
            "template": {"spec": {"containers": [{"name": "consumer", "image": image}]}},
        },
    }
    kube.apps.patch_namespaced_deployment(WORKLOAD, ns, patch)
    await caught_up(kube, ns)


async def caught_up(kube: KubernetesApi, ns: str) -> None:
    """The Deployment controller has seen the latest spec, as the planner waits for."""

    def observed() -> bool:
        got = deployment(kube, ns)
        return bool(
            got["metadata"]["generation"] == (got.get("status") or {}).get("observedGeneration")
        )

    await until(observed, "the Deployment controller's observing the spec", 20)


def deployment(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    got = kube.apps.read_namespaced_deployment(WORKLOAD, ns, _preload_content=False)
    return cast(dict[str, Any], json.loads(got.data))


def rollout_status(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    got = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME)
    return dict((got.get("status") or {}).get("rollout") or {})


async def seconds_until(probe: Callable[[], bool], limit: float) -> float:
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > limit:
            raise AssertionError(f"not within {limit} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - started


@contextlib.asynccontextmanager
async def daemon_running(
    deps: Dependencies, body: kopf.Body, ns: str
) -> AsyncIterator[asyncio.Task[None]]:
    """The group's rollout daemon, running until the block ends."""
    stopped = Stopped()
    daemon = asyncio.create_task(
        rollouts._roll_out_forever(deps, body, ns, NAME, cast(kopf.DaemonStopped, stopped))
    )
    try:
        yield daemon
    finally:
        stopped.event.set()
        await asyncio.wait_for(daemon, 10)


def handed_back(kube: KubernetesApi, ns: str) -> bool:
    got = deployment(kube, ns)
    annotations = got["metadata"].get("annotations") or {}
    return not got["spec"].get("paused") and ROLLOUT_HOLD_ANNOTATION not in annotations


async def test_a_deployment_held_for_a_planner_turned_off_meanwhile_is_handed_back(
    kube: KubernetesApi, ns: str, tmp_path: Path
) -> None:
    # Rollouts off (no `enabled`), and a hold the planner never took over: the settings write
    # paused the Deployment, then the user turned rollouts off while the operator was down.
    body = await install(kube, ns, {"maxBatchSize": 1})
    await hold(kube, ns, "y")
    assert not handed_back(kube, ns)
    deps = dependencies(kube, tmp_path)
    async with daemon_running(deps, body, ns):
        await seconds_until(lambda: handed_back(kube, ns), 20)
        assert deployment(kube, ns)["spec"]["template"]["spec"]["containers"][0]["image"] == "y"


async def test_a_settings_write_wakes_the_rollout_daemon_at_rest(
    kube: KubernetesApi, ns: str, tmp_path: Path
) -> None:
    # A resting poll far longer than the bound below: only the wake-up can meet it.
    body = await install(kube, ns, {"enabled": True, "maxBatchSize": 1})
    deps = dependencies(kube, tmp_path, resting_poll_seconds=120.0)
    async with daemon_running(deps, body, ns) as daemon:
        # The first step, then at rest.
        await seconds_until(lambda: bool(rollout_status(kube, ns)), 20)
        await asyncio.sleep(1.0)
        await hold(kube, ns, "y")
        deps.rollout_wakeup(ns, NAME).set()  # what the settings handler does after its write
        taken = await seconds_until(lambda: handed_back(kube, ns), 20)
        assert taken < 10, f"the held Deployment was taken over only after {taken:.1f} s"
        assert not daemon.done(), daemon


async def test_each_transition_event_is_posted_before_the_status_that_records_it(
    kube: KubernetesApi, ns: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A post that takes a while: fired and forgotten, or moved after the write, it would land
    # after the status naming its transition (and an operator killed between loses it).
    journal: list[tuple[str, str]] = []

    async def slow_post(_kube: Any, _body: Any, *, reason: str, **_: Any) -> None:
        await asyncio.sleep(0.3)
        journal.append(("event", reason))

    async def noted_patch(*args: Any) -> None:
        fields = args[-1]
        journal.append(("status", str((fields.get("rollout") or {}).get("phase"))))
        await real_patch(*args)

    real_patch = patching.patch_status
    monkeypatch.setattr(rollouts, "_post", POST_ACTIONS)
    monkeypatch.setattr(rollouts, "post_event", slow_post)
    monkeypatch.setattr(rollouts, "patch_status", noted_patch)
    body = await install(kube, ns, {"enabled": True, "maxBatchSize": 1})
    await hold(kube, ns, "y")
    deps = dependencies(kube, tmp_path)
    async with daemon_running(deps, body, ns):
        await seconds_until(lambda: handed_back(kube, ns), 30)
        await seconds_until(lambda: rollout_status(kube, ns).get("phase") == "Idle", 30)
    # The takeover of a Deployment with no pods starts and ends in one step: its Events, then
    # the one status write recording Idle.
    assert [kind for kind, _ in journal] == ["event", "event", "status"], journal
    assert journal[-1] == ("status", "Idle") and ("event", "RolloutStarted") in journal, journal
