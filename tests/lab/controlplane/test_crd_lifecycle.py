"""The ConsumerGroup CRD on the real kube-apiserver: names, descriptions, samples, refusals.

docs/crd-lifecycle.md documents the refused examples as YAML blocks whose comment says what
`kubectl apply` answers; every one of them, and every sample the README, docs/ and
deploy/examples/ show, is applied here, so a doc that drifts from the CRD fails.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.lab.controlplane.conftest import Kubectl, eventually, wait_established

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / "crds" / "consumergroups.rebalancer.dev.yaml"
BASE_SAMPLE = ROOT / "deploy" / "examples" / "orders-consumergroup.yaml"
LIFECYCLE_DOC = ROOT / "docs" / "crd-lifecycle.md"
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
REFUSAL = re.compile(r"\A# refused( on change)?: (.*?)\n(?!#)", re.DOTALL)


def schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    [version] = crd["spec"]["versions"]
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def fields(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every field of a schema by its kubectl explain path, nested objects and list items too."""
    for name, child in (node.get("properties") or {}).items():
        yield f"{path}.{name}", child
        yield from fields(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        child = node.get(key)
        if isinstance(child, dict):
            yield from fields(child, f"{path}[]" if key == "items" else f"{path}{{}}")


def merged(base: Any, change: Any) -> Any:
    """`change` laid over `base` as a merge patch does (objects merge, anything else replaces)."""
    if not isinstance(base, dict) or not isinstance(change, dict):
        return copy.deepcopy(change)
    out = copy.deepcopy(base)
    for key, value in change.items():
        out[key] = merged(out.get(key), value)
    return out


@dataclass(frozen=True)
class Example:
    where: str
    document: dict[str, Any]
    refused: str | None = None  # the message kubectl answers, after "... is invalid: "
    on_change: bool = False  # refused as an update of the base sample, not as a create


def base_sample() -> dict[str, Any]:
    [document] = [d for d in yaml.safe_load_all(BASE_SAMPLE.read_text()) if d]
    found: dict[str, Any] = document
    return found


def consumer_group_blocks(path: Path) -> Iterator[tuple[str, str]]:
    """The YAML blocks of a Markdown file that show a ConsumerGroup or part of its spec."""
    text = path.read_text(encoding="utf-8")
    for match in YAML_BLOCK.finditer(text):
        block = match.group(1)
        line = text.count("\n", 0, match.start()) + 1
        documents = [d for d in yaml.safe_load_all(block) if isinstance(d, dict)]
        if any(d.get("kind") == "ConsumerGroup" or set(d) == {"spec"} for d in documents):
            yield f"{path.relative_to(ROOT)}:{line}", block


def as_consumer_group(document: dict[str, Any]) -> dict[str, Any]:
    """A whole document as it stands; a `spec:` fragment laid over the base sample."""
    if "apiVersion" in document:
        return document
    return dict(merged(base_sample(), document))


def samples() -> list[Example]:
    found: list[Example] = []
    for path in sorted((ROOT / "deploy" / "examples").rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(document, dict) and document.get("kind") == "ConsumerGroup":
                found.append(Example(str(path.relative_to(ROOT)), document))
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for where, block in consumer_group_blocks(path):
            if block.startswith("# refused"):
                continue
            for document in yaml.safe_load_all(block):
                if isinstance(document, dict):
                    found.append(Example(where, as_consumer_group(document)))
    return found


def refusals() -> list[Example]:
    found: list[Example] = []
    for where, block in consumer_group_blocks(LIFECYCLE_DOC):
        match = REFUSAL.match(block)
        assert match, f"{where}: a refused example starts with '# refused: <message>'"
        message = " ".join(line.lstrip("# ").strip() for line in match.group(2).splitlines())
        [document] = [d for d in yaml.safe_load_all(block) if d]
        found.append(Example(where, as_consumer_group(document), message, bool(match.group(1))))
    return found


@pytest.fixture(scope="module")
def crd(kubectl: Kubectl) -> dict[str, Any]:
    kubectl("apply", "--server-side", "-f", str(CRD_FILE))
    wait_established(kubectl, "consumergroups.rebalancer.dev")
    found: dict[str, Any] = json.loads(
        kubectl("get", "crd", "consumergroups.rebalancer.dev", "-o", "json").stdout
    )
    return found


def apply(kubectl: Kubectl, document: dict[str, Any]) -> Any:
    return kubectl("apply", "-f", "-", input=json.dumps(document), check=False)


def delete(kubectl: Kubectl, document: dict[str, Any]) -> None:
    metadata = document["metadata"]
    namespace = metadata.get("namespace", "default")
    kubectl("delete", "consumergroup", metadata["name"], "-n", namespace, "--ignore-not-found")


def test_every_schema_field_has_a_description() -> None:
    # The API server forbids anything but name and generateName under metadata; kubectl explain
    # shows ObjectMeta's own documentation there.
    undocumented = [
        path
        for path, node in fields(schema())
        if not node.get("description") and path != ".metadata"
    ]
    assert undocumented == [], f"fields kubectl explain shows without a description: {undocumented}"


def test_the_description_walk_sees_every_field() -> None:
    paths = {path for path, _ in fields(schema())}
    # Deep fields in each part of the schema, so a walk that stopped early would fail here.
    for path in (
        ".spec.groupId",
        ".spec.policy.rollout.consumers.maxPollIntervalMs",
        ".status.conditions[].lastTransitionTime",
        ".status.group.memberDetails[].instanceId",
        ".status.settings.sessionLimits.maxSessionTimeoutMs",
    ):
        assert path in paths


def test_kubectl_explain_shows_the_descriptions(crd: dict[str, Any], kubectl: Kubectl) -> None:
    # kubectl finds the new resource through discovery, which can lag the CRD by a moment.
    explained = eventually(
        lambda: kubectl("explain", "consumergroup.spec.groupId", check=False).stdout,
        "kubectl explain finding consumergroups",
    )
    assert "Cannot be changed once set" in explained, explained
    explained = kubectl("explain", "consumergroup.status.settings.brokerDelay.rule").stdout
    assert "How the cluster's value is chosen" in explained, explained


def test_the_crd_stays_out_of_the_kafka_category(crd: dict[str, Any], kubectl: Kubectl) -> None:
    assert crd["spec"]["names"]["categories"] == ["rebalancer"]
    in_kafka = kubectl("api-resources", "--categories=kafka", "-o", "name").stdout.split()
    assert not any(name.startswith("consumergroups.") for name in in_kafka), in_kafka
    in_ours = kubectl("api-resources", "--categories=rebalancer", "-o", "name").stdout.split()
    assert "consumergroups.rebalancer.dev" in in_ours


def test_every_sample_is_accepted(crd: dict[str, Any], kubectl: Kubectl) -> None:
    found = samples()
    places = {example.where.split(":")[0] for example in found}
    # The README's full example, the deployable ones and the docs' spec fragments.
    assert {"README.md", "deploy/examples/orders-consumergroup.yaml"} <= places, places
    assert "docs/enforcing.md" in places and "docs/kafka-security.md" in places, places
    for example in found:
        # A sample may live in a namespace of its own (the quickstart's `orders`).
        namespace = example.document["metadata"].get("namespace", "default")
        if kubectl("get", "namespace", namespace, check=False).returncode != 0:
            kubectl("create", "namespace", namespace)
        delete(kubectl, example.document)
        done = apply(kubectl, example.document)
        assert done.returncode == 0, f"{example.where}: {done.stderr}"
        delete(kubectl, example.document)


def test_every_documented_refusal_is_what_the_api_server_says(
    crd: dict[str, Any], kubectl: Kubectl
) -> None:
    found = refusals()
    changed = {json.dumps(example.document["spec"].get("workload")) for example in found}
    assert len(found) >= 7, [example.where for example in found]
    assert any(example.on_change for example in found)
    assert len(changed) > 1
    base = base_sample()
    wrong = []
    for example in found:
        delete(kubectl, base)
        if example.on_change:
            first = apply(kubectl, base)
            assert first.returncode == 0, first.stderr
        done = apply(kubectl, example.document)
        if done.returncode == 0 or example.refused not in done.stderr:
            wrong.append(f"{example.where}: documented {example.refused!r}, got {done.stderr!r}")
    delete(kubectl, base)
    assert wrong == [], "\n".join(wrong)


def test_group_id_and_workload_cannot_change_but_the_rest_can(
    crd: dict[str, Any], kubectl: Kubectl
) -> None:
    base = base_sample()
    delete(kubectl, base)
    assert apply(kubectl, base).returncode == 0
    name = ["-n", "default", "consumergroup", "orders"]

    def patch(change: dict[str, Any]) -> Any:
        return kubectl("patch", *name, "--type=merge", "-p", json.dumps(change), check=False)

    refused = patch({"spec": {"groupId": "orders-v2"}})
    assert refused.returncode != 0
    assert "spec.groupId: Forbidden: spec.groupId is immutable" in refused.stderr, refused.stderr
    for workload in ({"name": "other"}, {"kind": "Deployment"}):
        refused = patch({"spec": {"workload": workload}})
        assert "spec.workload.kind and spec.workload.name are immutable" in refused.stderr
    # What may change still does: the container, the policy, the subscription.
    allowed = patch(
        {
            "spec": {
                "workload": {"container": "consumer"},
                "subscription": {"topics": ["orders", "refunds"]},
                "policy": {"observe": {"intervalSeconds": 20}},
            }
        }
    )
    assert allowed.returncode == 0, allowed.stderr
    stored = json.loads(kubectl("get", *name, "-o", "json").stdout)
    assert stored["spec"]["groupId"] == "orders"
    assert stored["spec"]["workload"] == {
        "kind": "StatefulSet",
        "name": "orders-consumer",
        "container": "consumer",
    }
    delete(kubectl, base)
