"""Security on a real Apache Kafka: SCRAM users, ACLs enforced by StandardAuthorizer, TLS.

One secured broker for the module (rebalancer_lab.broker_security: a SASL_PLAINTEXT and a
SASL_SSL listener, SCRAM-SHA-512 and SCRAM-SHA-256, no access without an ACL) and one operator
process (`rebalancer operator`, at DEBUG, so that even its most talkative log is checked for
secrets) watching a namespace of the session's Kubernetes cluster. Every ConsumerGroup reads its
credentials from a Secret, as a user's would; each failure case is one ConsumerGroup, all made
at once so that the operator observes them side by side, and each test waits for its own.

The operator's ACLs here are the minimal set docs/kafka-security.md lists: Describe on the
group, Describe on the subscribed topics, DescribeConfigs on the cluster (for managed
settings). Each is shown necessary by a user that lacks only it, and the set sufficient by a
user that has only these. The sidecar runs as the operator renders it (the application's
KAFKA_* variables, the password from a Secret through secretKeyRef) in a pod the session's
kubelet starts, with its own minimal ACLs.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka_support import eventually, free_port
from tests.kube_clusters import SharedCluster, fresh_namespace, shared_cluster

from rebalancer.clients.broker_configs import alter_group_configs
from rebalancer.clients.kafka_admin import AdminGateway
from rebalancer.clients.kubernetes_api import KubernetesApi
from rebalancer.planning.sidecar_templates import SIDECAR_CONTAINER, render_sidecar
from rebalancer.reconcilers.group_configs import reconcile_group_configs
from rebalancer.structs.broker_configs import ApplyState, ConfigOutcome
from rebalancer.structs.enforce_policy import SidecarPolicy
from rebalancer.structs.enforcement import control_topic, flip_topic
from rebalancer.structs.group_configs_spec import GroupConfigsSpec, StreamsGroupConfigsSpec
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.broker_security import BrokerSecurity, make_certificates
from rebalancer_lab.processes import ChildProcess, python_module

pytestmark = pytest.mark.e2e

GROUP = "orders"
TOPIC = "orders"
PARTITIONS = 4
CRD = ("rebalancer.dev", "v1alpha1")

# Passwords made per run, so that finding one in a log cannot be a coincidence.
PASSWORDS = {
    name: f"pw-{secrets.token_hex(10)}"
    for name in (
        "rb-operator",
        "rb-no-group",
        "rb-no-topic",
        "rb-no-configs",
        "rb-sidecar",
        "rb-sidecar-no-group",
        "rb-sidecar-no-create",
        "rb-sidecar-no-flip",
        "rb-sidecar-no-read",
        "rb-sidecar-no-write",
        "rb-group-configs",
        "rb-no-alter",
    )
}
WRONG_PASSWORD = f"pw-{secrets.token_hex(10)}"
SIDECAR_TOKEN = secrets.token_hex(16)


def group_of(case: str) -> str:
    """Each ConsumerGroup of the module manages a group of its own: one group (and one workload)
    has one owner, and a second ConsumerGroup of it would be refused or take no action."""
    return f"{GROUP}-{case}"


# The cases that connect as rb-operator, whose ACLs name each of their groups exactly.
OPERATOR_CASES = (
    "scram-512",
    "scram-256",
    "scram-tls",
    "wrong-password",
    "configs-acl",
    "unreachable",
    "tls-to-plaintext",
    "plaintext-to-tls",
    "untrusted-ca",
    "no-sasl",
    "topic-not-yet",
)
# What the operator needs to observe a group and to manage its settings (docs/kafka-security.md).
TOPIC_ACL = ("DESCRIBE", "TOPIC", TOPIC)
# A subscribed topic the operator may describe but nobody has created yet.
NOT_YET = "orders-not-yet"
CONFIGS_ACL = ("DESCRIBE_CONFIGS", "CLUSTER", "")
KIP848_GROUP = "orders-kip848"


def sidecar_acls(group: str) -> list[tuple[str, str, str]]:
    """What an enforcement sidecar of `group` needs: to join the group, to read both control
    topics, to write requests to the first, and to create both when they do not exist."""
    control, flip = control_topic(group), flip_topic(group)
    return [
        ("READ", "GROUP", group),
        ("READ", "TOPIC", control),
        ("READ", "TOPIC", flip),
        ("WRITE", "TOPIC", control),
        ("CREATE", "TOPIC", control),
        ("CREATE", "TOPIC", flip),
    ]


ACLS: dict[str, list[tuple[str, str, str]]] = {
    "rb-operator": [
        *(("DESCRIBE", "GROUP", group_of(case)) for case in OPERATOR_CASES),
        TOPIC_ACL,
        CONFIGS_ACL,
        ("DESCRIBE", "TOPIC", NOT_YET),
    ],
    "rb-no-group": [TOPIC_ACL, CONFIGS_ACL],
    "rb-no-topic": [("DESCRIBE", "GROUP", group_of("no-topic-acl")), CONFIGS_ACL],
    "rb-no-configs": [("DESCRIBE", "GROUP", group_of("no-configs-acl")), TOPIC_ACL],
    "rb-sidecar": sidecar_acls("payments"),
    "rb-sidecar-no-group": [a for a in sidecar_acls("refunds") if a[1] != "GROUP"],
    "rb-sidecar-no-create": [a for a in sidecar_acls("invoices") if a[0] != "CREATE"],
    "rb-sidecar-no-flip": [
        a for a in sidecar_acls("shipments") if a != ("READ", "TOPIC", flip_topic("shipments"))
    ],
    "rb-sidecar-no-read": [
        a for a in sidecar_acls("returns") if a != ("READ", "TOPIC", control_topic("returns"))
    ],
    "rb-sidecar-no-write": [a for a in sidecar_acls("quotes") if a[0] != "WRITE"],
    # KIP-848 group configs (spec.policy.settings of a consumer-protocol group).
    "rb-group-configs": [("ALTER_CONFIGS", "GROUP", KIP848_GROUP)],
    "rb-no-alter": [("DESCRIBE", "GROUP", KIP848_GROUP)],
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(
        log_dir=tmp_path_factory.mktemp("secured-kafka"),
        security=BrokerSecurity(users=PASSWORDS, tls=True),
    )
    broker.start()
    try:
        admin = AdminClient({**broker.admin_settings(), "log_level": "0"})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(timeout=30)
        for user, acls in ACLS.items():
            for operation, resource, name in acls:
                broker.grant(user, operation, resource, name)
        yield broker
    finally:
        broker.stop()


@dataclass
class Operator:
    cluster: SharedCluster
    kube: KubernetesApi
    namespace: str
    process: ChildProcess
    log: Path
    folder: Path

    def secret(self, name: str, data: dict[str, str]) -> None:
        body = {"metadata": {"name": name}, "stringData": data}
        self.kube.core.create_namespaced_secret(self.namespace, body)

    def group(self, name: str) -> dict[str, Any]:
        body = self.kube.custom.get_namespaced_custom_object(
            *CRD, self.namespace, "consumergroups", name
        )
        return dict(body)

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        conditions = (self.group(name).get("status") or {}).get("conditions") or []
        return next((dict(c) for c in conditions if c.get("type") == kind), {})

    def events(self, name: str | None = None) -> list[Any]:
        items = self.kube.core.list_namespaced_event(self.namespace).items
        return [e for e in items if name is None or e.involved_object.name == name]

    def operator_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    cluster = shared_cluster()
    kube = cluster.kube()
    namespace = fresh_namespace(kube, "sec")
    folder = tmp_path_factory.mktemp("secured-operator")
    argv = python_module(
        "rebalancer",
        "operator",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        namespace,
        "--reports-host",
        "127.0.0.1",
        "--reports-port",
        str(free_port()),
        "--log-level",
        "DEBUG",
    )
    process = ChildProcess("operator", argv, folder / "operator.log")
    process.start()
    try:
        yield Operator(cluster, kube, namespace, process, folder / "operator.log", folder)
    finally:
        process.stop(grace=15)
        kube.close()


def credentials(operator: Operator, name: str, user: str, password: str) -> None:
    operator.secret(name, {"username": user, "password": password})


def sasl(secret: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {
        "mechanism": mechanism,
        "usernameSecretRef": {"name": secret, "key": "username"},
        "passwordSecretRef": {"name": secret, "key": "password"},
    }


def statefulset(name: str) -> dict[str, Any]:
    """A workload with no pods: the observer wants one to exist, the settings a template."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "consumer", "image": "consumer:1"}]},
            },
        },
    }


