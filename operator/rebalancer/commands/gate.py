"""`rebalancer gate`: the join gate, run as a pod's last init container (rebalancer.gate)."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rebalancer.structs.gates import (
    DEFAULT_BYPASS_SECONDS,
    INSTANCE_ID_ANNOTATION,
    JOIN_GATE_ENV,
    JOIN_GATE_FILE,
    JOIN_GATE_INSTANCE_ID_FILE,
)

if TYPE_CHECKING:
    from rebalancer.gate.waiting import ApiEndpoint

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXIT_OPEN = 0
EXIT_TIMEOUT = 1
EXIT_MISCONFIGURED = 2
EXIT_GONE = 3
# Timed out with every request refused (HTTP 401/403): the pod's ServiceAccount lacks the
# gate's grant; the last line says which and where the chart grants it.
EXIT_FORBIDDEN = 4


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="hold this pod until the operator opens its rollout batch (an init container)",
        description=(
            "Wait until the Rebalancer operator writes rebalancer.dev/gate: open on this pod, "
            "then exit 0 so the consumer starts together with the rest of its batch. The pod is "
            "watched through the Kubernetes API; its service account needs list and watch on "
            "pods in its namespace (the chart's gate.serviceAccounts grants them). Exit codes: "
            "0 opened or bypassed, 1 timed out, 2 misconfigured, 3 pod gone, 4 timed out with "
            "every request refused (a missing grant, named in the last line)."
        ),
    )
    _add_pod_arguments(parser)
    _add_wait_arguments(parser)
    parser.set_defaults(command_module=sys.modules[__name__])


def _add_pod_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for the pod held and how the API server is reached."""
    parser.add_argument(
        "--pod",
        default=None,
        help="this pod's name (default: $POD_NAME, from the downward API)",
    )
    parser.add_argument(
        "--namespace",
        default=None,
        help="this pod's namespace (default: $POD_NAMESPACE, else the service account's)",
    )
    parser.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="Kubernetes API URL (default: $REBALANCER_API_SERVER, else $KUBECONFIG, else the "
        "in-cluster service account)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="kubeconfig to use instead of the in-cluster service account",
    )


