"""Every container the chart or the operator creates runs without root and with a read-only root
filesystem.

The operator's own Deployment is checked in tests/deploy/chart/test_chart.py
(test_pod_runs_locked_down); RBAC least privilege, every grant named with the code that uses it,
in tests/deploy/chart/test_rbac.py; missing and wrong sidecar tokens in
tests/sidecar/test_sidecar_server.py. This adds every other pod the chart can render and the
containers the operator injects into users' workloads.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.deploy.chart.conftest import helm  # noqa: F401  (the session fixture)
from tests.deploy.chart.support import ALL_FEATURES, NAMESPACED, Helm
from tests.deploy.chart.test_learning_cronjob import LEARNING

from rebalancer.planning.gate_templates import GateOptions, gate_container

ROOT = Path(__file__).resolve().parents[3]
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"}


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    kind = manifest["kind"]
    if kind == "Pod":
        return [manifest["spec"]]
    if kind == "CronJob":
        return [manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]]
    return [manifest["spec"]["template"]["spec"]]


@pytest.mark.parametrize("values", [None, ALL_FEATURES, NAMESPACED, LEARNING])
def test_every_rendered_pod_is_locked_down(helm: Helm, values: dict[str, Any] | None) -> None:  # noqa: F811
    pods = [
        pod
        for manifest in helm.render(values)
        if manifest["kind"] in POD_KINDS
        for pod in pod_specs(manifest)
    ]
    assert pods
    for pod in pods:
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        assert not any("hostPath" in volume for volume in pod.get("volumes", []))
        pod_context = pod.get("securityContext", {})
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            context = {**pod_context, **container.get("securityContext", {})}
            where = container["name"]
            assert context.get("runAsNonRoot") is True, where
            assert context.get("runAsUser", 1) != 0, where
            assert context.get("readOnlyRootFilesystem") is True, where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not context.get("privileged"), where
            # Secrets reach containers by reference (secretKeyRef or a mounted file's path) only.
            for env in container.get("env", []):
                if env["name"].endswith("_FILE"):
                    continue
                assert "value" not in env or not re.search(
                    r"(?i)password|token|secret", env["name"]
                ), (where, env["name"])


def test_the_injected_gate_cannot_escalate_and_the_image_is_not_root() -> None:
    context = gate_container(GateOptions())["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    # The gate inherits the workload's pod securityContext; the image's own user is not root.
    users = re.findall(r"(?m)^USER\s+(\S+)", (ROOT / "Dockerfile").read_text())
    assert users and users[-1] not in {"0", "root"} and users[-1].isdigit()