def consumer_group(
    name: str, bootstrap: str, kafka: dict[str, Any], workload: str | None = None, **policy: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "/".join(CRD),
        "kind": "ConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "groupId": group_of(name),
            "kafka": {"bootstrapServers": [bootstrap], "requestTimeoutSeconds": 5, **kafka},
            "subscription": {"topics": [TOPIC]},
            "workload": {"kind": "StatefulSet", "name": workload or f"{name}-app"},
            "policy": {"observe": {"intervalSeconds": 2, "reportTtlSeconds": 20}, **policy},
        },
    }


# Managed settings: what makes the operator read the broker's session limits (DescribeConfigs).
# Settings are delivered only as staggered rollouts; with no pods there is nothing to roll.
SETTINGS = {
    "settings": {"sessionTimeoutMs": 10000, "maxPollIntervalMs": 60000},
    "rollout": {"enabled": True},
}


@pytest.fixture(scope="module")
def groups(secured: KafkaBroker, operator: Operator) -> Operator:
    """Every ConsumerGroup of the module, made at once."""
    plain, tls = secured.bootstrap, secured.tls_bootstrap
    credentials(operator, "operator-kafka", "rb-operator", PASSWORDS["rb-operator"])
    credentials(operator, "operator-kafka-wrong", "rb-operator", WRONG_PASSWORD)
    for user in ("rb-no-group", "rb-no-topic", "rb-no-configs"):
        credentials(operator, f"{user}-kafka", user, PASSWORDS[user])
    operator.secret("kafka-ca", {"ca.crt": secured.ca_path.read_text()})
    # A CA of its own that signed nothing the broker has: the wrong CA a user may mount.
    other = make_certificates(operator.folder / "other-ca", "127.0.0.1")
    operator.secret("other-ca", {"ca.crt": other.ca.read_text()})
    ca = {"enabled": True, "caSecretRef": {"name": "kafka-ca", "key": "ca.crt"}}
    wrong_ca = {"enabled": True, "caSecretRef": {"name": "other-ca", "key": "ca.crt"}}
    closed = f"127.0.0.1:{free_port()}"
    bodies = [
        consumer_group("scram-512", plain, {"sasl": sasl("operator-kafka")}),
        consumer_group("scram-256", plain, {"sasl": sasl("operator-kafka", "SCRAM-SHA-256")}),
        consumer_group("scram-tls", tls, {"sasl": sasl("operator-kafka"), "tls": ca}),
        consumer_group("wrong-password", plain, {"sasl": sasl("operator-kafka-wrong")}),
        consumer_group("no-group-acl", plain, {"sasl": sasl("rb-no-group-kafka")}),
        consumer_group("no-topic-acl", plain, {"sasl": sasl("rb-no-topic-kafka")}),
        consumer_group(
            "no-configs-acl",
            plain,
            {"sasl": sasl("rb-no-configs-kafka")},
            workload="settings-denied",
            **SETTINGS,
        ),
        consumer_group(
            "configs-acl",
            plain,
            {"sasl": sasl("operator-kafka")},
            workload="settings-granted",
            **SETTINGS,
        ),
        consumer_group("unreachable", closed, {"sasl": sasl("operator-kafka")}),
        consumer_group("tls-to-plaintext", plain, {"sasl": sasl("operator-kafka"), "tls": ca}),
        consumer_group("plaintext-to-tls", tls, {"sasl": sasl("operator-kafka")}),
        consumer_group("untrusted-ca", tls, {"sasl": sasl("operator-kafka"), "tls": wrong_ca}),
        consumer_group("no-sasl", plain, {}),
        consumer_group("topic-not-yet", plain, {"sasl": sasl("operator-kafka")}),
    ]
    # Subscribed to a topic that does not exist (yet) as well as to one that does.
    bodies[-1]["spec"]["subscription"]["topics"] = [TOPIC, NOT_YET]
    for body in bodies:
        workload = body["spec"]["workload"]["name"]
        operator.kube.apps.create_namespaced_stateful_set(operator.namespace, statefulset(workload))
        operator.kube.custom.create_namespaced_custom_object(
            *CRD, operator.namespace, "consumergroups", body
        )
    return operator