def _add_wait_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags for how long the gate waits and what it holds."""
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="give up and exit 1 after this long, so the pod's init container restarts "
        "(default 900; 0 waits forever)",
    )
    parser.add_argument(
        "--bypass-after",
        type=float,
        default=float(DEFAULT_BYPASS_SECONDS),
        metavar="SECONDS",
        help="let the pod start after this long without a sign of the operator, so an operator "
        f"that is down cannot hold pods in Init (default {DEFAULT_BYPASS_SECONDS}; 0: never)",
    )
    parser.add_argument(
        "--hold-join",
        type=Path,
        default=None,
        metavar="DIR",
        help="run as a native sidecar that holds only the join: once opened (or bypassed), "
        f"write {JOIN_GATE_FILE} (and the identity slot, {JOIN_GATE_INSTANCE_ID_FILE}) into DIR, "
        f"which the consumer waits for (${JOIN_GATE_ENV}) before it subscribes, and stay until "
        "the pod stops",
    )


def _log(message: str) -> None:
    moment = datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    print(f"{moment} rebalancer-gate: {message}", file=sys.stderr, flush=True)


def resolve_endpoint(
    server: str | None, kubeconfig: Path | None, env: Mapping[str, str]
) -> ApiEndpoint:
    """The API endpoint from flags and environment (see rebalancer.gate for the order)."""
    from rebalancer.gate.waiting import ApiEndpoint

    url = server or env.get("REBALANCER_API_SERVER")
    if url:
        token_file = env.get("REBALANCER_API_TOKEN_FILE")
        return ApiEndpoint(url.rstrip("/"), token_file=Path(token_file) if token_file else None)
    config_file = kubeconfig or (Path(env["KUBECONFIG"]) if env.get("KUBECONFIG") else None)
    if config_file is None and env.get("KUBERNETES_SERVICE_HOST"):
        host = env["KUBERNETES_SERVICE_HOST"]
        port = env.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = f"[{host}]"
        ca = SERVICE_ACCOUNT / "ca.crt"
        return ApiEndpoint(
            f"https://{host}:{port}",
            token_file=SERVICE_ACCOUNT / "token",
            ca_file=str(ca) if ca.exists() else None,
        )
    try:
        from rebalancer.clients.kubernetes_api import connect, connection_details
    except ModuleNotFoundError as error:
        # The agent image (agent.Dockerfile) has no Kubernetes client: in its pod the gate uses
        # the ServiceAccount above; only a kubeconfig needs the client.
        raise RuntimeError(
            f"reading a kubeconfig needs the Kubernetes client, and {error.name} is not "
            "installed: run the gate in its pod (ServiceAccount), pass --server, or install the "
            "full package (pip install rebalancer)"
        ) from None

    api = connect(config_file)
    try:
        details = connection_details(api)
    finally:
        api.close()
    return ApiEndpoint(
        details.server.rstrip("/"),
        token=details.token,
        ca_file=details.ca_path,
        cert_file=details.certificate_path,
        key_file=details.private_key_path,
        insecure=details.insecure,
    )


def run(args: argparse.Namespace) -> int:
    from rebalancer.gate.verdicts import GateLimits, Verdict
    from rebalancer.gate.waiting import wait_at_gate

    env = dict(os.environ)
    pod = args.pod or env.get("POD_NAME")
    namespace = args.namespace or env.get("POD_NAMESPACE")
    if namespace is None and (SERVICE_ACCOUNT / "namespace").exists():
        namespace = (SERVICE_ACCOUNT / "namespace").read_text(encoding="utf-8").strip()
    if not pod or not namespace:
        _log(
            "cannot tell which pod this is: set POD_NAME and POD_NAMESPACE from the downward "
            "API (fieldRef metadata.name and metadata.namespace) or pass --pod and --namespace"
        )
        return EXIT_MISCONFIGURED
    try:
        endpoint = resolve_endpoint(args.server, args.kubeconfig, env)
    except Exception as error:  # any unusable configuration ends the same way
        _log(f"cannot find the Kubernetes API: {error}")
        return EXIT_MISCONFIGURED
    limits = GateLimits(timeout_s=max(args.timeout, 0.0), bypass_after_s=max(args.bypass_after, 0))
    outcome = asyncio.run(wait_at_gate(endpoint, namespace, pod, limits, _log))
    _log(outcome.message)
    if outcome.gone:
        return _exit(EXIT_GONE)
    if outcome.verdict not in (Verdict.OPEN, Verdict.BYPASS):
        return _exit(EXIT_FORBIDDEN if outcome.refused else EXIT_TIMEOUT)
    if args.hold_join is not None:
        release_join(args.hold_join, outcome.annotations.get(INSTANCE_ID_ANNOTATION))
        _log(f"the consumer may join: wrote {args.hold_join / JOIN_GATE_FILE}")
        _stay_until_stopped()
    return _exit(EXIT_OPEN)


def release_join(directory: Path, instance_id: str | None) -> None:
    """Write the files a consumer behind a join-holding gate waits for; the identity slot
    first, so a consumer that sees the open file finds its slot beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    if instance_id:
        _write_atomically(directory / JOIN_GATE_INSTANCE_ID_FILE, instance_id)
    _write_atomically(directory / JOIN_GATE_FILE, "open\n")


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _stay_until_stopped() -> None:
    """A native sidecar that exits is restarted: it sleeps until the pod stops it."""
    signal.signal(signal.SIGTERM, lambda *_: _exit(EXIT_OPEN))
    while True:
        signal.pause()


def _exit(code: int) -> int:
    """Leave at once: the waiting is over and the pod's next container waits for this exit;
    the interpreter's teardown of the modules the gate loaded costs tenths of a second of CPU
    per pod, which a node starting a batch of pods together pays once per pod."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
