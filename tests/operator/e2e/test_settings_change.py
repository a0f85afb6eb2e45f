"""Settings through the whole operator in the lab: a policy change on a running ConsumerGroup
reaches the consumers' pods as a staggered rollout, and the delay decision shows in status."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.operator.e2e.support import events_for, eventually, get_cg, running_lab

from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e


# Function scope, though there is one test: a rerun then starts from a fresh lab. With a module
# scope it would find the new settings already applied and wait for a rollout that never comes.
@pytest.fixture
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=True,
        pods=True,
        partitions=6,
        start_spread_seconds=0.2,
    ) as running:
        yield running


def pods(lab: Lab) -> dict[str, dict[str, Any]]:
    assert lab.api_client is not None
    items = json.loads(
        client.CoreV1Api(lab.api_client).list_namespaced_pod("default", _preload_content=False).data
    )["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith("orders-")}


def settings_line(lab: Lab, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    folder = Path(lab.config.state_dir) / "logs" / "pods" / f"default_{meta['name']}_{meta['uid']}"
    text = "".join(p.read_text(errors="replace") for p in sorted(folder.glob("*/*.log")))
    return next((line for line in text.splitlines() if "settings:" in line), "")


def test_a_settings_change_reaches_every_pod_in_batches(lab: Lab) -> None:
    def stable_with_three() -> dict[str, Any] | None:
        group = (get_cg(lab, "orders").get("status") or {}).get("group") or {}
        return group if group.get("members") == 3 and group.get("state") == "Stable" else None

    eventually(stable_with_three, 90, "the example group, 3 members, Stable")
    before = {name: pod["metadata"]["uid"] for name, pod in pods(lab).items()}
    assert client is not None and lab.api_client is not None
    custom = client.CustomObjectsApi(lab.api_client)
    policy = {
        "rollout": {"enabled": True, "maxBatchSize": 1, "settleSeconds": 2},
        "settings": {
            "sessionTimeoutMs": 6000,
            "heartbeatIntervalMs": 1500,
            "maxPollIntervalMs": 60000,
            "staticMembership": True,
            "properties": {"fetch.wait.max.ms": "100"},
        },
        "brokerDelay": {"delayMs": 5000},
    }
    custom.patch_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", "default", "consumergroups", "orders",
        {"spec": {"policy": policy}},
    )  # fmt: skip

    def applied() -> dict[str, Any] | None:
        settings = (get_cg(lab, "orders").get("status") or {}).get("settings") or {}
        return settings if settings.get("applied") else None

    settings = eventually(applied, 30, "status.settings.applied")
    assert settings["protocol"] == "classic" and settings["assignors"] == ["cooperative-sticky"]
    assert settings["sessionLimits"]["source"] == "broker"  # Kafka describes its limits
    # The group wants 5000 ms where the broker has 3000: a recommendation, nothing altered.
    assert settings["brokerDelay"]["reason"] == "DelayRecommended", settings["brokerDelay"]
    in_force = (settings["brokerDelay"]["inForceMs"], settings["brokerDelay"]["inForceSource"])
    assert in_force == (3000, "static-broker-config"), settings["brokerDelay"]

    def all_restarted() -> dict[str, dict[str, Any]] | None:
        now = pods(lab)
        fresh = {n: p for n, p in now.items() if p["metadata"]["uid"] != before.get(n)}
        done = len(fresh) == 3 and all(
            f"settings-hash={settings['hash']}" in settings_line(lab, p) for p in fresh.values()
        )
        # Raised rather than returned so that a timeout shows where the rollout stood.
        status = get_cg(lab, "orders").get("status") or {}
        rollout, group = status.get("rollout"), status.get("group")
        assert done, f"restarted {sorted(fresh)}; rollout {rollout}; group {group}"
        return fresh

    fresh = eventually(all_restarted, 150, "every pod restarted with the new settings")
    for name, pod in fresh.items():
        line = settings_line(lab, pod)
        assert "heartbeat.interval.ms=1500" in line and f"group.instance.id={name}" in line, line
    eventually(stable_with_three, 60, "the group settled again")
    body = get_cg(lab, "orders")
    rollout = body["status"].get("rollout") or {}
    print("ROLLOUT", json.dumps(rollout))
    reasons = [e["reason"] for e in events_for(lab, "orders")]
    print("EVENTS", reasons)
    assert "SettingsApplied" in reasons
    assert rollout.get("batches") == 3, rollout