def degraded(operator: Operator, name: str, status: str, timeout: float = 60) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = operator.condition(name, "Degraded")
        assert found.get("status") == status, found
        return found

    return eventually(probe, timeout, f"{name}: Degraded={status}", every=0.5)


@pytest.mark.parametrize("name", ["scram-512", "scram-256", "scram-tls"])
def test_the_group_is_observed_with_credentials_from_a_secret(groups: Operator, name: str) -> None:
    found = degraded(groups, name, "False")
    assert found["reason"] == "Observed"
    group = groups.group(name)["status"]["group"]
    # Describe on the topic: the operator sees and counts its partitions.
    assert group["totalPartitions"] == PARTITIONS
    assert group["state"] in ("Empty", "Dead")  # no consumers: the broker said so
    assert group["sources"]["state"] == "broker"


# (ConsumerGroup, reason, words the message must hold: the cause, then the fix)
FAILURES = [
    (
        "wrong-password",
        "KafkaAuthenticationFailed",
        [
            "invalid credentials with SASL mechanism SCRAM-SHA-512",
            "key 'password' (spec.kafka.sasl.passwordSecretRef)",
            "Secret {ns}/operator-kafka-wrong",
        ],
    ),
    (
        "no-group-acl",
        "KafkaNotAuthorized",
        [
            "describing group 'orders-no-group-acl' failed",
            "GROUP_AUTHORIZATION_FAILED",
            "grant User:rb-no-group Describe on group 'orders-no-group-acl'",
            "docs/kafka-security.md",
        ],
    ),
    (
        "no-topic-acl",
        "KafkaNotAuthorized",
        [
            "describing topic 'orders' failed",
            "TOPIC_AUTHORIZATION_FAILED",
            "grant User:rb-no-topic Describe on topic 'orders'",
            "cannot count their partitions",
        ],
    ),
    (
        "no-configs-acl",
        "KafkaNotAuthorized",
        [
            "session limits were not read",
            "CLUSTER_AUTHORIZATION_FAILED",
            "grant User:rb-no-configs DescribeConfigs on the cluster",
        ],
    ),
    (
        "unreachable",
        "KafkaUnreachable",
        ["connection refused", "check spec.kafka.bootstrapServers"],
    ),
    (
        "tls-to-plaintext",
        "KafkaSecurityMismatch",
        ["the client speaks TLS but the listener does not", "connects with SASL_SSL"],
    ),
    (
        "plaintext-to-tls",
        "KafkaSecurityMismatch",
        ["the listener probably expects TLS", "connects with SASL_PLAINTEXT"],
    ),
    (
        "untrusted-ca",
        "KafkaTLSFailed",
        [
            "the broker's certificate could not be verified",
            "Secret {ns}/other-ca key 'ca.crt' (spec.kafka.tls.caSecretRef)",
        ],
    ),
    (
        "no-sasl",
        "KafkaSecurityMismatch",
        ["expects SASL authentication and the client sends none", "connects with PLAINTEXT"],
    ),
]


