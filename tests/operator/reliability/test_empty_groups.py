"""Groups scaled to zero are a normal state: Ready ScaledToZero, no Degraded, no Warning.

Real parts: Apache Kafka, Kubernetes' control plane (its StatefulSet controller), the lab's
kubelet (each pod a gate, then a consumer process that leaves the group when stopped), the
operator as its own process. A managed fleet is scaled to zero (as KEDA's scale to zero, or a
KEDA pause at `paused-replicas: "0"`, does it: spec.replicas 0) and back; an observed group's
workload starts at zero, before any consumer has ever joined.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    events_for,
    eventually,
    get_cg,
    kubectl,
)
from tests.operator.reliability.rollout_fleets import (
    PARTITIONS,
    completed,
    fleet,
    group_of,
    managed,
    pods_lab,
    pods_of,
    rollout_of,
    settled,
)

from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with pods_lab(tmp_path_factory) as running:
        yield running


def ready_gauge(lab: Lab, name: str) -> float | None:
    url = f"http://{lab.config.host}:{lab.config.reports_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    # Labels come sorted: consumergroup, group_id, namespace.
    prefix = f'rebalancer_group_ready{{consumergroup="{name}",group_id='
    found = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(prefix) and 'namespace="default"}' in line
    ]
    return found[0] if found else None


def scaled_to_zero(lab: Lab, name: str) -> dict[str, Any] | None:
    body = get_cg(lab, name)
    ready = condition(body, "Ready")
    return body if (ready.get("status"), ready.get("reason")) == ("True", "ScaledToZero") else None


def warnings_since(lab: Lab, name: str, moment: float) -> list[str]:
    found = []
    for event in events_for(lab, name):
        when = event.get("lastTimestamp") or event.get("eventTime") or ""
        stamp = time.mktime(time.strptime(when[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if event.get("type") == "Warning" and stamp >= int(moment):
            found.append(f"{event['reason']}: {event['message']}")
    return found


def test_a_managed_fleet_scaled_to_zero_and_back(lab: Lab) -> None:
    name = "zero"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    # maxBatchSize at most the smallest replica count the test scales to (2): a larger one is
    # refused as PolicyCannotBeMet whenever the workload has fewer replicas than that.
    apply(lab, managed(lab, name, maxBatchSize=2), fleet(lab, name, 3))
    eventually(lambda: completed(lab, name), 120, "the cold start Completed")
    settled(lab, name, 3)

    scaled_at = time.time()
    kubectl(lab, "scale", "statefulset", f"{name}-consumer", "--replicas=0")
    body = eventually(lambda: scaled_to_zero(lab, name), 90, "Ready ScaledToZero")
    ready = condition(body, "Ready")
    assert ready["message"].startswith(f"StatefulSet {name}-consumer is scaled to zero")
    assert condition(body, "Degraded")["status"] == "False", condition(body, "Degraded")
    assert condition(body, "Progressing")["status"] == "False"
    group = group_of(lab, name)
    assert group["members"] == 0 and group["state"] == "Empty", group
    assert eventually(lambda: pods_of(lab, name) == [], 60, "every pod gone")
    assert ready_gauge(lab, name) == 1  # the NotReady alert's expression stays false
    assert rollout_of(lab, name).get("phase") != "Failed", rollout_of(lab, name)
    # A while at zero: still Ready, the operator still running, nothing to warn about.
    asyncio.run(asyncio.sleep(15))
    assert scaled_to_zero(lab, name) is not None
    assert lab.operator is not None and lab.operator.running
    assert warnings_since(lab, name, scaled_at) == []

    kubectl(lab, "scale", "statefulset", f"{name}-consumer", "--replicas=2")
    settled(lab, name, 2)
    eventually(
        lambda: condition(get_cg(lab, name), "Ready").get("reason") == "GroupStable",
        90,
        "Ready GroupStable again",
    )
    assert rollout_of(lab, name).get("phase") != "Failed", rollout_of(lab, name)
    assert warnings_since(lab, name, scaled_at) == []


def test_an_observed_group_whose_workload_starts_at_zero(lab: Lab) -> None:
    name = "dormant"
    asyncio.run(ensure_topic(lab.bootstrap, name, PARTITIONS))
    body = fleet(lab, name, 0)
    created_at = time.time()
    apply(lab, consumer_group(name, lab.bootstrap), body)
    cg = eventually(lambda: scaled_to_zero(lab, name), 60, "Ready ScaledToZero")
    # No consumer has ever joined: the broker does not know the group.
    assert group_of(lab, name)["members"] == 0
    assert condition(cg, "Degraded")["status"] == "False", condition(cg, "Degraded")
    assert ready_gauge(lab, name) == 1
    assert warnings_since(lab, name, created_at) == []
