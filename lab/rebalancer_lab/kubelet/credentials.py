"""A pod's own API credentials: its ServiceAccount's token, bound to the pod, as a kubelet mounts.

A kubelet asks the API server for a token of the pod's ServiceAccount (TokenRequest, bound to the
pod's uid so that it dies with the pod) and projects it with the cluster's CA and the namespace
into `/var/run/secrets/kubernetes.io/serviceaccount/`. The lab's pods are local processes that
cannot share that path, so the kubelet writes the same three files into the pod's directory and a
kubeconfig that points at them, given to every container as `KUBECONFIG`. The processes then act
as `system:serviceaccount:<namespace>:<name>` and get exactly the RBAC a cluster would give them.

The token asks for 3607 s, as a kubelet does: kube-apiserver
(`--service-account-extend-token-expiration`, on by default) issues such tokens valid for a year
while warning about their use after an hour, so a lab never needs to refresh them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..kube.requesting import Api, resource_path

Body = dict[str, Any]

KUBELET_TOKEN_SECONDS = 3607


def mounts_token(pod: Body) -> bool:
    """False when the pod (or, as kube reads it, its spec) opts out of the token."""
    return (pod.get("spec") or {}).get("automountServiceAccountToken") is not False


def service_account(pod: Body) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")


def request_token(api: Api, pod: Body) -> str:
    """A token of the pod's ServiceAccount bound to the pod (the Node authorizer allows a node
    this only for pods bound to it)."""
    meta = pod["metadata"]
    namespace = str(meta.get("namespace") or "default")
    path = resource_path("v1", "serviceaccounts", namespace, service_account(pod), "token")
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": KUBELET_TOKEN_SECONDS,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }
    answer = api.create(path, body)
    return str(answer["status"]["token"])


def write_credentials(folder: Path, token: str, namespace: str, server: str, ca: bytes) -> Path:
    """The serviceaccount folder (token, ca.crt, namespace) and a kubeconfig using it."""
    secrets = folder / "serviceaccount"
    secrets.mkdir(parents=True, exist_ok=True)
    for name, content in (("token", token), ("namespace", namespace)):
        _write_private(secrets / name, content.encode())
    _write_private(secrets / "ca.crt", ca)
    kubeconfig = folder / "kubeconfig"
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "cluster",
                "cluster": {"server": server, "certificate-authority": str(secrets / "ca.crt")},
            }
        ],
        "users": [{"name": "serviceaccount", "user": {"tokenFile": str(secrets / "token")}}],
        "contexts": [
            {
                "name": "serviceaccount",
                "context": {"cluster": "cluster", "user": "serviceaccount", "namespace": namespace},
            }
        ],
        "current-context": "serviceaccount",
    }
    _write_private(kubeconfig, yaml.safe_dump(document, sort_keys=False).encode())
    return kubeconfig


def _write_private(path: Path, content: bytes) -> None:
    # A token is a secret: readable by the pod's processes (this user) only.
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
    partial.replace(path)