@pytest.mark.parametrize(("name", "reason", "words"), FAILURES, ids=[f[0] for f in FAILURES])
def test_each_failure_names_its_cause_and_fix(
    groups: Operator, name: str, reason: str, words: list[str]
) -> None:
    def named() -> dict[str, Any] | None:
        found = groups.condition(name, "Degraded")
        assert (found.get("status"), found.get("reason")) == ("True", reason), found
        return found

    found = eventually(named, 60, f"{name}: Degraded {reason}", every=0.5)
    message = str(found["message"])
    for word in words:
        assert word.format(ns=groups.namespace) in message, message
    ready = groups.condition(name, "Ready")
    if name not in {"no-topic-acl", "no-configs-acl"}:
        # Nothing was observed: Ready says the same, not a stale "observed".
        assert (ready.get("status"), ready.get("reason")) == ("False", reason), ready
    # The owner hears of it once, as a Warning Event with the same reason.
    warnings = [e for e in groups.events(name) if e.type == "Warning" and e.reason == reason]
    assert warnings, [(e.reason, e.message) for e in groups.events(name)]


def test_a_subscribed_topic_not_created_yet_is_no_failure(groups: Operator) -> None:
    # Kafka hides it as it hides a topic the user may not describe; DescribeTopics tells them
    # apart, so only the refusal (no-topic-acl) is Degraded.
    found = degraded(groups, "topic-not-yet", "False")
    assert found["reason"] == "Observed"
    assert groups.group("topic-not-yet")["status"]["group"]["totalPartitions"] == PARTITIONS


