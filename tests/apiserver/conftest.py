"""Fixtures for the emulator's conformance suite: a fresh emulator per test, real clients."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.apiserver.support import CRD

from rebalancer.lab.apiserver import ApiServerThread

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def api() -> Iterator[ApiServerThread]:
    with ApiServerThread(host="127.0.0.1", port=0, bookmark_interval=0.3) as server:
        yield server


@pytest.fixture
def api_client(api: ApiServerThread) -> Iterator[client.ApiClient]:
    config = client.Configuration()
    config.host = api.url
    with client.ApiClient(config) as api_client:
        yield api_client


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def crd(api_client: client.ApiClient) -> dict[str, Any]:
    created: dict[str, Any] = (
        client.ApiextensionsV1Api(api_client)
        .create_custom_resource_definition(CRD, _preload_content=False)
        .json()
    )
    return created


@pytest.fixture
def kubeconfig(api: ApiServerThread, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig", namespace="default")


@pytest.fixture
def kubectl(kubeconfig: Path, tmp_path: Path) -> Kubectl:
    """Run kubectl against the emulator with a private cache; fails the test on errors."""
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}

    def run(
        *args: str, input: str | None = None, check: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", f"--cache-dir={tmp_path / 'kube-cache'}", *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed: {done.stderr}{done.stdout}")
        return done

    return run
