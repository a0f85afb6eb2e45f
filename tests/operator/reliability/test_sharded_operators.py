"""Two `rebalancer operator --shards 4` processes share eight ConsumerGroups; one is SIGKILLed
and the other serves all eight within 15 s.

Real parts: kube-apiserver and etcd (the session's cluster), kopf, the operator's processes and
their shard Leases. No Kafka: the groups point at a port nobody listens on, and what is checked
is who serves them (status.servedBy, written when a replica takes the group up), not what the
observer sees. Each replica runs the daemons of the groups it serves only, and neither takes
kopf's finalizer off the others' groups, nor marks their spec handled before the serving one
has validated it. Each group is placed in a shard by its label
rebalancer.dev/shard, two per shard, so both replicas have groups. The killed replica leaves
its Leases to expire (no goodbye), as a lost node does. Sampled every 0.5 s, a group's servedBy
only ever moves from the killed replica to the live one, never back and forth.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.kube_clusters import SharedCluster
from tests.polling import eventually

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.shards import SHARD_LABEL
from rebalancer.structs.consumer_group import GROUP, PLURAL, VERSION
from rebalancer_lab.processes import ChildProcess, python_module

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SHARDS = 4
GROUPS = [f"orders-{i}" for i in range(8)]
TAKEOVER_LIMIT_S = 15.0
FINALIZER = "rebalancer.dev/observer"
SERVED = re.compile(r"^(?P<who>\S+) \(shard (?P<shard>\d+) of (?P<of>\d+)\)$")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def consumer_group(ns: str, name: str, shard: int) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConsumerGroup",
        "metadata": {"name": name, "namespace": ns, "labels": {SHARD_LABEL: str(shard)}},
        "spec": {
            "groupId": name,
            "kafka": {"bootstrapServers": [f"127.0.0.1:{free_port()}"]},
            "subscription": {"topics": [name]},
            "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
        },
    }


class Replica(ChildProcess):
    port: int = 0

    def gauge(self, name: str) -> float | None:
        """A gauge of the replica's /metrics; None while it does not answer."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        values = [line.split()[-1] for line in text.splitlines() if line.startswith(f"{name} ")]
        return float(values[0]) if values else None


@pytest.fixture
def replicas(cluster: SharedCluster, ns: str, tmp_path: Path) -> Iterator[list[Replica]]:
    children = []
    for label in ("first", "second"):
        port = free_port()
        argv = python_module(
            "rebalancer",
            "operator",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--namespace",
            ns,
            "--reports-host",
            "127.0.0.1",
            "--reports-port",
            str(port),
            "--shards",
            str(SHARDS),
            "--shard-namespace",
            ns,
        )
        # Outside a pod: the replica's name is host/pid, and no pod is labelled.
        env = {"POD_NAME": "", "POD_NAMESPACE": "", "POD_IP": ""}
        child = Replica(f"operator-{label}", argv, tmp_path / f"{label}.log", env)
        child.port = port
        children.append(child)
    for child in children:
        child.start()
    try:
        yield children
    finally:
        for child in children:
            child.stop(grace=5)


def served_by(kube: KubernetesApi, ns: str) -> dict[str, str | None]:
    found = kube.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    return {
        item["metadata"]["name"]: (item.get("status") or {}).get("servedBy")
        for item in found["items"]
    }


def finalizers(kube: KubernetesApi, ns: str) -> dict[str, list[str]]:
    found = kube.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    return {
        item["metadata"]["name"]: item["metadata"].get("finalizers") or []
        for item in found["items"]
    }


def pid_of(served: str | None) -> int | None:
    match = SERVED.match(served or "")
    return int(match["who"].rsplit("/", 1)[-1]) if match else None