def test_with_describe_configs_the_settings_are_checked_against_the_brokers_limits(
    groups: Operator,
) -> None:
    def read() -> dict[str, Any] | None:
        settings = (groups.group("configs-acl").get("status") or {}).get("settings") or {}
        return settings.get("sessionLimits")

    limits = eventually(read, 60, "configs-acl: status.settings.sessionLimits", every=0.5)
    assert limits["source"] == "broker" and "message" not in limits, limits
    denied = eventually(
        lambda: ((groups.group("no-configs-acl").get("status") or {}).get("settings") or {}).get(
            "sessionLimits"
        ),
        60,
        "no-configs-acl: status.settings.sessionLimits",
        every=0.5,
    )
    assert denied["source"] == "default"
    assert "DescribeConfigs on the cluster" in denied["message"]
    assert degraded(groups, "configs-acl", "False")["reason"] == "Observed"


def test_a_refused_password_is_retried_with_backoff_and_the_operator_stays_up(
    groups: Operator,
) -> None:
    retries: list[int] = []

    def backed_off() -> bool:
        message = str(groups.condition("wrong-password", "Degraded").get("message", ""))
        match = re.search(r"\(retrying in (\d+)s\)$", message)
        if match and (not retries or retries[-1] != int(match.group(1))):
            retries.append(int(match.group(1)))
        return bool(retries) and retries[-1] >= 8

    eventually(backed_off, 90, "the wrong password retried after 2, 4, 8 s", every=0.3)
    # The delay grows (2 s doubling); a failure takes the gateway's 1.5 s grace, so the first
    # retries may be written in quick succession and one value missed, never a shrinking one.
    assert retries == sorted(retries) and retries[-1] >= 8, retries
    assert groups.process.running, groups.operator_log()[-3000:]
    warnings = [
        e
        for e in groups.events("wrong-password")
        if e.type == "Warning" and e.reason == "KafkaAuthenticationFailed"
    ]
    # One Event for the failure, not one per retry.
    assert len(warnings) == 1, [(e.reason, e.message) for e in warnings]
    assert "Traceback" not in groups.operator_log()


# -- The enforcement sidecar, as the operator renders it, in a pod of the session's kubelet --


def sidecar_pod(name: str, group: str, bootstrap: str, secret: str) -> dict[str, Any]:
    """A pod holding the sidecar the operator renders next to an application container that
    reads its Kafka password from a Secret (secretKeyRef, resolved by the kubelet)."""

    def from_secret(key: str) -> dict[str, Any]:
        return {"secretKeyRef": {"name": secret, "key": key}}

    application = {
        "name": "app",
        "image": "app:1",
        "env": [
            {"name": "KAFKA_SECURITY_PROTOCOL", "value": "SASL_PLAINTEXT"},
            {"name": "KAFKA_SASL_MECHANISM", "value": "SCRAM-SHA-512"},
            {"name": "KAFKA_SASL_USERNAME", "valueFrom": from_secret("username")},
            {"name": "KAFKA_SASL_PASSWORD", "valueFrom": from_secret("password")},
            {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "6000"},
            {"name": "KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "value": "cooperative-sticky"},
        ],
    }
    rendered = render_sidecar(
        application,
        group_id=group,
        bootstrap_servers=[bootstrap],
        policy=SidecarPolicy(inject=True, token_secret="sidecar-token"),
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [rendered.container],
            "volumes": [rendered.volume],
            "terminationGracePeriodSeconds": 5,
        },
    }


SIDECARS = {
    # pod: (group, user, password)
    "sidecar-ok": ("payments", "rb-sidecar", PASSWORDS["rb-sidecar"]),
    "sidecar-wrong": ("payments", "rb-sidecar", WRONG_PASSWORD),
    "sidecar-no-group": ("refunds", "rb-sidecar-no-group", PASSWORDS["rb-sidecar-no-group"]),
    "sidecar-no-create": ("invoices", "rb-sidecar-no-create", PASSWORDS["rb-sidecar-no-create"]),
    "sidecar-no-flip": ("shipments", "rb-sidecar-no-flip", PASSWORDS["rb-sidecar-no-flip"]),
    "sidecar-no-read": ("returns", "rb-sidecar-no-read", PASSWORDS["rb-sidecar-no-read"]),
    "sidecar-no-write": ("quotes", "rb-sidecar-no-write", PASSWORDS["rb-sidecar-no-write"]),
}


