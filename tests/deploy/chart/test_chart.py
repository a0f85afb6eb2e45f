"""The Helm chart renders valid, locked-down manifests for every combination of its options."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, latest_version
from tests.deploy.chart.support import (
    ALL_FEATURES,
    CHART,
    KUBE_VERSION,
    NAMESPACED,
    ROOT,
    Helm,
    Manifest,
    by_kind,
    only,
)

from rebalancer import __version__
from rebalancer_lab.manifests import GATE_RULES

ALL_GATE = {"gate": ALL_FEATURES["gate"]}

# Kinds of the Prometheus Operator: kubernetes-validate has no schema for them.
# ClusterKopfPeering: kopf's peering kind, a custom resource with no published schema.
UNVALIDATED_KINDS = {"ServiceMonitor", "PrometheusRule", "ClusterKopfPeering"}


# The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion) and the newest known.
VERSIONS = (KUBE_VERSION, latest_version())


def validate(manifests: list[Manifest]) -> set[str]:
    """Validate each manifest strictly against Kubernetes' schemas; return kinds with none."""
    unknown = set()
    for manifest, version in itertools.product(manifests, VERSIONS):
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except SchemaNotFoundError:
            unknown.add(manifest["kind"])
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            name = manifest.get("metadata", {}).get("name")
            pytest.fail(f"{manifest['kind']} {name} ({version}): {path}: {error.message}")
    return unknown


def container(manifests: list[Manifest]) -> dict[str, Any]:
    pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    found: dict[str, Any] = pod["containers"][0]
    return found


def test_lint_is_clean(helm: Helm) -> None:
    for values in ({}, ALL_FEATURES, NAMESPACED):
        result = helm.run("lint", "--strict", str(CHART), "--values", "-", stdin=json.dumps(values))
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", [None, ALL_FEATURES, NAMESPACED], ids=["default", "all", "ns"])
def test_manifests_pass_strict_kubernetes_validation(
    helm: Helm, values: dict[str, Any] | None
) -> None:
    manifests = helm.render(values)
    assert validate(manifests) <= UNVALIDATED_KINDS


def test_validation_is_not_vacuous(helm: Helm) -> None:
    manifests = helm.render()
    container(manifests)["imagePullPolicyy"] = "Always"
    with pytest.raises(pytest.fail.Exception, match="imagePullPolicyy"):
        validate(manifests)


def test_default_install(helm: Helm) -> None:
    manifests = helm.render()
    kinds = sorted(m["kind"] for m in manifests)
    assert kinds == sorted(
        [
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            # API Priority and Fairness (templates/api-priority.yaml): the operator's level,
            # and the schema that sends its keep-alives and Leases to leader-election.
            "FlowSchema",
            "FlowSchema",
            "PriorityLevelConfiguration",
            "ServiceAccount",
            "ConfigMap",
            "ClusterRole",
            "ClusterRoleBinding",
            "Service",
            "Deployment",
            # Leader election's peering object.
            "ClusterKopfPeering",
            # The admission webhook: its Service, its certificate helm made, its configuration.
            "Service",
            "Secret",
            "ValidatingWebhookConfiguration",
        ]
    )
    deployment = only(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    main = container(manifests)
    assert main["image"] == f"ghcr.io/rebalancer-dev/rebalancer:{__version__}"
    assert main["command"] == ["rebalancer"]
    assert main["args"] == [
        "operator",
        "--reports-host=0.0.0.0",
        "--reports-port=8090",
        "--liveness=http://0.0.0.0:8080/healthz",
        "--log-level=INFO",
        "--status-refresh-seconds=600",
        "--quiet-observe-factor=4",
        # The gate and the sidecar run the agent image (agent.Dockerfile), at the same version.
        f"--gate-image=ghcr.io/rebalancer-dev/rebalancer-agent:{__version__}",
        "--gate-bypass-after-seconds=120",
        "--peering=rebalancer",
        "--peering-lifetime=10",
        "--admission-port=9443",
        "--admission-cert=/etc/rebalancer/webhook/tls.crt",
        "--admission-key=/etc/rebalancer/webhook/tls.key",
    ]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "liveness"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {p["name"]: p["containerPort"] for p in main["ports"]} == {
        "http": 8090,
        "liveness": 8080,
        "webhook": 9443,
    }
    assert "REBALANCER_REPORT_TOKEN_FILE" not in {e["name"] for e in main["env"]}
    (service,) = [s for s in by_kind(manifests, "Service") if s["metadata"]["name"] == "rebalancer"]
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8090, "targetPort": "http", "protocol": "TCP"}
    ]
    # The Services send traffic to the leader's pod only (it labels itself).
    active = {**deployment["spec"]["selector"]["matchLabels"], "rebalancer.dev/active": "true"}
    assert service["spec"]["selector"] == active
    (webhook,) = [s for s in by_kind(manifests, "Service") if s["metadata"]["name"] != "rebalancer"]
    assert webhook["spec"]["selector"] == active
    assert {e["name"] for e in main["env"]} >= {"POD_NAME", "POD_NAMESPACE"}
    assert only(manifests, "ClusterKopfPeering")["metadata"]["name"] == "rebalancer"
    for manifest in manifests:
        if manifest["kind"] not in {
            "ClusterKopfPeering",
            "CustomResourceDefinition",
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingWebhookConfiguration",
            "FlowSchema",
            "PriorityLevelConfiguration",
        }:
            assert manifest["metadata"]["namespace"] == "rebalancer", manifest["kind"]


