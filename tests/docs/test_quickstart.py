"""docs/quickstart.md and deploy/examples/quickstart/: every manifest parses and fits its schema,
and the pieces point at each other.

This checks the files; tests/operator/e2e/test_quickstart_run.py runs the doc's commands on the
lab, as tests/docs/quickstart_steps.py reads them and maps what only a real cluster has. The
ConsumerGroup it shows is also applied to a real kube-apiserver by
tests/lab/controlplane/test_crd_lifecycle.py (every ConsumerGroup block of docs/), and the
`kubectl get` header it shows is checked against the CRD's columns by test_docs_agree.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from tests.docs.quickstart_steps import COMMANDS, cells, columns, mapping_of, steps
from tests.docs.test_docs_agree import in_values, schema

from rebalancer.structs.specs import WorkloadKind, parse_spec

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"
EXAMPLES = ROOT / "deploy" / "examples" / "quickstart"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
APPLIED = re.compile(r"kubectl (?:apply|delete) -f (\S+)")
KUBERNETES_VERSION = "1.30.0"

Document = dict[str, Any]


def documents(path: Path) -> list[Document]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def of_kind(found: list[Document], kind: str) -> list[Document]:
    return [d for d in found if d.get("kind") == kind]


def fleet() -> list[Document]:
    return documents(EXAMPLES / "orders-fleet.yaml")


def env_of(deployment: Document) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_every_file_the_quickstart_applies_exists_and_every_example_is_applied() -> None:
    text = DOC.read_text(encoding="utf-8")
    applied = set(APPLIED.findall(text))
    assert applied, "the quickstart applies no file"
    for name in applied:
        assert (ROOT / name).is_file(), f"docs/quickstart.md applies {name}, which does not exist"
    for path in EXAMPLES.glob("*.yaml"):
        assert str(path.relative_to(ROOT)) in text, f"docs/quickstart.md does not use {path.name}"


def test_the_consumer_group_shown_is_the_one_applied() -> None:
    shown = [
        d
        for block in YAML_BLOCK.findall(DOC.read_text(encoding="utf-8"))
        for d in yaml.safe_load_all(block)
        if isinstance(d, dict) and d.get("kind") == "ConsumerGroup"
    ]
    assert shown == documents(EXAMPLES / "orders-consumergroup.yaml")


def test_the_consumer_group_fits_the_crd_and_manages_rollouts() -> None:
    [group] = documents(EXAMPLES / "orders-consumergroup.yaml")
    jsonschema.validate(group, schema())
    spec = parse_spec(group["spec"])
    rollout = spec.policy.rollout
    assert rollout.enabled and rollout.inject_gate
    assert spec.workload.kind is WorkloadKind.DEPLOYMENT
    # Recommend, never strimzi, in a first try: strimzi mode can roll every broker.
    assert group["spec"]["policy"]["brokerDelay"]["mode"] == "recommend"


def test_the_built_in_kinds_fit_kubernetes_schemas() -> None:
    for document in fleet():
        if document["apiVersion"].startswith("kafka.strimzi.io/"):
            continue
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_fleet_is_the_group_the_consumer_group_names() -> None:
    [group] = documents(EXAMPLES / "orders-consumergroup.yaml")
    spec = group["spec"]
    [deployment] = of_kind(fleet(), "Deployment")
    [topic] = of_kind(fleet(), "KafkaTopic")
    [account] = of_kind(fleet(), "ServiceAccount")
    namespace = group["metadata"]["namespace"]
    assert deployment["metadata"]["namespace"] == namespace == account["metadata"]["namespace"]
    assert deployment["metadata"]["name"] == spec["workload"]["name"]
    assert (
        deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    )
    env = env_of(deployment)
    assert env["KAFKA_GROUP_ID"] == spec["groupId"] == env["REBALANCER_CONSUMER_GROUP"]
    assert (
        env["KAFKA_TOPICS"] == ",".join(spec["subscription"]["topics"]) == topic["metadata"]["name"]
    )
    assert [env["KAFKA_BOOTSTRAP_SERVERS"]] == spec["kafka"]["bootstrapServers"]
    assert env["REBALANCER_NAMESPACE"] == namespace
    # Static members on a Deployment: the identity slot the operator writes when it opens a gate.
    slot = env["KAFKA_GROUP_INSTANCE_ID"]["fieldRef"]["fieldPath"]
    assert slot == "metadata.annotations['rebalancer.dev/instance-id']"
    strategy = deployment["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxSurge": "100%", "maxUnavailable": 0}


def test_the_chart_values_let_the_gate_watch_its_pod() -> None:
    [values] = documents(EXAMPLES / "chart-values.yaml")
    assert in_values(["gate", "serviceAccounts"])
    [deployment] = of_kind(fleet(), "Deployment")
    wanted = {
        "namespace": deployment["metadata"]["namespace"],
        "name": deployment["spec"]["template"]["spec"]["serviceAccountName"],
    }
    assert values["gate"]["serviceAccounts"] == [wanted]


def test_the_lab_knows_how_to_run_every_command_of_the_quickstart() -> None:
    commands = [command for step in steps() for command in step.commands]
    used = {mapping_of(command).name for command in commands}
    # The steps that reach the value are run as written, not mapped away.
    for name in ("restart", "count", "watch", "rollout-status"):
        assert name in used, f"docs/quickstart.md no longer has a {name} step"
        assert not next(m for m in COMMANDS if m.name == name).skipped
    unused = {m.name for m in COMMANDS} - used
    assert not unused, f"tests/docs/quickstart_steps.py maps commands the doc lost: {unused}"


def test_the_steps_read_each_command_with_the_output_shown_after_it() -> None:
    text = "```sh\nkubectl a \\\n  --b\nkubectl c\n```\n\n```\nout\n```\n```sh\nd\n```\n"
    first, second = steps(text)
    assert first.commands == ("kubectl a --b", "kubectl c") and first.expected == "out\n"
    assert second.commands == ("d",) and second.expected == ""


def test_the_counts_shown_before_and_after_the_restart_are_the_same() -> None:
    counts = [s.expected.strip() for s in steps() if mapping_of(s.commands[0]).name == "count"]
    assert len(counts) == 2 and counts[0] == counts[1], counts


def test_a_kubectl_row_is_read_by_its_header_even_with_empty_cells() -> None:
    # `kubectl get cg -o wide` as the lab printed it: PLAN is empty once a rollout is over.
    header = (
        "NAME     GROUP    STATE    PROTOCOL   MEMBERS   GENERATION   REBALANCES   ROLLOUT     "
        "BATCH   BATCHES   PLAN   READY   REASON        AGE"
    )
    row = (
        "orders   orders   Stable   classic    3         4            4            Completed   "
        "2       3                True    GroupStable   3m"
    )
    found = cells(header, row)
    assert found["PLAN"] == "" and found["READY"] == "True" and found["AGE"] == "3m", found
    assert columns("LAST SEEN   TYPE     REASON") == ["LAST SEEN", "TYPE", "REASON"]
    assert cells("LAST SEEN   TYPE", "2m          Normal") == {"LAST SEEN": "2m", "TYPE": "Normal"}
