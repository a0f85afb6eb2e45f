"""Render the Helm chart with a real helm; the values the chart tests render with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "rebalancer"
RELEASE = "rebalancer"
NAMESPACE = "rebalancer"
KUBE_VERSION = "1.30.0"

Manifest = dict[str, Any]


def find_helm() -> str | None:
    beside = Path(sys.executable).parent / "helm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("helm")


@dataclass(frozen=True)
class Helm:
    binary: str
    env: Mapping[str, str]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(self.env),
            check=False,
            timeout=60,
        )

    def template(
        self, values: Mapping[str, Any] | None = None, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        args = [
            "template",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--include-crds",
            "--kube-version",
            KUBE_VERSION,
        ]
        if values is None:
            return self.run(*args, *extra)
        # JSON is YAML, and keeps every value's type exactly as the test wrote it.
        return self.run(*args, "--values", "-", *extra, stdin=json.dumps(values))

    def render(self, values: Mapping[str, Any] | None = None, *extra: str) -> list[Manifest]:
        result = self.template(values, *extra)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


# Every optional feature of the chart switched on, with the chart creating what it can.
ALL_FEATURES: dict[str, Any] = {
    "image": {"digest": "sha256:" + "0" * 64},
    "imagePullSecrets": [{"name": "registry"}],
    "operator": {
        "logLevel": "DEBUG",
        "extraArgs": ["--status-refresh-seconds=30"],
        "extraEnv": [{"name": "TZ", "value": "UTC"}],
    },
    "reportToken": {"enabled": True},
    "rbac": {"create": True, "strimzi": True},
    "gate": {
        "bypassAfterSeconds": 300,
        "serviceAccounts": [
            {"namespace": "apps", "name": "default"},
            {"namespace": "apps", "name": "orders"},
            {"namespace": "payments", "name": "default"},
        ],
    },
    "history": {"enabled": True, "persistence": {"storageClassName": "fast", "size": "5Gi"}},
    "serviceAccount": {"annotations": {"example.com/role": "rebalancer"}},
    "service": {"annotations": {"example.com/scrape": "true"}},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Kafka"}},
    "podAnnotations": {"example.com/team": "streaming"},
    "podLabels": {"team": "streaming"},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ops"]}]}
                ]
            }
        }
    },
}

# The other branch of each option: watching given namespaces, bringing one's own Secret and
# claim.
NAMESPACED: dict[str, Any] = {
    "operator": {"watchNamespaces": ["team-a", "team-b"]},
    "reportToken": {"enabled": True, "existingSecret": "my-token", "key": "bearer"},
    "history": {"enabled": True, "persistence": {"existingClaim": "my-history"}},
    "serviceAccount": {"create": False, "name": "existing"},
}


def by_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m.get("kind") == kind]


def only(manifests: list[Manifest], kind: str) -> Manifest:
    found = by_kind(manifests, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]
