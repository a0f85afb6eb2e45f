"""Sidecar processes (`python -m rebalancer sidecar`) and their HTTP API, for the Kafka tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kafka_support import OPERATOR_DIR, SESSION_TIMEOUT_MS, eventually, free_port

TOKEN = "sidecar-test-token"


class SidecarProcess:
    def __init__(
        self,
        pod: str,
        bootstrap: str,
        group_id: str,
        log_dir: Path,
        *,
        strategy: str | None = "cooperative-sticky",
        token: str = TOKEN,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.pod = pod
        self.port = free_port()
        self.token = token
        token_file = log_dir / f"{pod}.token"
        token_file.write_text(token + "\n")
        self.log = log_dir / f"{pod}-sidecar.log"
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [OPERATOR_DIR, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "PYTHONUNBUFFERED": "1",
            "POD_NAME": pod,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "KAFKA_GROUP_ID": group_id,
            "KAFKA_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
            "KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
            **(env or {}),
        }
        # None: an application whose settings name no strategy (a fleet of another client).
        if strategy is not None:
            environment["KAFKA_PARTITION_ASSIGNMENT_STRATEGY"] = strategy
        command = [sys.executable, "-m", "rebalancer", "sidecar", "--token-file", str(token_file)]
        command += ["--listen", f"127.0.0.1:{self.port}", *(extra or [])]
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                command,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, token: str | None = None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {token if token is not None else self.token}",
                "Content-Type": "application/json",
            },
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=90) as response:
                return response.status, json.loads(response.read()), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}"), dict(error.headers)

    def call_text(self, path: str) -> str:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url + path, timeout=10) as response:
            return str(response.read().decode())

    def enforce(self, group_id: str, request_id: str, **fields: Any) -> tuple[int, dict[str, Any]]:
        status, body, _ = self.call(
            "POST", "/v1/enforce", {"groupId": group_id, "requestId": request_id, **fields}
        )
        return status, body

    def group(self) -> dict[str, Any] | None:
        try:
            status, body, _ = self.call("GET", "/v1/group")
        except OSError:
            return None
        return body if status == 200 else None

    def joined(self) -> dict[str, Any] | None:
        view = self.group()
        return view if view is not None and view["generation"] >= 0 else None

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def wait_joined(sidecars: list[SidecarProcess], timeout: float = 40) -> None:
    for sidecar in sidecars:
        eventually(sidecar.joined, timeout, f"{sidecar.pod}'s sidecar joins the group")
