"""Startup, liveness and readiness probes with kube's timing and thresholds.

exec runs the command like the container (same environment, root and path rules); httpGet
and tcpSocket without a `host` go to the pod's IP, as a kubelet's do, so a process that listens
on the pod's address only is probed where it listens. gRPC probes are not emulated and count as
successes.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Body = dict[str, Any]
logger = logging.getLogger(__name__)
# A kubelet probes pods directly; a proxy from the environment (whose no_proxy names 127.0.0.1
# at best, not the other pod addresses) would only get in the way.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class ProbeContext:
    """How to run an exec probe's command as the container would, and where the pod is."""

    container: Body
    env: Mapping[str, str]
    cwd: Path
    argv: Callable[[list[str]], list[str]]
    pod_ip: str = "127.0.0.1"


@dataclass
class Probe:
    kind: str  # startup, liveness, readiness
    spec: Body
    started_at: float  # when the container started (monotonic)
    successes: int = 0
    failures: int = 0
    result: bool | None = None  # the probe's verdict once a threshold was crossed
    next_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.next_at = self.started_at + float(self.spec.get("initialDelaySeconds") or 0)

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds") or 10)

    @property
    def timeout(self) -> float:
        return float(self.spec.get("timeoutSeconds") or 1)

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, success: bool, now: float) -> None:
        self.next_at = now + self.period
        if success:
            self.successes += 1
            self.failures = 0
            if self.successes >= int(self.spec.get("successThreshold") or 1):
                self.result = True
        else:
            self.failures += 1
            self.successes = 0
            if self.failures >= int(self.spec.get("failureThreshold") or 3):
                self.result = False


def run_probe(spec: Body, context: ProbeContext) -> bool:
    timeout = float(spec.get("timeoutSeconds") or 1)
    try:
        if "exec" in spec:
            return _exec(spec["exec"], context, timeout)
        if "httpGet" in spec:
            return _http(spec["httpGet"], context, timeout)
        if "tcpSocket" in spec:
            return _tcp(spec["tcpSocket"], context, timeout)
    except Exception as exc:
        logger.debug("probe failed: %s", exc)
        return False
    return True


def _exec(action: Body, context: ProbeContext, timeout: float) -> bool:
    argv = context.argv([str(p) for p in action.get("command") or ()])
    if not argv:
        return False
    process = subprocess.Popen(
        argv,
        env=dict(context.env),
        cwd=context.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return process.wait(timeout=timeout) == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _port(value: Any, container: Body) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in container.get("ports") or ():
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"no container port named {value!r}")


def _http(action: Body, context: ProbeContext, timeout: float) -> bool:
    scheme = str(action.get("scheme") or "HTTP").lower()
    host = action.get("host") or context.pod_ip
    path = str(action.get("path") or "/")
    url = f"{scheme}://{host}:{_port(action.get('port'), context.container)}{path}"
    request = urllib.request.Request(url, headers={"User-Agent": "kube-probe/lab"})
    for header in action.get("httpHeaders") or ():
        request.add_header(str(header.get("name")), str(header.get("value")))
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return 200 <= int(response.status) < 400
    except urllib.error.HTTPError as exc:
        return 200 <= exc.code < 400


def _tcp(action: Body, context: ProbeContext, timeout: float) -> bool:
    host = action.get("host") or context.pod_ip
    port = _port(action.get("port"), context.container)
    with contextlib.closing(socket.create_connection((host, port), timeout=timeout)):
        return True
