"""`kubectl rebalancer` against the real kube-apiserver: each verb reads what the operator writes
(status through the status subresource, Rebalance Events shaped as kopf posts them) and writes
the fields the operator reads, as the user kubectl would be, and kubectl itself finds and runs
the plugin from PATH."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.kube_clusters import SharedCluster

from rebalancer import kubectl_plugin
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.structs.consumer_group import GROUP, KIND, PLURAL, VERSION
from rebalancer.structs.gates import RESUME_ANNOTATION
from rebalancer.structs.history import RebalanceCause, RebalanceEvent

pytestmark = pytest.mark.e2e

NAME = "orders"


def stamp(seconds_ago: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def create_group(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": ns},
        "spec": {
            "groupId": NAME,
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": [NAME]},
            "workload": {"kind": "StatefulSet", "name": f"{NAME}-consumer"},
            "policy": {
                "rollout": {"enabled": True},
                "enforce": {
                    "requestToken": "first",
                    "sidecar": {"tokenSecretRef": {"name": "orders-sidecar-token"}},
                },
            },
        },
    }
    return dict(kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body))


def write_status(kube: KubernetesApi, ns: str, status: dict[str, Any]) -> None:
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, NAME, {"status": status}
    )


def post_rebalance(kube: KubernetesApi, ns: str, uid: str, event: RebalanceEvent) -> None:
    """A Rebalance Event as the operator's kopf.info posts it."""
    now = stamp()
    kube.core.create_namespaced_event(
        ns,
        {
            "metadata": {"namespace": ns, "generateName": "kopf-event-"},
            "action": "Action?",
            "type": "Normal",
            "reason": "Rebalance",
            "message": event.describe(),
            "reportingComponent": "kopf",
            "reportingInstance": "dev",
            "source": {"component": "kopf"},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "name": NAME,
                "uid": uid,
                "namespace": ns,
            },
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": now,
        },
    )


def rebalance(generation: int, cause: RebalanceCause, **change: tuple[str, ...]) -> RebalanceEvent:
    return RebalanceEvent(
        namespace="",
        name=NAME,
        group_id=NAME,
        cluster="c",
        generation=generation,
        previous_generation=generation - 1,
        cause=cause,
        detected_at=time.time(),
        started_at=None,
        members=3,
        joined=change.get("joined", ()),
        left=change.get("left", ()),
        source="member-reports",
        state="Stable",
    )


def plugin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = kubectl_plugin.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def read(kube: KubernetesApi, ns: str) -> dict[str, Any]:
    return dict(kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, NAME))


def managers(body: dict[str, Any]) -> set[str]:
    return {entry["manager"] for entry in body["metadata"].get("managedFields") or []}


