"""bench/scale_watch.py on the session's kube-apiserver: when each group first shows status, and
which replica its servedBy names, as the writes arrive."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.polling import eventually

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import scale_watch  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
NAMES = {"watched-a", "watched-b"}


def group(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": ["127.0.0.1:9"]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": name},
        },
    }


def write_status(kube: KubernetesApi, ns: str, name: str, status: dict[str, Any]) -> None:
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, name, {"status": status}
    )


def test_the_watch_times_each_groups_first_status_and_follows_who_serves_it(
    kube: KubernetesApi, ns: str
) -> None:
    watched = scale_watch.GroupWatch(kube.custom).start()
    try:
        for name in sorted(NAMES):
            kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, group(ns, name))
        eventually(lambda: set(watched.owners()) >= NAMES, "both groups seen", 30)
        assert watched.with_status(NAMES) == {}
        # servedBy alone is no status yet; the observer's status.group is.
        write_status(kube, ns, "watched-a", {"servedBy": "node/4242 (shard 1 of 4)"})
        eventually(lambda: watched.owners()["watched-a"] == 4242, "servedBy seen", 30)
        assert watched.with_status(NAMES) == {}
        before = time.monotonic()
        write_status(kube, ns, "watched-a", {"group": {"observedAt": "2026-12-05T08:00:00Z"}})
        eventually(lambda: "watched-a" in watched.with_status(NAMES), "first status seen", 30)
        first = watched.with_status(NAMES)["watched-a"]
        assert before <= first <= time.monotonic()
        # A later write moves neither the first status nor the other group's.
        write_status(kube, ns, "watched-a", {"servedBy": "node/77 (shard 1 of 4)"})
        eventually(lambda: watched.owners()["watched-a"] == 77, "the new server seen", 30)
        assert watched.with_status(NAMES) == {"watched-a": first}
        assert watched.owners()["watched-b"] is None
    finally:
        watched.stop()
