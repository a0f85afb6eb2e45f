"""A real Kubernetes control plane (etcd, kube-apiserver, controller manager, scheduler) per module.

Building it the first time takes many minutes (see lab/controlplane/README.md); after that the
binary is cached and a start takes seconds. Without Go or kubectl the tests are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests import polling

from rebalancer_lab.controlplane import ControlPlane, ensure_control_plane
from rebalancer_lab.controlplane.building import ControlPlaneBuildError

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    try:
        binary = ensure_control_plane()
    except ControlPlaneBuildError as error:
        if "go is not installed" in str(error):
            pytest.skip(str(error))
        raise
    state = tmp_path_factory.mktemp("control-plane")
    with ControlPlane(state, binary=binary) as plane:
        yield plane
        # Figures for lab/controlplane/README.md: seconds to each component healthy, RSS now.
        figures = {"timings_s": plane.timings, "rss_bytes": plane.rss_bytes()}
        (state / "measurements.json").write_text(json.dumps(figures, indent=2))
        print(f"\ncontrol plane figures: {json.dumps(figures)}")


@pytest.fixture(scope="module")
def kubectl(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """kubectl as the cluster's admin, with a private HOME and cache; fails the test on errors."""
    home = tmp_path_factory.mktemp("kubectl-home")
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(control_plane.kubeconfig)}

    def run(
        *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", f"--cache-dir={home / 'kube-cache'}", *args],
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


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """`check()`'s first true answer, polled every half second; the test fails after `timeout`."""
    return polling.eventually(check, what, timeout, every=0.5, not_yet=())


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def wait_established(kubectl: Kubectl, crd: str, timeout: float = 60.0) -> None:
    """`kubectl wait --for=condition=Established` on `crd`, asked again while the CRD has no
    status.conditions yet: kubectl fails at once then ("accessor error: <nil>") instead of
    waiting, when it reads the CRD before the API server wrote its first condition."""
    deadline = time.monotonic() + timeout
    while True:
        done = kubectl("wait", "--for=condition=Established", f"crd/{crd}", check=False)
        if done.returncode == 0:
            return
        if "accessor error" not in done.stderr or time.monotonic() > deadline:
            pytest.fail(f"kubectl wait for crd/{crd} failed: {done.stderr}{done.stdout}")
        time.sleep(0.2)