def test_pod_runs_locked_down(helm: Helm) -> None:
    for values in (None, ALL_FEATURES, NAMESPACED):
        manifests = helm.render(values)
        pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        security = container(manifests)["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        resources = container(manifests)["resources"]
        assert resources["requests"]["cpu"] and resources["requests"]["memory"]
        assert resources["limits"]["memory"]
        mounts = {m["mountPath"] for m in container(manifests)["volumeMounts"]}
        assert "/tmp" in mounts


def test_every_option_reaches_the_manifests(helm: Helm) -> None:
    manifests = helm.render(ALL_FEATURES)
    main = container(manifests)
    assert main["image"] == "ghcr.io/rebalancer-dev/rebalancer@sha256:" + "0" * 64
    assert "--history-dir=/var/lib/rebalancer/history" in main["args"]
    assert "--log-level=DEBUG" in main["args"]
    assert "--gate-bypass-after-seconds=300" in main["args"]
    assert main["args"][-1] == "--status-refresh-seconds=30"
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["REBALANCER_REPORT_TOKEN_FILE"] == "/etc/rebalancer/report-token/token"
    assert env["TZ"] == "UTC"

    (secret,) = [s for s in by_kind(manifests, "Secret") if s["type"] != "kubernetes.io/tls"]
    assert secret["metadata"]["name"] == "rebalancer-report-token"
    assert len(secret["data"]["token"]) > 40
    claim = only(manifests, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "rebalancer-history"
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["report-token"]["secret"]["secretName"] == "rebalancer-report-token"
    assert volumes["history"]["persistentVolumeClaim"]["claimName"] == "rebalancer-history"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]

    monitor = only(manifests, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http"
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True
    (service,) = [s for s in by_kind(manifests, "Service") if s["metadata"]["name"] == "rebalancer"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()

    dashboards = only(manifests, "ConfigMap")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboards["metadata"]["annotations"] == {"grafana_folder": "Kafka"}
    shipped = (CHART / "dashboards" / "rebalancer.json").read_text(encoding="utf-8")
    assert dashboards["data"]["rebalancer.json"] == shipped


def test_given_secret_and_claim_are_used(helm: Helm) -> None:
    manifests = helm.render(NAMESPACED)
    # Only the webhook's certificate: the report token's Secret is the user's.
    assert [s["metadata"]["name"] for s in by_kind(manifests, "Secret")] == [
        "rebalancer-webhook-tls"
    ]
    assert not by_kind(manifests, "PersistentVolumeClaim")
    assert not by_kind(manifests, "ServiceAccount")
    pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "existing"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["report-token"]["secret"] == {
        "secretName": "my-token",
        "items": [{"key": "bearer", "path": "bearer"}],
    }
    assert volumes["history"]["persistentVolumeClaim"]["claimName"] == "my-history"
    main = container(manifests)
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["REBALANCER_REPORT_TOKEN_FILE"] == "/etc/rebalancer/report-token/bearer"
    assert [a for a in main["args"] if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]


def test_gate_service_accounts_get_exactly_what_the_gate_needs(helm: Helm) -> None:
    manifests = helm.render(ALL_FEATURES)
    gate = [m for m in manifests if m["metadata"]["name"].endswith("-gate")]
    roles = {m["metadata"]["namespace"]: m for m in gate if m["kind"] == "Role"}
    bindings = {m["metadata"]["namespace"]: m for m in gate if m["kind"] == "RoleBinding"}
    assert set(roles) == set(bindings) == {"apps", "payments"}
    for namespace, role in roles.items():
        # The lab grants its gated fleets the same rules (rebalancer_lab.manifests).
        assert role["rules"] == GATE_RULES
        binding = bindings[namespace]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert {s["namespace"] for s in binding["subjects"]} == {namespace}
    assert {s["name"] for s in bindings["apps"]["subjects"]} == {"default", "orders"}
    assert [s["name"] for s in bindings["payments"]["subjects"]] == ["default"]
    # None by default: the chart does not know the consumers' namespaces.
    assert not [m for m in helm.render() if m["metadata"]["name"].endswith("-gate")]


def test_optional_objects_can_be_switched_off(helm: Helm) -> None:
    manifests = helm.render(
        {
            "dashboards": {"enabled": False},
            "rbac": {"create": False},
            "admission": {"enabled": False},
            "apiPriority": {"enabled": False},
            **ALL_GATE,
        }
    )
    assert {m["kind"] for m in manifests} == {
        "CustomResourceDefinition",
        "ServiceAccount",
        "Service",
        "Deployment",
        "ClusterKopfPeering",  # leader election is no RBAC: its object stays
    }


def test_the_webhook_is_scoped_to_consumergroups_and_never_blocks_when_down(helm: Helm) -> None:
    manifests = helm.render({"operator": {"watchNamespaces": ["team-a"]}})
    configuration = only(manifests, "ValidatingWebhookConfiguration")
    (webhook,) = configuration["webhooks"]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["timeoutSeconds"] == 5
    assert webhook["rules"] == [
        {
            "apiGroups": ["rebalancer.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["consumergroups"],
            "scope": "Namespaced",
        }
    ]
    assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a"]
    assert webhook["clientConfig"]["service"] == {
        "name": "rebalancer-webhook",
        "namespace": "rebalancer",
        "port": 443,
        "path": "/ownership",
    }
    (tls,) = by_kind(manifests, "Secret")
    assert webhook["clientConfig"]["caBundle"] == tls["data"]["ca.crt"]
    pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "webhook-tls", "secret": {"secretName": "rebalancer-webhook-tls"}} in pod[
        "volumes"
    ]
    ports = {p["name"]: p["containerPort"] for p in pod["containers"][0]["ports"]}
    assert ports["webhook"] == 9443


def test_cert_manager_issues_the_webhook_certificate_when_installed(helm: Helm) -> None:
    manifests = helm.render(None, "--api-versions", "cert-manager.io/v1")
    certificate = only(manifests, "Certificate")
    assert certificate["spec"]["secretName"] == "rebalancer-webhook-tls"
    assert "rebalancer-webhook.rebalancer.svc" in certificate["spec"]["dnsNames"]
    assert only(manifests, "Issuer")["spec"] == {"selfSigned": {}}
    assert not by_kind(manifests, "Secret")  # cert-manager writes it
    configuration = only(manifests, "ValidatingWebhookConfiguration")
    annotations = configuration["metadata"]["annotations"]
    assert annotations["cert-manager.io/inject-ca-from"] == "rebalancer/rebalancer-webhook"
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]


def test_schema_rejects_bad_values_clearly(helm: Helm) -> None:
    cases = {
        "replicaCount=two": "replicaCount: Invalid type. Expected: integer, given: string",
        "leaderElection.lifetimeSeconds=2": "leaderElection.lifetimeSeconds: Must be greater",
        "operator.logLevel=LOUD": "operator.logLevel must be one of the following",
        "operator.watchNamespaces[0]=Team_A": "operator.watchNamespaces.0: Does not match pattern",
        "serviceMonitor.interval=often": "serviceMonitor.interval: Does not match pattern",
        "imagee.tag=1": "Additional property imagee is not allowed",
        "admission.failurePolicy=Never": "admission.failurePolicy must be one of the following",
        "gate.bypassAfterSeconds=10": "gate.bypassAfterSeconds: Must not validate the schema",
    }
    for setting, message in cases.items():
        result = helm.template(None, "--set", setting)
        assert result.returncode != 0, setting
        assert "values don't meet the specifications of the schema" in result.stderr
        assert message in result.stderr, (setting, result.stderr)


def test_replicas_without_leader_election_are_refused_by_name(helm: Helm) -> None:
    refused = helm.template(None, "--set", "leaderElection.enabled=false")
    assert refused.returncode != 0
    assert "replicaCount 2 needs leaderElection.enabled=true or sharding.enabled=true" in (
        refused.stderr
    ), refused.stderr
    alone = helm.render({"leaderElection": {"enabled": False}, "replicaCount": 1})
    deployment = only(alone, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert not [arg for arg in container(alone)["args"] if arg.startswith("--peering")]
    assert not by_kind(alone, "ClusterKopfPeering")
    # A ReadWriteOnce history claim keeps the replicas on one node (each mounts it); a
    # ReadWriteMany one lets them spread.
    once = only(helm.render({"history": {"enabled": True}}), "Deployment")["spec"]["template"]
    affinity = once["spec"]["affinity"]["podAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["topologyKey"] == "kubernetes.io/hostname", terms
    shared = {"history": {"enabled": True, "persistence": {"accessModes": ["ReadWriteMany"]}}}
    assert "affinity" not in only(helm.render(shared), "Deployment")["spec"]["template"]["spec"]


def test_sharding_shares_the_groups_out_instead_of_electing(helm: Helm) -> None:
    manifests = helm.render(
        {"replicaCount": 3, "sharding": {"enabled": True, "shards": 12, "leaseSeconds": 15}}
    )
    args = container(manifests)["args"]
    assert {
        "--shards=12",
        "--shard-namespace=rebalancer",
        "--shard-lease-prefix=rebalancer",
        "--shard-lease-seconds=15",
    } <= set(args)
    assert not [arg for arg in args if arg.startswith("--peering")]
    assert not by_kind(manifests, "ClusterKopfPeering")
    env = {item["name"]: item for item in container(manifests)["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    strategy = only(manifests, "Deployment")["spec"]["strategy"]
    assert strategy["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}
    # The holder of shard 0 gets the reports and passes them on.
    for service in by_kind(manifests, "Service"):
        assert service["spec"]["selector"]["rebalancer.dev/active"] == "true"
    refused = helm.template(None, "--set", "sharding.enabled=true", "--set", "sharding.shards=0")
    assert refused.returncode != 0
    assert "sharding.shards: Must be greater than or equal to 1" in refused.stderr, refused.stderr


def test_every_value_is_commented() -> None:
    """A key is documented by a comment right above it or above one of its parents."""
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    documented: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    previous = ""
    undocumented = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        match = re.match(r"^(\s*)([A-Za-z_][\w.-]*):(.*)$", line)
        if match:
            indent = len(match.group(1))
            while documented and documented[-1][0] >= indent:
                documented.pop()
            own = previous.startswith("#")
            inherited = any(flag for _, flag in documented)
            is_section = match.group(3).strip() == ""
            if not (own or inherited) and not is_section:
                undocumented.append(f"line {number}: {stripped}")
            documented.append((indent, own or inherited))
        if stripped:
            previous = stripped
    assert not undocumented, "values without a comment: " + "; ".join(undocumented)


def test_schema_describes_every_default_value() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))

    def walk(node: dict[str, Any], props: dict[str, Any], path: str) -> None:
        for key, value in node.items():
            assert key in props, f"{path}{key} is not in values.schema.json"
            assert props[key].get("description"), f"{path}{key} has no description"
            nested = props[key].get("properties")
            if isinstance(value, dict) and nested is not None:
                walk(value, nested, f"{path}{key}.")

    walk(values, schema["properties"], "")


def test_chart_crd_is_the_repository_crd() -> None:
    source = sorted(p.name for p in (ROOT / "crds").glob("*.yaml"))
    copies = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert source == copies
    for name in source:
        assert (CHART / "crds" / name).read_bytes() == (ROOT / "crds" / name).read_bytes(), (
            f"charts/rebalancer/crds/{name} differs from crds/{name}; copy it over"
        )


def test_chart_version_follows_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == __version__


def test_alert_rules_pass_promtool(helm: Helm, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    rule = only(helm.render(ALL_FEATURES), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]), encoding="utf-8")
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert len(alerts) >= 2
    for alert in alerts:
        assert alert["labels"]["severity"] == "warning"
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
    # Helm must hand Prometheus its own template syntax untouched.
    frequent = next(a for a in alerts if a["alert"] == "RebalancerFrequentRebalances")
    assert (
        "{{ $labels.namespace }}/{{ $labels.consumergroup }}"
        in frequent["annotations"]["description"]
    )
