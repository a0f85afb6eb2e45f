"""The operator adds the enforcement sidecar to a running StatefulSet's pods and takes it out.

Real parts: Tansu, the API emulator, the lab cluster's controllers and kubelet (each container a
real process: the application is `python -m rebalancer.lab.consumer`, the injected sidecar the
operator's image, `rebalancer sidecar`), and the operator with its rollout planner, settings
handler and enforce timer. The operator finds the sidecars the way it finds sidecars users add
themselves: the ready pods of spec.workload, on spec.policy.enforce.sidecar.port.

One replica: every lab pod has the address 127.0.0.1, so two pods' sidecars would want the
same port on one host. In a cluster each pod has its own address.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.e2e.support import apply, events_for, eventually, free_port, get_cg, kubectl

from rebalancer.lab.running import Lab, LabConfig

pytestmark = pytest.mark.e2e
NAME = "injected"
WORKLOAD = f"{NAME}-consumer"
TOKEN = "lab-injected-token"
SIDECAR = "rebalancer-sidecar"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    config = LabConfig(
        state_dir=tmp_path_factory.mktemp("lab"),
        broker_port=free_port(),
        api_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
        partitions=4,
    )
    running = Lab(config)
    try:
        running.start(fleet=False, pods=True)
        yield running
    finally:
        running.stop()


def statefulset(lab: Lab) -> dict[str, Any]:
    env = {k: v for k, v in lab.consumer_env(0, NAME).items() if k != "POD_NAME"}
    container = {
        "name": "consumer",
        "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
        "command": ["python", "-m", "rebalancer.lab.consumer"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *({"name": k, "value": v} for k, v in env.items()),
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": WORKLOAD, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "serviceName": WORKLOAD,
            "selector": {"matchLabels": {"app": WORKLOAD}},
            "template": {
                "metadata": {"labels": {"app": WORKLOAD}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [container]},
            },
        },
    }


def pods(lab: Lab, prefix: str = WORKLOAD) -> dict[str, dict[str, Any]]:
    assert lab.api_client is not None
    items = json.loads(
        client.CoreV1Api(lab.api_client).list_namespaced_pod("default", _preload_content=False).data
    )["items"]
    return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(prefix)}


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def container_names(pod: dict[str, Any]) -> list[str]:
    return [c["name"] for c in pod["spec"]["containers"]]


def log_of(lab: Lab, pod: dict[str, Any], container: str) -> str:
    meta = pod["metadata"]
    folder = lab.config.state_dir / "logs" / "pods" / f"default_{meta['name']}_{meta['uid']}"
    return "".join(
        p.read_text(errors="replace") for p in sorted((folder / container).glob("*.log"))
    )


def revocations(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r"revoked .*-\[(?!-\])", line)]


def sidecar_view(port: int) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/group", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=3) as answer:
        return dict(json.loads(answer.read()))


def patch_cg(lab: Lab, patch: dict[str, Any]) -> None:
    kubectl(lab, "patch", "consumergroup", NAME, "--type=merge", "-p", json.dumps(patch))


def rolled_out(lab: Lab) -> dict[str, Any] | None:
    """status.settings.sidecar once every pod runs what it describes."""
    settings = (get_cg(lab, NAME).get("status") or {}).get("settings") or {}
    sidecar = settings.get("sidecar") or {}
    return dict(sidecar) if sidecar.get("rolledOut") else None


def the_pod(lab: Lab) -> dict[str, Any]:
    found = pods(lab)
    assert list(found) == [f"{WORKLOAD}-0"], list(found)
    return found[f"{WORKLOAD}-0"]


def test_inject_rolls_the_sidecar_in_enforces_through_it_and_rolls_it_out(
    lab: Lab, tmp_path: Path
) -> None:
    from rebalancer.lab.producer import ensure_topic

    asyncio.run(ensure_topic(lab.bootstrap, NAME, 4))
    port = free_port()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{NAME}-token", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    group = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": NAME, "namespace": "default"},
        "spec": {
            "groupId": NAME,
            "kafka": {"bootstrapServers": [lab.bootstrap]},
            "subscription": {"topics": [NAME]},
            "workload": {"kind": "StatefulSet", "name": WORKLOAD},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 20},
                "rollout": {"enabled": True, "maxBatchSize": 1, "settleSeconds": 2},
                "enforce": {
                    "requestToken": "first",
                    "sidecar": {"port": port, "tokenSecretRef": {"name": f"{NAME}-token"}},
                },
            },
        },
    }
    apply(lab, secret, statefulset(lab), group)

    def one_member() -> dict[str, Any] | None:
        found = get_cg(lab, NAME).get("status") or {}
        members = (found.get("group") or {}).get("members")
        return found if members == 1 and (found["group"].get("state") == "Stable") else None

    eventually(one_member, 120, "the application's one member, Stable")
    before = the_pod(lab)
    assert container_names(before) == ["consumer"]

    # Inject: the pod template gets the sidecar and the pod is replaced by the managed rollout.
    started = time.monotonic()
    patch_cg(lab, {"spec": {"policy": {"enforce": {"sidecar": {"inject": True}}}}})

    def rolled_with_sidecar() -> dict[str, Any] | None:
        pod = the_pod(lab)
        fresh = pod["metadata"]["uid"] != before["metadata"]["uid"]
        return (
            pod if fresh and container_names(pod) == ["consumer", SIDECAR] and ready(pod) else None
        )

    pod = eventually(rolled_with_sidecar, 150, "the pod replaced with the sidecar, Ready")
    print(f"inject to a Ready pod with the sidecar: {time.monotonic() - started:.1f} s")
    sidecar_spec = pod["spec"]["containers"][1]
    assert sidecar_spec["args"] == ["sidecar"]
    assert TOKEN not in json.dumps(pod["spec"]), "the token is mounted, never inline"
    status = eventually(lambda: rolled_out(lab), 60, "status.settings.sidecar.rolledOut")
    assert (status["inject"], status["injected"], status["reason"]) == (
        True,
        True,
        "SidecarInjected",
    )
    reasons = [e["reason"] for e in events_for(lab, NAME)]
    assert "SidecarInjected" in reasons, reasons
    # The managed rollout replaced the pod, not the StatefulSet controller on its own.
    rollout = eventually(
        lambda: (r := get_cg(lab, NAME)["status"].get("rollout") or {}).get("phase") == "Completed"
        and r.get("kind") == "rolling-update" and r,
        60, "the managed rollout of the sidecar completed",
    )  # fmt: skip
    assert rollout["mechanism"] == "statefulset-replace", rollout
    assert rollout["batchSizes"] == [1], rollout

    # The sidecar joined the application's group (it is the only one, so the actor).
    view = eventually(
        lambda: (v := sidecar_view(port)).get("generation") is not None and v.get("actor") and v,
        90, "the injected sidecar in the group, acting",
    )  # fmt: skip
    assert view["memberId"]

    def settled() -> dict[str, Any] | None:
        found = get_cg(lab, NAME)["status"]
        group_status = found.get("group") or {}
        stable = group_status.get("state") == "Stable" and group_status.get("members") == 1
        return group_status if stable and group_status.get("assignedPartitions") == 4 else None

    eventually(settled, 90, "the group Stable again, one application member on 4 partitions")
    time.sleep(6)  # quiet: the baseline token never enforces
    quiet = get_cg(lab, NAME)["status"]["group"]
    generation = quiet["generation"]
    owned = {m["host"]: m["partitions"] for m in quiet["memberDetails"]}
    consumer_log = len(log_of(lab, pod, "consumer"))

    started = time.monotonic()
    patch_cg(lab, {"spec": {"policy": {"enforce": {"requestToken": "second"}}}})

    def enforced() -> dict[str, Any] | None:
        found = get_cg(lab, NAME)["status"]
        done = (found.get("enforcement") or {}).get("lastStatus") == "enforced"
        return found if done and found["group"]["generation"] > generation else None

    eventually(enforced, 90, "an enforced rebalance through the injected sidecar")
    print(f"token change to enforced in status: {time.monotonic() - started:.1f} s")
    time.sleep(8)  # any further generation would show by now
    after = get_cg(lab, NAME)["status"]
    assert after["group"]["generation"] == generation + 1, "exactly one new generation"
    assert after["group"]["members"] == 1, "the sidecar is not counted as a member"
    assert {m["host"]: m["partitions"] for m in after["group"]["memberDetails"]} == owned
    assert after["enforcement"]["lastCause"] == "on-demand"
    assert after["group"]["lastRebalanceCause"] == "enforced"
    assert revocations(log_of(lab, pod, "consumer")[consumer_log:]) == []
    messages = [str(e["message"]) for e in events_for(lab, NAME)]
    assert any("cause enforced" in message for message in messages), messages
    assert pod["metadata"]["uid"] == the_pod(lab)["metadata"]["uid"], "no pod restarted"

    # Inject off: the pod is replaced again, without the sidecar.
    started = time.monotonic()
    patch_cg(lab, {"spec": {"policy": {"enforce": {"sidecar": {"inject": False}}}}})

    def rolled_without() -> dict[str, Any] | None:
        now = the_pod(lab)
        fresh = now["metadata"]["uid"] != pod["metadata"]["uid"]
        return now if fresh and container_names(now) == ["consumer"] and ready(now) else None

    eventually(rolled_without, 150, "the pod replaced without the sidecar")
    print(f"inject off to a Ready pod without it: {time.monotonic() - started:.1f} s")
    removed = eventually(lambda: rolled_out(lab), 60, "status.settings.sidecar.rolledOut again")
    assert (removed["inject"], removed["injected"], removed["reason"]) == (
        False,
        False,
        "SidecarRemoved",
    )
    assert "SidecarRemoved" in [e["reason"] for e in events_for(lab, NAME)]


def test_a_running_deployment_gets_the_sidecar_and_it_joins_the_group(lab: Lab) -> None:
    # A Deployment is not parked in the template write as a StatefulSet is: its controller
    # starts the rollout and the planner takes it over in steps; with one replica the one step
    # is the whole rollout.
    from rebalancer.lab.producer import ensure_topic

    name = "injected-d"
    asyncio.run(ensure_topic(lab.bootstrap, name, 2))
    port = free_port()
    deployment = statefulset(lab)
    deployment["kind"] = "Deployment"
    deployment["metadata"]["name"] = name
    spec = deployment["spec"]
    del spec["serviceName"]
    spec["selector"] = {"matchLabels": {"app": name}}
    spec["template"]["metadata"]["labels"] = {"app": name}
    for entry in spec["template"]["spec"]["containers"][0]["env"]:
        if entry["name"] in ("KAFKA_GROUP_ID", "KAFKA_TOPICS", "REBALANCER_CONSUMER_GROUP"):
            entry["value"] = name
    group = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "Deployment", "name": name},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 20},
                "rollout": {"enabled": True, "maxBatchSize": 1, "settleSeconds": 2},
                "enforce": {
                    "sidecar": {
                        "port": port,
                        "tokenSecretRef": {"name": f"{name}-token"},
                    }
                },
            },
        },
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-token", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    apply(lab, secret, deployment, group)

    def live() -> list[dict[str, Any]]:
        return [
            p
            for p in pods(lab, f"{name}-").values()
            if p["metadata"].get("deletionTimestamp") is None
        ]

    first = eventually(
        lambda: len(found := live()) == 1 and ready(found[0]) and found[0], 60, "one Ready pod"
    )
    assert container_names(first) == ["consumer"]
    kubectl(
        lab, "patch", "consumergroup", name, "--type=merge",
        "-p", '{"spec":{"policy":{"enforce":{"sidecar":{"inject":true}}}}}',
    )  # fmt: skip

    def with_sidecar() -> dict[str, Any] | None:
        found = live()
        done = len(found) == 1 and container_names(found[0]) == ["consumer", SIDECAR]
        return found[0] if done and ready(found[0]) else None

    pod = eventually(with_sidecar, 150, "the Deployment's pod replaced with the sidecar, Ready")
    assert pod["metadata"]["uid"] != first["metadata"]["uid"]
    view = eventually(
        lambda: (v := sidecar_view(port)).get("generation") is not None and v,
        90, "the injected sidecar in the Deployment's group",
    )  # fmt: skip
    assert view["memberId"]
    status = (get_cg(lab, name)["status"].get("settings") or {}).get("sidecar") or {}
    assert status.get("injected") is True, status