@pytest.fixture(scope="module")
def sidecars(secured: KafkaBroker, operator: Operator) -> Iterator[Operator]:
    operator.secret("sidecar-token", {"token": SIDECAR_TOKEN})
    for pod, (group, user, password) in SIDECARS.items():
        credentials(operator, f"{pod}-kafka", user, password)
        body = sidecar_pod(pod, group, secured.bootstrap, f"{pod}-kafka")
        operator.kube.core.create_namespaced_pod(operator.namespace, body)
    yield operator
    # The session's kubelet outlives the module and its broker: sidecars left running would
    # restart against a stopped broker for the rest of the session.
    for pod in SIDECARS:
        operator.kube.core.delete_namespaced_pod(pod, operator.namespace, grace_period_seconds=0)
    eventually(
        lambda: not operator.kube.core.list_namespaced_pod(operator.namespace).items or None,
        30,
        "the sidecar pods are gone",
        every=0.5,
    )


def sidecar_log(operator: Operator, pod: str) -> str:
    """Everything the pod's sidecar container wrote, over all its restarts."""
    logs = operator.cluster.pod_logs()
    folders = logs.glob(f"{operator.namespace}_{pod}_*/{SIDECAR_CONTAINER}")
    return "".join(
        path.read_text(errors="replace") for folder in folders for path in sorted(folder.glob("*"))
    )


def members(broker: KafkaBroker, group: str) -> list[str]:
    admin = AdminClient({**broker.admin_settings(), "log_level": "0"})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group]
    return [member.client_id for member in described.result(timeout=15).members]


def test_the_sidecar_joins_with_scram_and_enforces_with_its_minimal_acls(
    secured: KafkaBroker, sidecars: Operator
) -> None:
    eventually(
        lambda: "sidecar-ok-sidecar" in members(secured, "payments"),
        60,
        "the sidecar is a member of its group on the secured broker",
        every=0.5,
    )
    pod = sidecars.kube.core.read_namespaced_pod("sidecar-ok", sidecars.namespace)
    address = f"http://{pod.status.pod_ip}:{SidecarPolicy().port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def enforce() -> dict[str, Any]:
        request = urllib.request.Request(
            f"{address}/v1/enforce",
            data=json.dumps(
                {"groupId": "payments", "requestId": "secured-1", "waitSeconds": 30}
            ).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {SIDECAR_TOKEN}",
                "Content-Type": "application/json",
            },
        )
        try:
            with opener.open(request, timeout=60) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as error:
            # 409 while the sidecar's own view has not caught up with its join (it reads its
            # position every few seconds): asked again.
            raise AssertionError(f"{error.code}: {error.read()!r}") from None

    # Writing the request, reading it back and flipping the subscription need the ACLs on
    # both control topics: the request is enforced, a new generation formed.
    answer = eventually(enforce, 30, "the sidecar takes the request", every=1)
    assert answer["status"] == "enforced", answer
    assert answer["generation"] == answer["fromGeneration"] + 1, answer
    assert "refuses" not in sidecar_log(sidecars, "sidecar-ok")


@pytest.mark.parametrize(
    ("pod", "words"),
    [
        (
            "sidecar-wrong",
            ["authentication failed", "invalid credentials with SASL mechanism SCRAM-SHA-512"],
        ),
        ("sidecar-no-group", ["grant the sidecar's Kafka user Read on group 'refunds'"]),
        (
            "sidecar-no-create",
            [
                "could not be created",
                f"grant User:rb-sidecar-no-create Create on topic '{control_topic('invoices')}'",
            ],
        ),
        # Without Read on the flip topic the actor's flip would change nothing: no rebalance.
        (
            "sidecar-no-flip",
            [f"{flip_topic('shipments')}: Broker: Topic authorization failed", "grant"],
        ),
        # Without Read on the control topic no sidecar sees the requests written to it.
        (
            "sidecar-no-read",
            [f"grant the sidecar's Kafka user Read on topic {control_topic('returns')}"],
        ),
        # Without Write on it no request is recorded; the actor cannot even claim its role.
        (
            "sidecar-no-write",
            [f"grant the sidecar's Kafka user Write on topic {control_topic('quotes')}"],
        ),
    ],
)
def test_a_sidecar_without_its_credentials_or_acls_says_what_is_missing(
    sidecars: Operator, pod: str, words: list[str]
) -> None:
    def said() -> bool:
        text = sidecar_log(sidecars, pod)
        assert all(word in text for word in words), text[-2000:]
        return True

    eventually(said, 60, f"{pod}'s sidecar names the cause", every=0.5)


