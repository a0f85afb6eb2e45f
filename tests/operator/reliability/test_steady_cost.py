"""At rest a ConsumerGroup costs kube-apiserver nothing per look: its workload comes from the
operator's watch (no GET), and its status is written only when something visible changes.

Real parts: Kubernetes' control plane (kube-apiserver, its StatefulSet controller), Apache
Kafka, the operator as its own process with `--status-refresh-seconds 600`, so that no
freshness refresh falls in the windows below. History recording is off for these groups: with
it on, the pod records list the workload's pods every 5 s (docs/api-priority.md). Groups look
every 2 s at StatefulSets scaled to zero (Ready ScaledToZero, no pods needed); the operator's
own counters (rebalancer_kubernetes_requests_total, rebalancer_status_writes_total) are what is
read.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    eventually,
    get_cg,
    kubectl,
    running_lab,
)

from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

NAMES = ("steady-a", "steady-b", "steady-c")
# No history: recording pod starts and stops lists the workload's pods every 5 s
# (reconcilers.learning.PodWatch), which is not what this test is about.
POLICY = {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 20}, "history": {"enabled": False}}
# Looks of each group in the quiet window: 2 s apart.
QUIET_WINDOW_S = 12.0
_SAMPLE = re.compile(r"^(rebalancer_(?:kubernetes_requests|status_writes)_total)\{([^}]*)\} (\S+)$")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        operator_flags=("--status-refresh-seconds", "600"),
    ) as running:
        yield running


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "consumer", "image": "consumer:lab"}]},
            },
        },
    }


def counts(lab: Lab) -> Counter[str]:
    url = f"http://{lab.config.host}:{lab.config.reports_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    found: Counter[str] = Counter()
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', sample[2]))
        key = " ".join(labels[k] for k in sorted(labels))
        found[f"{sample[1]} {key}"] += round(float(sample[3]))
    return found


GETS = "rebalancer_kubernetes_requests_total statefulsets GET"
PATCHES = "rebalancer_kubernetes_requests_total consumergroups/status PATCH"


def describe_batches(lab: Lab) -> tuple[float, float]:
    """(describe batches sent, groups they carried) so far: the batch reader's histogram."""
    url = f"http://{lab.config.host}:{lab.config.reports_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    found = dict.fromkeys(("count", "sum"), 0.0)
    for line in text.splitlines():
        for part in found:
            if line.startswith(f"rebalancer_kafka_describe_batch_groups_{part} "):
                found[part] = float(line.split()[1])
    return found["count"], found["sum"]


def ready_reason(lab: Lab, name: str) -> str | None:
    return condition(get_cg(lab, name), "Ready").get("reason")


def total_partitions(lab: Lab, name: str) -> object:
    return (get_cg(lab, name).get("status") or {}).get("group", {}).get("totalPartitions")


def observed_at(lab: Lab, name: str) -> str | None:
    return (get_cg(lab, name).get("status") or {}).get("group", {}).get("observedAt")


def enforce_timer_runs(lab: Lab) -> int:
    log = (lab.config.state_dir / "logs" / "operator.log").read_text(errors="replace")
    return log.count("Timer 'enforce'")


def test_at_rest_no_get_no_patch_and_a_change_is_written_at_once(lab: Lab) -> None:
    for name in NAMES:
        asyncio.run(ensure_topic(lab.bootstrap, name, 2))
        apply(
            lab,
            statefulset(f"{name}-consumer", 0),
            consumer_group(name, lab.bootstrap, policy=POLICY),
        )
    for name in NAMES:
        eventually(
            lambda name=name: ready_reason(lab, name) == "ScaledToZero" or None,  # type: ignore[misc]
            90,
            f"{name} Ready ScaledToZero",
        )
    # The first looks' writes are done: the topics' partitions are counted once the shared
    # topic metadata is read again (at most 5 s old), and the conditions settle within a look
    # or two.
    for name in NAMES:
        eventually(
            lambda name=name: total_partitions(lab, name) == 2 or None,  # type: ignore[misc]
            30,
            f"{name}'s partitions counted",
        )
    time.sleep(4)
    before = counts(lab)
    enforce_runs = enforce_timer_runs(lab)
    stamps = {name: observed_at(lab, name) for name in NAMES}
    batches_before, groups_before = describe_batches(lab)
    time.sleep(QUIET_WINDOW_S)
    quiet = counts(lab) - before
    batches, groups = (
        now - then
        for now, then in zip(describe_batches(lab), (batches_before, groups_before), strict=True)
    )
    # The three groups look at the same instants (planning.observe_cadence.on_grid), so each
    # instant's describes go to Kafka as one batch: about six batches of three, not eighteen of one.
    print(f"quiet window: {batches:.0f} describe batches carrying {groups:.0f} groups")
    assert groups >= 3 * (QUIET_WINDOW_S / 2 - 1), (batches, groups)
    assert batches <= QUIET_WINDOW_S / 2 + 1, (batches, groups)
    assert groups / batches >= 2.5, (batches, groups)
    # No group has an enforce block: no enforcement timer runs for any (3 s apart otherwise).
    assert enforce_timer_runs(lab) == enforce_runs
    # 3 groups x 6 looks: not one workload GET, not one status PATCH.
    assert quiet[GETS] == 0, quiet
    assert quiet[PATCHES] == 0, quiet
    assert {name: observed_at(lab, name) for name in NAMES} == stamps

    # Scaled up (no kubelet here: its pods stay Pending, and the group Empty): the watch tells
    # the observer, which writes the change at its next look, still without a GET.
    kubectl(lab, "scale", "statefulset", "steady-a-consumer", "--replicas=2")
    scaled_at = time.monotonic()
    eventually(
        lambda: ready_reason(lab, "steady-a") != "ScaledToZero" or None,
        15,
        "steady-a no longer Ready ScaledToZero",
        every=0.2,
    )
    assert time.monotonic() - scaled_at < 10
    after = counts(lab) - before
    assert after[GETS] == 0, after
    assert after[PATCHES] >= 1, after
    assert after["rebalancer_status_writes_total changed"] >= 1, after
    # The others still unchanged, still unwritten.
    assert observed_at(lab, "steady-b") == stamps["steady-b"]