def test_every_verb_reads_and_writes_what_the_operator_does(
    cluster: SharedCluster, kube: KubernetesApi, ns: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = ("--kubeconfig", str(cluster.kubeconfig), "-n", ns)
    uid = create_group(kube, ns)["metadata"]["uid"]

    status, out, _ = plugin(capsys, "get", *config)
    assert status == 0
    assert out.splitlines()[1].split()[:8] == [NAME, NAME, "-", "-", "-", "-", "-", "-"]

    write_status(
        kube,
        ns,
        {
            "group": {
                "state": "PreparingRebalance",
                "members": 3,
                "generation": 8,
                "rebalances": 2,
                "lastRebalanceCause": "members-changed",
                "lastRebalanceTime": stamp(),
                "observedAt": stamp(),
            },
            "rollout": {
                "phase": "BatchJoining",
                "kind": "rolling-update",
                "batch": 2,
                "batches": 3,
                "batchSizes": [1, 1, 1],
                "startedAt": stamp(60),
                "phaseSince": stamp(5),
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Rebalancing",
                    "message": "the group is rebalancing",
                    "lastTransitionTime": stamp(),
                }
            ],
            "enforcement": {"memory": {"token": "first", "tokenSeen": True}},
        },
    )
    post_rebalance(kube, ns, uid, rebalance(7, RebalanceCause.MEMBER_LEFT, left=("orders-2",)))
    post_rebalance(
        kube, ns, uid, rebalance(8, RebalanceCause.MEMBERS_CHANGED, joined=("orders-2",))
    )
    # An Event of an older object of the same name is not this one's.
    post_rebalance(kube, ns, "0000-gone", rebalance(3, RebalanceCause.REJOIN))

    status, out, _ = plugin(capsys, "get", *config)
    assert status == 0
    header, row = out.splitlines()
    assert header.split()[:9] == [
        "NAME", "GROUP", "STATE", "MEMBERS", "GENERATION", "REBALANCES", "ROLLOUT", "BATCH",
        "READY",
    ]  # fmt: skip
    assert row.split()[:9] == [
        NAME, NAME, "PreparingRebalance", "3", "8", "2", "BatchJoining", "2/3", "False",
    ]  # fmt: skip
    status, out, _ = plugin(capsys, "get", "-A", "--kubeconfig", str(cluster.kubeconfig))
    assert status == 0 and any(line.split()[:2] == [ns, NAME] for line in out.splitlines())

    status, out, _ = plugin(capsys, "history", NAME, *config)
    assert status == 0
    rows = [line.split() for line in out.splitlines()[2:]]
    assert [(r[1], r[3], r[4], r[5]) for r in rows] == [
        ("7", "member-left", "-", "orders-2"),
        ("8", "members-changed", "orders-2", "-"),
    ]

    status, out, _ = plugin(capsys, "why", NAME, *config)
    assert status == 0
    assert "generation 8, 3 members" in out
    assert "cause:   members-changed: members joined and others left" in out
    assert "joined:  orders-2" in out
    assert "rollout: during the rolling-update started" in out

    status, out, _ = plugin(capsys, "pause", NAME, *config)
    assert status == 0, out
    paused = read(kube, ns)
    assert paused["spec"]["policy"]["rollout"]["paused"] is True
    assert "kubectl-rebalancer" in managers(paused)

    write_status(
        kube,
        ns,
        {"rollout": {"phase": "Paused", "pausedFrom": "BatchJoining", "pausedAt": stamp()}},
    )
    status, out, _ = plugin(capsys, "resume", NAME, *config)
    assert status == 0 and "goes back to BatchJoining" in out
    assert read(kube, ns)["spec"]["policy"]["rollout"]["paused"] is False

    write_status(kube, ns, {"rollout": {"phase": "Failed", "reason": "BatchDidNotSettle"}})
    status, out, _ = plugin(capsys, "resume", NAME, *config)
    assert status == 0, out
    resumed = read(kube, ns)
    assert resumed["metadata"]["annotations"][RESUME_ANNOTATION].startswith("kubectl-")

    status, out, _ = plugin(capsys, "enforce", NAME, *config)
    assert status == 0 and "requested an enforced rebalance" in out
    token = read(kube, ns)["spec"]["policy"]["enforce"]["requestToken"]
    assert token.startswith("kubectl-") and token in out

    status, _, err = plugin(capsys, "why", "absent", *config)
    assert status == 1 and "not found" in err


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_runs_the_plugin_with_the_contexts_namespace(
    cluster: SharedCluster, kube: KubernetesApi, ns: str, tmp_path: Path
) -> None:
    create_group(kube, ns)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable = bin_dir / "kubectl-rebalancer"
    executable.write_text(f'#!/bin/sh\nexec {sys.executable} -m rebalancer.kubectl_plugin "$@"\n')
    executable.chmod(0o755)
    # The user's kubeconfig, its current context set to the test's namespace: the plugin
    # lists there with no -n, as kubectl would.
    kubeconfig = yaml.safe_load(cluster.kubeconfig.read_text())
    current = kubeconfig["current-context"]
    for entry in kubeconfig["contexts"]:
        if entry["name"] == current:
            entry["context"]["namespace"] = ns
    own = tmp_path / "kubeconfig"
    own.write_text(yaml.safe_dump(kubeconfig))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["KUBECONFIG"] = str(own)

    listed = subprocess.run(
        ["kubectl", "plugin", "list"], env=env, capture_output=True, text=True, check=False
    )
    assert str(executable) in listed.stdout
    done = subprocess.run(
        ["kubectl", "rebalancer", "get"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[:2] == [NAME, NAME]