def test_no_secret_reaches_a_log_a_status_or_an_event(
    secured: KafkaBroker, groups: Operator, sidecars: Operator
) -> None:
    # After the cases above have run (or, alone, after every group failed at least once).
    for name, _, _ in FAILURES:

        def failed(name: str = name) -> bool:
            return groups.condition(name, "Degraded").get("status") == "True"

        eventually(failed, 60, f"{name} failed")
    eventually(
        lambda: "authentication failed" in sidecar_log(sidecars, "sidecar-wrong"),
        60,
        "the sidecar with the wrong password failed",
    )
    assert secured.security is not None
    # The lab's super user's too: the operator never had it, so it can be nowhere.
    secret_values = [
        *PASSWORDS.values(),
        WRONG_PASSWORD,
        SIDECAR_TOKEN,
        secured.security.admin_password,
    ]
    items = groups.kube.custom.list_namespaced_custom_object(
        *CRD, groups.namespace, "consumergroups"
    )["items"]
    statuses = json.dumps([item.get("status") for item in items])
    events = json.dumps([(e.reason, e.message) for e in groups.events()])
    logs = {
        "operator log": groups.operator_log(),
        "status": statuses,
        "events": events,
        **{f"{pod} log": sidecar_log(sidecars, pod) for pod in SIDECARS},
    }
    # The places looked at hold what they should: the failures, in words.
    assert "authentication failed" in logs["operator log"]
    assert "KafkaNotAuthorized" in statuses and "KafkaAuthenticationFailed" in events
    # As given, and as a Secret's data holds it (base64), should a response body be logged.
    forms = [*secret_values, *(base64.b64encode(v.encode()).decode() for v in secret_values)]
    for where, text in logs.items():
        for value in forms:
            assert value not in text, f"a secret is in the {where}"


async def _set_group_configs(broker: KafkaBroker, user: str) -> ConfigOutcome:
    gateway = AdminGateway(broker.client_settings(user, PASSWORDS[user]))
    try:
        return await alter_group_configs(
            gateway, KIP848_GROUP, {"consumer.session.timeout.ms": "50000"}
        )
    finally:
        gateway.close()


async def test_kip848_group_configs_need_alter_configs_on_the_group_and_nothing_more(
    secured: KafkaBroker,
) -> None:
    # AlterConfigs on the group alone also lets the operator read the configs back (Kafka's
    # authorizer implies DescribeConfigs from it), as docs/kafka-security.md says.
    allowed = await _set_group_configs(secured, "rb-group-configs")
    assert allowed.state is ApplyState.APPLIED, allowed.message
    refused = await _set_group_configs(secured, "rb-no-alter")
    assert refused.state is ApplyState.FAILED
    assert f"AlterConfigs on group {KIP848_GROUP!r}" in refused.message, refused.message


async def _reconcile_group_configs(broker: KafkaBroker, user: str) -> dict[str, Any]:
    gateway = AdminGateway(broker.client_settings(user, PASSWORDS[user]))
    spec = GroupConfigsSpec(
        streams=StreamsGroupConfigsSpec.model_validate({"initialRebalanceDelayMs": 6000})
    )
    try:
        return (await reconcile_group_configs(gateway, KIP848_GROUP, spec, {})).status
    finally:
        gateway.close()


async def test_spec_group_configs_need_alter_configs_on_the_group_and_nothing_more(
    secured: KafkaBroker,
) -> None:
    # No DescribeConfigs on the cluster: the broker's bounds go unread (the broker still checks
    # them itself), and the group's configs are set and read back all the same.
    allowed = await _reconcile_group_configs(secured, "rb-group-configs")
    assert allowed["state"] == "applied", allowed
    assert allowed["configs"]["streams.initial.rebalance.delay.ms"] == {
        "value": "6000",
        "source": "group-config",
    }
    refused = await _reconcile_group_configs(secured, "rb-no-alter")
    assert refused["state"] == "failed"
    assert f"DescribeConfigs on group {KIP848_GROUP!r}" in refused["message"], refused
    assert f"needs is AlterConfigs on group {KIP848_GROUP!r}" in refused["message"], refused
