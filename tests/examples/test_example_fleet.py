"""examples/: the example fleet's manifests fit Kubernetes and the CRD, reach Kafka through a
bootstrap Service and the operator through the chart's Service, and set what the application
reads; the lab's consumer is the example application itself.

The application's own behaviour against a real broker: test_example_consumer_install.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tests.deploy.chart.support import Helm
from tests.docs.test_docs_agree import schema

from rebalancer import __version__
from rebalancer.structs.gates import JOIN_GATE_ENV
from rebalancer.structs.specs import WorkloadKind, parse_spec
from rebalancer_example_consumer import app
from rebalancer_example_consumer.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet"
WORKLOAD_FILES = ("statefulset.yaml", "deployment.yaml")
IMAGE = f"REGISTRY/rebalancer-example-consumer:{__version__}"
KUBERNETES_VERSION = "1.30.0"
# host.namespace.svc[.cluster.local]:port
SERVICE_ADDRESS = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+\.svc(\.cluster\.local)?:\d+$")

Document = dict[str, Any]


def documents(name: str) -> list[Document]:
    text = (FLEET / name).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def workloads() -> list[Document]:
    return [
        d
        for name in WORKLOAD_FILES
        for d in documents(name)
        if d["kind"] in {"StatefulSet", "Deployment"}
    ]


def groups() -> dict[str, Document]:
    return {g["spec"]["workload"]["name"]: g for g in documents("consumergroups.yaml")}


def container(workload: Document) -> Document:
    [found] = workload["spec"]["template"]["spec"]["containers"]
    return dict(found)


def pod_env(workload: Document, pod: str, annotations: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet would resolve it for one pod."""
    fields = {"metadata.name": pod, "metadata.namespace": workload["metadata"]["namespace"]}
    fields |= {f"metadata.annotations['{k}']": v for k, v in annotations.items()}
    resolved: dict[str, str] = {}
    for entry in container(workload)["env"]:
        if "value" in entry:
            resolved[entry["name"]] = entry["value"]
        else:
            # The downward API gives "" for an annotation the pod does not (yet) carry.
            resolved[entry["name"]] = fields.get(entry["valueFrom"]["fieldRef"]["fieldPath"], "")
    return resolved


def test_both_workload_kinds_are_there_and_fit_kubernetes_schemas() -> None:
    kinds = sorted(w["kind"] for w in workloads())
    assert kinds == ["Deployment", "StatefulSet"]
    for name in WORKLOAD_FILES:
        for document in documents(name):
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_each_workload_runs_the_example_image_as_built() -> None:
    dockerfile = (ROOT / "examples" / "consumer" / "Dockerfile").read_text(encoding="utf-8")
    [entrypoint] = re.findall(r'(?m)^ENTRYPOINT \["([^"]+)"\]$', dockerfile)
    scripts = (ROOT / "examples" / "consumer" / "pyproject.toml").read_text(encoding="utf-8")
    assert f'{entrypoint} = "rebalancer_example_consumer.app:main"' in scripts
    for workload in workloads():
        spec = container(workload)
        assert spec["image"] == IMAGE, workload["metadata"]["name"]
        # The image's entry point runs the application: no command to get wrong.
        assert "command" not in spec and "args" not in spec


def test_kafka_is_a_bootstrap_service_and_the_group_manages_the_workload() -> None:
    managed = groups()
    for workload in workloads():
        name = workload["metadata"]["name"]
        env = pod_env(workload, f"{name}-0", {})
        bootstrap = env["KAFKA_BOOTSTRAP_SERVERS"]
        assert SERVICE_ADDRESS.match(bootstrap), f"{name}: {bootstrap} is not a Service address"
        group = managed[name]
        jsonschema.validate(group, schema())
        spec = parse_spec(group["spec"])
        assert spec.workload.kind is WorkloadKind(workload["kind"])
        assert spec.policy.rollout.enabled and spec.policy.rollout.inject_gate
        assert group["spec"]["kafka"]["bootstrapServers"] == [bootstrap]
        assert group["metadata"]["namespace"] == workload["metadata"]["namespace"]
        assert env["KAFKA_GROUP_ID"] == spec.group_id == env["REBALANCER_CONSUMER_GROUP"]
        assert env["KAFKA_TOPICS"].split(",") == group["spec"]["subscription"]["topics"]
        assert group["spec"]["policy"]["brokerDelay"]["mode"] == "recommend"
    assert set(managed) == {w["metadata"]["name"] for w in workloads()}


