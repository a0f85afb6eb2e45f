"""deploy/examples/strimzi/ and docs/quickstart-strimzi.md: valid, and consistent with Strimzi.

Each ConsumerGroup is checked against the CRD's schema and parsed by the operator's own parser;
the Kafka excerpt against the Strimzi CRD the settings tests install; the Secrets against
Kubernetes' schemas; the chart values by a real helm. The references between them are the ones
Strimzi makes: the bootstrap Service, the cluster CA Secret, a KafkaUser's Secret and its keys,
and the KafkaUser's ACLs cover what the operator asks of Kafka (docs/kafka-security.md).
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tests.deploy.chart.support import ROOT, Helm
from tests.reconcilers.settings.support import STRIMZI_CRD

from rebalancer.structs.broker_delay_policy import DelayMode
from rebalancer.structs.specs import parse_spec

EXAMPLES = ROOT / "deploy" / "examples" / "strimzi"
QUICKSTART = ROOT / "docs" / "quickstart-strimzi.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What the lab listens on; a user's cluster is never there.
LAB_ADDRESS = re.compile(r"127\.\d+\.\d+\.\d+|localhost|\[::1\]")
# The keys of the Secret Strimzi's User Operator writes for each authentication type.
USER_SECRET_KEYS = {
    "scram-sha-512": {"password", "sasl.jaas.config"},
    "tls": {"ca.crt", "user.crt", "user.key", "user.p12", "user.password"},
}
SASL_FOR = {"SCRAM-SHA-512": "scram-sha-512"}

Document = dict[str, Any]


def example_documents() -> list[Document]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name == "chart-values.yaml":
            continue
        found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return found


def quickstart_documents() -> list[Document]:
    text = QUICKSTART.read_text(encoding="utf-8")
    return [
        doc
        for block in YAML_BLOCK.findall(text)
        for doc in yaml.safe_load_all(block)
        if isinstance(doc, dict)
    ]


def of_kind(documents: list[Document], kind: str) -> list[Document]:
    return [doc for doc in documents if doc.get("kind") == kind]


def schema_of(crd: Document) -> Document:
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    found: Document = version["schema"]["openAPIV3Schema"]
    return found


CONSUMER_GROUP_SCHEMA = schema_of(
    yaml.safe_load((ROOT / "crds" / "consumergroups.rebalancer.dev.yaml").read_text())
)


def consumer_groups() -> list[Document]:
    return of_kind(example_documents(), "ConsumerGroup")


def test_the_examples_show_scram_and_tls_without_lab_addresses() -> None:
    groups = consumer_groups()
    assert {("sasl" in g["spec"]["kafka"]) for g in groups} == {True, False}
    assert any("clientCertSecretRef" in g["spec"]["kafka"].get("tls", {}) for g in groups)
    for path in [*EXAMPLES.glob("*.yaml"), QUICKSTART]:
        found = LAB_ADDRESS.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(ROOT)} names a lab address: {found}"


@pytest.mark.parametrize(
    "group",
    [*consumer_groups(), *of_kind(quickstart_documents(), "ConsumerGroup")],
    ids=lambda g: g["metadata"]["name"],
)
def test_each_consumer_group_fits_the_crd_and_the_operator_parses_it(group: Document) -> None:
    jsonschema.validate(group, CONSUMER_GROUP_SCHEMA)
    spec = parse_spec(group["spec"])
    delay = spec.policy.broker_delay
    # recommend by default (strimzi mode rolls every broker), with the Kafka resource named so
    # that switching to strimzi is one line.
    assert delay is not None and delay.mode is DelayMode.RECOMMEND
    assert delay.strimzi is not None and delay.strimzi.name


@pytest.mark.parametrize("group", consumer_groups(), ids=lambda g: g["metadata"]["name"])
def test_each_consumer_group_points_at_what_strimzi_makes(group: Document) -> None:
    documents = example_documents()
    kafka = group["spec"]["kafka"]
    cluster = group["spec"]["policy"]["brokerDelay"]["strimzi"]
    name, namespace = cluster["name"], cluster["namespace"]
    for server in kafka["bootstrapServers"]:
        host, _, port = server.rpartition(":")
        assert host == f"{name}-kafka-bootstrap.{namespace}.svc", server
        assert port in {"9093", "9094"}, server
    assert kafka["tls"]["caSecretRef"] == {"name": f"{name}-cluster-ca-cert", "key": "ca.crt"}

    users = {u["metadata"]["name"]: u for u in of_kind(documents, "KafkaUser")}
    secrets = {s["metadata"]["name"]: s for s in of_kind(documents, "Secret")}
    refs: list[tuple[str, str]] = []
    if "sasl" in kafka:
        sasl = kafka["sasl"]
        refs += [
            (r["name"], r["key"]) for r in (sasl["usernameSecretRef"], sasl["passwordSecretRef"])
        ]
        auth = SASL_FOR[sasl["mechanism"]]
    else:
        cert = kafka["tls"]["clientCertSecretRef"]
        refs += [(cert["name"], cert["certKey"]), (cert["name"], cert["keyKey"])]
        auth = "tls"
    [user_name] = {secret for secret, _ in refs if secret in users}
    user = users[user_name]
    assert user["metadata"]["labels"]["strimzi.io/cluster"] == name
    assert user["spec"]["authentication"]["type"] == auth
    for secret, key in refs:
        if secret in users:
            assert key in USER_SECRET_KEYS[auth], f"Strimzi's Secret {secret} has no key {key}"
        else:
            assert key in secrets[secret]["stringData"], f"Secret {secret} has no key {key}"
            assert secrets[secret]["stringData"][key] == user["metadata"]["name"]

    # The operator's minimal ACLs (docs/kafka-security.md), for the group and its topics.
    granted = {
        (acl["resource"]["type"], acl["resource"].get("name"), op)
        for acl in user["spec"]["authorization"]["acls"]
        if acl.get("type", "allow") == "allow"
        for op in acl["operations"]
    }
    wanted = {("group", group["spec"]["groupId"], "Describe"), ("cluster", None, "DescribeConfigs")}
    wanted |= {("topic", t, "Describe") for t in group["spec"]["subscription"]["topics"]}
    assert wanted <= granted, wanted - granted


def test_the_secrets_fit_kubernetes_schemas() -> None:
    secrets = of_kind(example_documents(), "Secret")
    assert secrets
    for secret in secrets:
        kubernetes_validate.validate(secret, "1.30.0", strict=True)


def test_the_kafka_excerpt_fits_the_strimzi_crd_and_carries_the_delay() -> None:
    [kafka] = of_kind(quickstart_documents(), "Kafka")
    jsonschema.validate(kafka, schema_of(STRIMZI_CRD))
    assert kafka["apiVersion"] == f"kafka.strimzi.io/{STRIMZI_CRD['spec']['versions'][0]['name']}"
    assert "group.initial.rebalance.delay.ms" in kafka["spec"]["kafka"]["config"]
    ports = {listener["port"] for listener in kafka["spec"]["kafka"]["listeners"]}
    for group in consumer_groups():
        for server in group["spec"]["kafka"]["bootstrapServers"]:
            assert int(server.rpartition(":")[2]) in ports, server


def test_the_chart_values_grant_the_strimzi_patch(helm: Helm) -> None:
    values = yaml.safe_load((EXAMPLES / "chart-values.yaml").read_text(encoding="utf-8"))
    rendered = helm.render(values)
    rules = [
        rule
        for doc in rendered
        if doc["kind"] == "ClusterRole"
        for rule in doc.get("rules", [])
        if "kafka.strimzi.io" in rule.get("apiGroups", [])
    ]
    assert rules, "no rule on kafka.strimzi.io"
    assert {"get", "patch"} <= {verb for rule in rules for verb in rule["verbs"]}
    assert any("kafkas" in rule["resources"] for rule in rules)


def test_every_example_file_is_named_in_the_quickstart() -> None:
    text = QUICKSTART.read_text(encoding="utf-8")
    for path in EXAMPLES.glob("*.yaml"):
        assert path.name in text, f"docs/quickstart-strimzi.md does not mention {path.name}"
