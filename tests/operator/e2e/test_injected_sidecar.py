"""The operator adds the enforcement sidecar to running workloads' pods and takes it out.

Real parts: Apache Kafka, Kubernetes' own control plane, the lab's kubelet (each
container a real process: the application is `python -m rebalancer_lab.consumer`, the injected
sidecar the operator's image, `rebalancer sidecar`), and the operator with its rollout
planner, settings handler and enforce timer. The operator finds the sidecars the way it finds
sidecars users add themselves: the ready pods of spec.workload, on spec.policy.enforce.sidecar.port.

Two replicas: each lab pod has an address of its own, as on a cluster, and each injected
sidecar listens on its pod's address, on the one port the ConsumerGroup names. The design says
one sidecar of a group acts on a request, whichever was asked; the test checks that it is so.
Taking the sidecar out again replaces both pods; each stopping sidecar leaves the group at once,
with its pod's application member, and the group forms again (docs/enforcing.md, "Taking the
sidecar out"), also when both pods are replaced in one batch (a second group).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client
from tests.operator.e2e.support import (
    apply,
    events_for,
    eventually,
    free_port,
    get_cg,
    kubectl,
    running_lab,
)

from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
NAME = "injected"
WORKLOAD = f"{NAME}-consumer"
TOKEN = "lab-injected-token"
SIDECAR = "rebalancer-sidecar"
REPLICAS = 2
# What taking the sidecar out may cost, in generations: per pod replaced, its leave (its
# consumer's and its sidecar's LeaveGroup, in one rebalance or two), its successor's join (which
# often falls into the leave's rebalance) and one cooperative second round when a successor takes
# partitions another member holds: at most 3 per pod. Measured (cooperative-sticky, session 6 s,
# two pods): one per batch, 2 in 11 of 14 runs, 4 or 5 in 3 runs on a loaded machine and 6 once in
# a full CI run; both in one batch, 2 to 4 in 14 runs. A sidecar that stays in the group until it
# has formed without its consumer is caught by the leave delay (LEFT_AT_ONCE_SECONDS), which
# measures it directly; this bound catches a take-out that keeps rebalancing.
TAKE_OUT_GENERATIONS = 3 * REPLICAS
# From a sidecar's SIGTERM to its LeaveGroup sent (its close returned).
LEFT_AT_ONCE_SECONDS = 1.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(
        tmp_path_factory.mktemp("lab"), fleet=False, pods=True, partitions=4
    ) as running:
        yield running


def statefulset(lab: Lab, replicas: int, name: str = NAME) -> dict[str, Any]:
    """The application, `<name>-consumer`, consuming topic `name` as group `name`."""
    workload = f"{name}-consumer"
    env = {k: v for k, v in lab.consumer_env(0, name).items() if k != "POD_NAME"}
    container = {
        "name": "consumer",
        "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
        "command": ["python", "-m", "rebalancer_lab.consumer"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *({"name": k, "value": v} for k, v in env.items()),
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": workload, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": workload,
            "selector": {"matchLabels": {"app": workload}},
            "template": {
                "metadata": {"labels": {"app": workload}},
                "spec": {"containers": [container]},
            },
        },
    }


def consumer_group(
    lab: Lab, name: str, port: int, batch: int, enforce: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The token Secret and the ConsumerGroup of statefulset(lab, ..., name), its rollouts
    `batch` pods at a time, its sidecars (not injected yet) on `port`."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-token", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    group = {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [lab.bootstrap]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
            "policy": {
                "observe": {"intervalSeconds": 2, "reportTtlSeconds": 20},
                "rollout": {"enabled": True, "maxBatchSize": batch, "settleSeconds": 2},
                "enforce": {
                    **(enforce or {}),
                    "sidecar": {"port": port, "tokenSecretRef": {"name": f"{name}-token"}},
                },
            },
        },
    }
    return [secret, group]


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


def logged_at(text: str, phrase: str) -> list[datetime]:
    """When the lines of a container log that contain `phrase` were written (the sidecar's and
    the lab consumer's logging starts each line with asctime)."""
    return [
        datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        for line in text.splitlines()
        if phrase in line
    ]


def revocations(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(r"revoked .*-\[(?!-\])", line)]


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def sidecar_call(host: str, port: int, path: str, token: str | None = TOKEN) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://{host}:{port}{path}", headers=headers)
    with DIRECT.open(request, timeout=3) as answer:
        return str(answer.read().decode())


def sidecar_view(host: str, port: int) -> dict[str, Any] | None:
    """The sidecar's /v1/group at host:port; None while nothing answers there."""
    try:
        return dict(json.loads(sidecar_call(host, port, "/v1/group")))
    except OSError:
        return None


def joined_view(host: str, port: int) -> dict[str, Any] | None:
    """The sidecar's /v1/group once it is in the group: it answers with generation -1 and no
    member id from its start until its first assignment."""
    view = sidecar_view(host, port)
    return view if view is not None and view.get("generation", -1) >= 0 else None


def outcomes_written(host: str, port: int, status: str) -> float:
    """How many outcomes with `status` this sidecar wrote as its group's actor."""
    text = sidecar_call(host, port, "/metrics", token=None)
    line = f'rebalancer_sidecar_outcomes_total{{status="{status}"}}'
    return sum(float(row.split()[-1]) for row in text.splitlines() if row.startswith(line))


def refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def patch_cg(lab: Lab, patch: dict[str, Any], name: str = NAME) -> None:
    kubectl(lab, "patch", "consumergroup", name, "--type=merge", "-p", json.dumps(patch))


def inject(lab: Lab, on: bool, name: str = NAME) -> None:
    patch_cg(lab, {"spec": {"policy": {"enforce": {"sidecar": {"inject": on}}}}}, name)


def rolled_out(lab: Lab, name: str = NAME) -> dict[str, Any] | None:
    """status.settings.sidecar once every pod runs what it describes."""
    settings = (get_cg(lab, name).get("status") or {}).get("settings") or {}
    sidecar = settings.get("sidecar") or {}
    return dict(sidecar) if sidecar.get("rolledOut") else None


def the_pods(lab: Lab, name: str = NAME) -> list[dict[str, Any]]:
    found = pods(lab, f"{name}-consumer")
    names = [f"{name}-consumer-{ordinal}" for ordinal in range(REPLICAS)]
    assert sorted(found) == names, list(found)
    return [found[name] for name in names]


def uids(found: list[dict[str, Any]]) -> list[str]:
    return [pod["metadata"]["uid"] for pod in found]


def stable_with_all_members(lab: Lab, name: str = NAME) -> dict[str, Any] | None:
    found = get_cg(lab, name).get("status") or {}
    members = (found.get("group") or {}).get("members")
    stable = (found.get("group") or {}).get("state") == "Stable"
    return found if members == REPLICAS and stable else None


def settled(lab: Lab, name: str = NAME) -> dict[str, Any] | None:
    """status.group once Stable with the application's members on the topic's 4 partitions."""
    group_status = get_cg(lab, name)["status"].get("group") or {}
    stable = group_status.get("state") == "Stable" and group_status.get("members") == REPLICAS
    return group_status if stable and group_status.get("assignedPartitions") == 4 else None


def completed(lab: Lab, name: str = NAME) -> dict[str, Any]:
    found_status = get_cg(lab, name)["status"]
    found_rollout = dict(found_status.get("rollout") or {})
    done = found_rollout.get("phase") == "Completed"
    seen = json.dumps({k: found_status.get(k) for k in ("rollout", "group")})
    assert done and found_rollout.get("kind") == "rolling-update", seen
    return found_rollout


def replaced(
    lab: Lab, before: list[dict[str, Any]], containers: list[str], name: str = NAME
) -> list[dict[str, Any]] | None:
    """The workload's pods once all are new since `before`, Ready, running `containers`."""
    found = the_pods(lab, name)
    fresh = not set(uids(found)) & set(uids(before))
    done = all(container_names(p) == containers and ready(p) for p in found)
    return found if fresh and done else None


def take_the_sidecar_out(
    lab: Lab, with_it: list[dict[str, Any]], generation: int, batch: int, name: str = NAME
) -> None:
    """`inject: false` on a settled group at `generation` whose pods `with_it` run the sidecar:
    the pods are replaced without it, the group forms again at the cost of a few generations
    and stays formed, and each sidecar left the group as soon as it was stopped."""
    started = time.monotonic()
    inject(lab, False, name)
    plain = eventually(
        lambda: replaced(lab, with_it, ["consumer"], name), 180, "the pods replaced without it"
    )
    print(f"inject off to Ready pods without it: {time.monotonic() - started:.1f} s")
    removed = eventually(lambda: rolled_out(lab, name), 60, "status.settings.sidecar.rolledOut")
    assert (removed["inject"], removed["injected"], removed["reason"]) == (
        False,
        False,
        "SidecarRemoved",
    )
    assert "SidecarRemoved" in [e["reason"] for e in events_for(lab, name)]
    rollout = eventually(lambda: completed(lab, name), 60, "the rollout without it completed")
    assert rollout["batchSizes"] == [batch] * (REPLICAS // batch), rollout
    # The group forms again: Stable, the two new consumers on all 4 partitions.
    settled_again = eventually(lambda: settled(lab, name), 90, "the group Stable on 4 partitions")
    print(f"inject off to the group settled: {time.monotonic() - started:.1f} s")
    time.sleep(8)  # a sidecar that did not leave would be evicted, a new generation, by now
    final = get_cg(lab, name)["status"]["group"]
    print(f"take out: generations {generation} before, {final['generation']} at the end")
    assert final["state"] == "Stable" and final["assignedPartitions"] == 4, final
    assert final["generation"] == settled_again["generation"], "no generation after settling"
    details = final["memberDetails"]
    assert sorted(m["host"] for m in details) == sorted(p["metadata"]["name"] for p in plain)
    assert [m["generation"] for m in details] == [final["generation"]] * REPLICAS, details
    assert sum(m["partitions"] for m in details) == 4, details
    for pod in plain:
        text = log_of(lab, pod, "consumer")
        seen = [int(g) for g in re.findall(r"assigned generation=(\d+)", text)]
        assert seen and max(seen) == final["generation"], (pod["metadata"]["name"], seen)
    # Each sidecar left the group as soon as it was told to stop (0.01 to 0.24 s measured); it
    # did not stay for the group to form again without its consumer.
    for pod in with_it:
        text = log_of(lab, pod, SIDECAR)
        stopped = logged_at(text, "stopping: leaving the group")
        left = logged_at(text, "left the group")
        assert len(stopped) == 1 and len(left) == 1, text[-2000:]
        delay = (left[0] - stopped[0]).total_seconds()
        print(f"{pod['metadata']['name']}: sidecar stopped to left the group: {delay:.2f} s")
        assert 0 <= delay < LEFT_AT_ONCE_SECONDS, text[-2000:]
    taken = final["generation"] - generation
    assert taken <= TAKE_OUT_GENERATIONS, f"{taken} generations to take the sidecar out"


def test_inject_rolls_the_sidecar_into_two_pods_and_one_of_them_enforces(lab: Lab) -> None:
    from rebalancer_lab.producer import ensure_topic

    asyncio.run(ensure_topic(lab.bootstrap, NAME, 4))
    port = free_port()
    # One pod per batch; test_one_batch_of_two_pods_takes_the_sidecar_in_and_out does both.
    group = consumer_group(lab, NAME, port, batch=1, enforce={"requestToken": "first"})
    apply(lab, statefulset(lab, REPLICAS), *group)

    initial = eventually(
        lambda: stable_with_all_members(lab), 120, f"the application's {REPLICAS} members, Stable"
    )
    before = the_pods(lab)
    assert [container_names(pod) for pod in before] == [["consumer"]] * REPLICAS

    # Inject: the pod template gets the sidecar and the pods are replaced by the managed rollout.
    started = time.monotonic()
    inject(lab, True)
    found = eventually(
        lambda: replaced(lab, before, ["consumer", SIDECAR]),
        150, "the pods replaced with the sidecar, Ready",
    )  # fmt: skip
    print(f"inject to Ready pods with the sidecar: {time.monotonic() - started:.1f} s")
    for pod in found:
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
    # The managed rollout replaced the pods, not the StatefulSet controller on its own.
    rollout = eventually(lambda: completed(lab), 60, "the managed rollout of the sidecar completed")
    assert rollout["mechanism"] == "statefulset-replace", rollout
    assert rollout["batchSizes"] == [1] * REPLICAS, rollout

    # Each sidecar listens on its own pod's IP, on the one port, as on a cluster: the operator
    # finds them there. Nothing listens on the port elsewhere (no 0.0.0.0).
    addresses = [pod["status"]["podIP"] for pod in found]
    assert len(set(addresses)) == REPLICAS, addresses
    assert refused("127.0.0.1", port), "a sidecar listens beyond its pod's address"

    def joined(address: str) -> dict[str, Any]:
        return eventually(
            lambda: joined_view(address, port), 90, f"the sidecar at {address}:{port} in the group"
        )

    views = [joined(address) for address in addresses]
    assert [view["member"] for view in views] == [f"{p['metadata']['name']}-sidecar" for p in found]
    assert all(view["memberId"] for view in views)
    # One control partition, so one actor for the group.
    actors = eventually(
        lambda: (
            flags := [bool((sidecar_view(a, port) or {}).get("actor")) for a in addresses]
        ).count(True) == 1 and flags,
        60, "exactly one of the sidecars acting",
    )  # fmt: skip
    actor = addresses[actors.index(True)]

    eventually(
        lambda: settled(lab), 90, f"the group Stable again, {REPLICAS} members on 4 partitions"
    )
    time.sleep(6)  # quiet: the baseline token never enforces
    quiet = get_cg(lab, NAME)["status"]["group"]
    generation = quiet["generation"]
    print(f"inject: generations {initial['group']['generation']} before, {generation} settled")
    owned = {m["memberId"]: m["partitions"] for m in quiet["memberDetails"]}
    assert len(owned) == REPLICAS, quiet["memberDetails"]
    consumer_logs = [len(log_of(lab, pod, "consumer")) for pod in found]
    written_before = [outcomes_written(a, port, "enforced") for a in addresses]

    started = time.monotonic()
    patch_cg(lab, {"spec": {"policy": {"enforce": {"requestToken": "second"}}}})

    def enforced() -> dict[str, Any] | None:
        found_status = get_cg(lab, NAME)["status"]
        done = (found_status.get("enforcement") or {}).get("lastStatus") == "enforced"
        return found_status if done and found_status["group"]["generation"] > generation else None

    eventually(enforced, 90, "an enforced rebalance through the injected sidecars")
    print(f"token change to enforced in status: {time.monotonic() - started:.1f} s")
    time.sleep(8)  # any further generation would show by now
    after = get_cg(lab, NAME)["status"]
    assert after["group"]["generation"] == generation + 1, "exactly one new generation"
    assert after["group"]["members"] == REPLICAS, "the sidecars are not counted as members"
    assert {m["memberId"]: m["partitions"] for m in after["group"]["memberDetails"]} == owned
    assert after["enforcement"]["lastCause"] == "on-demand"
    assert after["group"]["lastRebalanceCause"] == "enforced"
    # Whichever sidecar the operator asked, one acted: the actor wrote the outcome, the other
    # wrote none and reads the actor's from the control topic.
    written = [
        outcomes_written(a, port, "enforced") - w
        for a, w in zip(addresses, written_before, strict=True)
    ]
    assert written == [1.0 if a == actor else 0.0 for a in addresses], (written, actor)
    request_id = after["enforcement"]["lastRequestId"]
    answers = [json.loads(sidecar_call(a, port, f"/v1/enforce/{request_id}")) for a in addresses]
    actor_name = views[addresses.index(actor)]["member"]
    assert [(a["status"], a["actor"]) for a in answers] == [("enforced", actor_name)] * REPLICAS
    for pod, offset in zip(found, consumer_logs, strict=True):
        assert revocations(log_of(lab, pod, "consumer")[offset:]) == []
    messages = [str(e["message"]) for e in events_for(lab, NAME)]
    assert any("cause enforced" in message for message in messages), messages
    assert uids(found) == uids(the_pods(lab)), "no pod restarted"

    # Inject off: both pods are replaced again, without the sidecar, one per batch.
    take_the_sidecar_out(lab, found, generation + 1, batch=1)


def test_one_batch_of_two_pods_takes_the_sidecar_in_and_out(lab: Lab) -> None:
    # Both pods stop together: two consumers (and, when the sidecar goes, two sidecars) leave a
    # second or so apart, so a leader may leave the group while it is forming; Apache Kafka's
    # coordinator then picks a new leader among the members that rejoined.
    from rebalancer_lab.producer import ensure_topic

    name = "injected-b"
    port = free_port()
    asyncio.run(ensure_topic(lab.bootstrap, name, 4))
    apply(lab, statefulset(lab, REPLICAS, name), *consumer_group(lab, name, port, batch=2))
    initial = eventually(
        lambda: stable_with_all_members(lab, name), 120, f"{REPLICAS} members, Stable"
    )
    before = the_pods(lab, name)

    started = time.monotonic()
    inject(lab, True, name)
    found = eventually(
        lambda: replaced(lab, before, ["consumer", SIDECAR], name),
        150, "the pods replaced with the sidecar, Ready",
    )  # fmt: skip
    print(f"inject to Ready pods with the sidecar: {time.monotonic() - started:.1f} s")
    rollout = eventually(lambda: completed(lab, name), 60, "the rollout of the sidecar completed")
    assert rollout["batchSizes"] == [REPLICAS], rollout
    eventually(lambda: settled(lab, name), 90, "the group Stable on 4 partitions")
    print(f"inject to the group settled: {time.monotonic() - started:.1f} s")

    addresses = [pod["status"]["podIP"] for pod in found]
    eventually(
        lambda: all(joined_view(a, port) for a in addresses), 60, "both sidecars in the group"
    )
    time.sleep(4)  # the sidecars' joins are over by now
    formed = eventually(lambda: settled(lab, name), 30, "the group Stable with the sidecars")
    generation = int(formed["generation"])
    print(f"inject: generations {initial['group']['generation']} before, {generation} settled")

    take_the_sidecar_out(lab, found, generation, batch=REPLICAS, name=name)


def test_a_running_deployment_gets_the_sidecar_and_loses_it_again(lab: Lab) -> None:
    # The template write pauses the Deployment (marked held-for-rollout) and the planner steps
    # the rollout from there; with one replica the one step is the whole rollout.
    from rebalancer_lab.producer import ensure_topic

    name = "injected-d"
    asyncio.run(ensure_topic(lab.bootstrap, name, 2))
    port = free_port()
    deployment = statefulset(lab, 1)
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
    address = pod["status"]["podIP"]
    view = eventually(
        lambda: joined_view(address, port), 90, "the injected sidecar in the Deployment's group"
    )
    assert view["memberId"]
    status = (get_cg(lab, name)["status"].get("settings") or {}).get("sidecar") or {}
    assert status.get("injected") is True, status

    # Inject off: the pod is replaced again, without the sidecar.
    started = time.monotonic()
    kubectl(
        lab, "patch", "consumergroup", name, "--type=merge",
        "-p", '{"spec":{"policy":{"enforce":{"sidecar":{"inject":false}}}}}',
    )  # fmt: skip

    def without_sidecar() -> dict[str, Any] | None:
        found = live()
        done = len(found) == 1 and container_names(found[0]) == ["consumer"]
        return found[0] if done and ready(found[0]) else None

    plain = eventually(without_sidecar, 150, "the Deployment's pod replaced without the sidecar")
    print(f"inject off to a Ready pod without it: {time.monotonic() - started:.1f} s")
    assert plain["metadata"]["uid"] != pod["metadata"]["uid"]
    removed = eventually(lambda: rolled_out(lab, name), 60, "status.settings.sidecar.rolledOut")
    assert (removed["inject"], removed["injected"], removed["reason"]) == (
        False,
        False,
        "SidecarRemoved",
    )
    assert "SidecarRemoved" in [e["reason"] for e in events_for(lab, name)]
