"""Kubernetes' Deployment and ReplicaSet controllers and the lab kubelet together: a rollout
finishes within its bounds only if the kubelet reports readiness when it is true, and Recreate
goes on only once the kubelet has stopped and removed every old pod."""

from __future__ import annotations

from typing import Any

from tests.lab.support import (
    ROLLOUT_S,
    Lab,
    PodWatch,
    alive,
    complete,
    deployment,
    is_ready,
    live_pods,
    new_version,
    pid_of,
    template,
    wait_for,
)

from rebalancer_lab.kube.objects import is_terminating
from rebalancer_lab.kubelet import DELAY_ANNOTATION

Body = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


def slow_start(version: str = "1", name: str = "app", delay: float = 0.3) -> Body:
    """A template whose pods start `delay` seconds late, so rollouts take several steps."""
    tmpl = template(version, labels={"app": name})
    tmpl["metadata"]["annotations"] = {DELAY_ANNOTATION: str(delay)}
    return tmpl


def test_a_rolling_update_completes_within_max_surge_and_max_unavailable(lab: Lab) -> None:
    max_total, min_ready = 5, 3
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}
    body = deployment(lab, "app", 4, template=slow_start(), strategy=strategy)
    created = lab.api.create(lab.path("deployments"), body)
    wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "first rollout")

    def within_bounds(cache: list[Body]) -> None:
        live = [p for p in cache if not is_terminating(p)]
        assert len(live) <= max_total, f"{len(live)} pods, more than {max_total}"
        ready = sum(1 for p in live if is_ready(p))
        assert ready >= min_ready, f"{ready} ready pods, fewer than {min_ready}"

    with PodWatch(lab) as watch:
        watch.checks.append(within_bounds)
        patch = new_version(created, "2")
        patch["spec"]["template"]["metadata"]["annotations"] = {DELAY_ANNOTATION: "0.3"}
        lab.api.patch(lab.path("deployments", "app"), patch)
        found = wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "second rollout")
    assert not watch.failures, watch.failures[:3]
    assert found["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    # Every old pod's processes stopped and the kubelet removed it.
    wait_for(lambda: len(lab.api.list(lab.pods)["items"]) == 4, ROLLOUT_S, "the old pods removed")


def test_recreate_stops_every_old_pod_before_starting_new_ones(lab: Lab) -> None:
    body = deployment(lab, "app", 2, strategy={"type": "Recreate"})
    created = lab.api.create(lab.path("deployments"), body)
    wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "first rollout")
    old = {p["metadata"]["uid"]: p for p in live_pods(lab)}
    old_pids = [pid_of(p["status"]["containerStatuses"][0]) for p in old.values()]
    overlap: list[str] = []

    # The controller starts new pods once the old ones are terminal (Succeeded or Failed),
    # which the kubelet may report only once their processes are gone.
    def no_overlap(cache: list[Body]) -> None:
        if not any(p["metadata"]["uid"] not in old for p in cache):
            return
        running = [
            p["metadata"]["name"]
            for p in cache
            if p["metadata"]["uid"] in old and p["status"].get("phase") not in TERMINAL
        ]
        overlap.extend(f"{name} not terminal" for name in running)
        overlap.extend(f"pid {pid} alive" for pid in old_pids if alive(pid))

    with PodWatch(lab) as watch:
        watch.checks.append(no_overlap)
        lab.api.patch(lab.path("deployments", "app"), new_version(created, "2"))
        wait_for(lambda: complete(lab, "app"), ROLLOUT_S, "recreated")
    assert not overlap, f"old and new pods ran at the same time: {overlap[:3]}"