def test_no_manifest_points_at_the_loopback() -> None:
    for path in FLEET.glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"127\.0\.0\.1|localhost", text), path.name


def test_reports_reach_the_charts_service(helm: Helm) -> None:
    # The Service whose "http" port serves POST /v1/reports (the webhook's is another).
    [(service, port)] = [
        (m, p)
        for m in helm.render()
        if m["kind"] == "Service"
        for p in m["spec"]["ports"]
        if p["name"] == "http"
    ]
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    wanted = f"http://{name}.{namespace}.svc:{port['port']}/v1/reports"
    for workload in workloads():
        assert pod_env(workload, "p-0", {})["REBALANCER_REPORT_URL"] == wanted


def test_the_chart_values_let_every_fleet_run_the_gate() -> None:
    [values] = documents("chart-values.yaml")
    wanted = [
        {
            "namespace": w["metadata"]["namespace"],
            "name": w["spec"]["template"]["spec"]["serviceAccountName"],
        }
        for w in workloads()
    ]
    assert sorted(values["gate"]["serviceAccounts"], key=str) == sorted(wanted, key=str)
    accounts = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for name in WORKLOAD_FILES
        for d in documents(name)
        if d["kind"] == "ServiceAccount"
    }
    assert accounts == {(a["namespace"], a["name"]) for a in wanted}


def test_the_statefulset_pods_are_static_members_named_after_their_pod() -> None:
    [statefulset] = [w for w in workloads() if w["kind"] == "StatefulSet"]
    settings = load_settings(pod_env(statefulset, "orders-consumer-2", {}))
    assert settings.properties["group.instance.id"] == "orders-consumer-2"
    assert settings.properties["client.id"] == "orders-consumer-2"
    assert settings.incremental  # cooperative-sticky
    assert settings.namespace == statefulset["metadata"]["namespace"]


def test_a_deployment_pod_takes_its_identity_slot_or_waits_for_it() -> None:
    [deployment] = [w for w in workloads() if w["kind"] == "Deployment"]
    slotted = pod_env(deployment, "orders-audit-7f9c-x2", {"rebalancer.dev/instance-id": "slot-1"})
    assert load_settings(slotted).properties["group.instance.id"] == "slot-1"
    # No slot yet: the variable is there and empty, which the application reads as "take the
    # slot the gate writes" (app.main), and a dynamic member until then.
    pending = pod_env(deployment, "orders-audit-7f9c-x2", {})
    assert pending["KAFKA_GROUP_INSTANCE_ID"] == ""
    assert "group.instance.id" not in load_settings(pending).properties


def test_the_quickstart_fleet_runs_the_same_image() -> None:
    fleet = ROOT / "deploy" / "examples" / "quickstart" / "orders-fleet.yaml"
    [deployment] = [
        d
        for d in yaml.safe_load_all(fleet.read_text(encoding="utf-8"))
        if d and d["kind"] == "Deployment"
    ]
    spec = container(deployment)
    assert spec["image"] == IMAGE and "command" not in spec


def test_the_lab_runs_the_example_application() -> None:
    from rebalancer_lab import consumer, consumer_settings

    assert consumer.LabConsumer is app.ExampleConsumer
    assert consumer.main is app.main
    assert consumer.wait_for_join_gate is app.wait_for_join_gate
    assert consumer_settings.load_settings is load_settings
    assert JOIN_GATE_ENV == "REBALANCER_JOIN_GATE"


@pytest.mark.parametrize("missing", ["KAFKA_BOOTSTRAP_SERVERS", "KAFKA_GROUP_ID", "KAFKA_TOPICS"])
def test_a_missing_setting_names_the_variable(missing: str) -> None:
    [statefulset] = [w for w in workloads() if w["kind"] == "StatefulSet"]
    env = pod_env(statefulset, "orders-consumer-0", {})
    del env[missing]
    with pytest.raises(Exception, match=missing):
        load_settings(env)
