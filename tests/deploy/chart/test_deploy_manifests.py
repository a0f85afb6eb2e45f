"""deploy/rebalancer.yaml is exactly what deploy/render.py makes of the chart today."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import yaml
from tests.deploy.chart.support import ROOT, Helm


def load_renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_render", ROOT / "deploy" / "render.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_manifests_match_a_fresh_render(helm: Helm) -> None:
    renderer = load_renderer()
    committed = (ROOT / "deploy" / "rebalancer.yaml").read_text(encoding="utf-8")
    assert renderer.render(helm.binary) == committed, (
        "deploy/rebalancer.yaml is out of date: run .venv/bin/python deploy/render.py"
    )


def test_plain_manifests_install_into_their_own_namespace() -> None:
    text = (ROOT / "deploy" / "rebalancer.yaml").read_text(encoding="utf-8")
    manifests = [doc for doc in yaml.safe_load_all(text) if doc]
    assert manifests[0]["kind"] == "Namespace"
    namespace = manifests[0]["metadata"]["name"]
    # The CRDs come next, as in crds/: ConsumerGroup's and kopf's peering for leader election.
    for source in sorted((ROOT / "crds").glob("*.yaml")):
        crd = yaml.safe_load(source.read_text(encoding="utf-8"))
        assert crd in manifests[1:3], f"{source.name} is not among the first manifests"
    assert {doc["kind"] for doc in manifests[1:3]} == {"CustomResourceDefinition"}
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterKopfPeering",
        "FlowSchema",
        "PriorityLevelConfiguration",
    }
    for manifest in manifests:
        if manifest["kind"] not in cluster_scoped:
            assert manifest["metadata"]["namespace"] == namespace, manifest["kind"]