def test_a_killed_replicas_groups_move_to_the_live_one(
    kube: KubernetesApi, ns: str, replicas: list[Replica], tmp_path: Path
) -> None:
    for index, name in enumerate(GROUPS):
        body = consumer_group(ns, name, index % SHARDS)
        kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    pids = {child.process.pid for child in replicas if child.process is not None}

    def logs() -> str:
        return "\n".join(
            path.read_text(errors="replace")[-3000:] for path in tmp_path.glob("*.log")
        )

    def all_served_by_both() -> bool:
        owners = {name: pid_of(value) for name, value in served_by(kube, ns).items()}
        return set(owners.values()) == pids and len(owners) == len(GROUPS)

    eventually(all_served_by_both, "every group served, by both replicas", 60, context=logs)
    # Two shards each, and one leader: the holder of shard 0. A shard given back is taken at
    # the other's next round, while the groups still name the replica that gave it back.
    eventually(
        lambda: [one.gauge("rebalancer_shards_held") for one in replicas] == [2.0, 2.0],
        "two shards each",
        15,
        context=logs,
    )

    def served_as_held() -> bool:
        owners = [pid_of(value) for value in served_by(kube, ns).values()]
        return sorted(owners.count(pid) for pid in pids) == [len(GROUPS) // 2] * 2

    eventually(served_as_held, "each replica serving its two shards' groups", 30, context=logs)
    # kopf runs a group's daemons on its serving replica only, and yet neither replica takes
    # kopf's finalizer off the groups it does not serve.
    eventually(
        lambda: [one.gauge("rebalancer_groups_served") for one in replicas] == [4.0, 4.0],
        "each replica running the daemons of its own four groups only",
        15,
        context=logs,
    )
    for _ in range(3):
        assert all(FINALIZER in found for found in finalizers(kube, ns).values()), logs()
        time.sleep(1)
    # Every group's spec was handled (validated) where it was served: a replica that does not
    # serve a group leaves kopf's record of the handled spec alone, or the serving replica
    # would find the spec handled already and never run its change handlers.
    validated = sum(
        path.read_text(errors="replace").count("Handler 'validate' succeeded")
        for path in tmp_path.glob("*.log")
    )
    assert validated >= len(GROUPS), (validated, logs())
    before = served_by(kube, ns)
    leaders = [one.gauge("rebalancer_leader") for one in replicas]
    assert leaders in ([0.0, 1.0], [1.0, 0.0]), leaders
    for index, name in enumerate(GROUPS):
        match = SERVED.match(before[name] or "")
        assert match and int(match["shard"]) == index % SHARDS and int(match["of"]) == SHARDS
    killed, live = replicas
    assert killed.process is not None and live.process is not None
    moving = {name for name, value in before.items() if pid_of(value) == killed.process.pid}
    assert 0 < len(moving) < len(GROUPS)
    history: dict[str, list[int | None]] = {name: [pid_of(before[name])] for name in GROUPS}
    killed.kill()
    started = time.monotonic()
    while time.monotonic() - started < 40:
        now = {name: pid_of(value) for name, value in served_by(kube, ns).items()}
        for name, pid in now.items():
            if history[name][-1] != pid:
                history[name].append(pid)
        if all(pid == live.process.pid for pid in now.values()):
            break
        time.sleep(0.5)
    took = time.monotonic() - started
    print(f"\n{len(moving)} groups served by the live replica {took:.1f} s after the kill")
    for name in GROUPS:
        expected = [killed.process.pid, live.process.pid] if name in moving else [live.process.pid]
        assert history[name] == expected, (name, history[name], logs())
    assert took < TAKEOVER_LIMIT_S, logs()
    assert live.gauge("rebalancer_shards_held") == SHARDS
    assert live.gauge("rebalancer_leader") == 1.0
    eventually(
        lambda: live.gauge("rebalancer_groups_served") == len(GROUPS),
        "the live replica running every group's daemons",
        15,
        context=logs,
    )
    # Deleted, a group goes: the serving replica's delete handler ends and lets it go.
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, GROUPS[0])
    eventually(lambda: GROUPS[0] not in served_by(kube, ns), "the deleted group gone", 30)
