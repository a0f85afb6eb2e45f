"""What the join gate costs a pod whose gate is already open: the time from the pod's creation to
its consumer's first log line, with the gate against without it, one pod at a time, on the lab.

    .venv/bin/python bench/gate_cost.py --pods 8

An init container is the price of holding pods at all: a pod released on arrival still runs
`rebalancer gate`, which reads its pod once, finds itself open and exits, before the kubelet
starts the consumer. The pairs run alternately (gated, then not) so that drifts in the machine's
load hit both alike; it prints every pair and the medians with their spread.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from rebalancer.planning.gate_templates import GateOptions, gate_container
from rebalancer.structs.gates import GATE_ANNOTATION, GATE_OPEN
from rebalancer_lab.ports import free_port
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab, LabConfig

NS = "default"
TIMEOUT_S = 60.0


def statefulset(lab: Lab, name: str, gated: bool) -> dict[str, Any]:
    env = [
        {"name": key, "value": value} for key, value in lab.consumer_env(0, group_id=name).items()
    ]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "consumer",
                "image": "ghcr.io/rebalancer-dev/rebalancer:0.1.0",
                "command": ["python", "-m", "rebalancer_lab.consumer"],
                "env": env,
            }
        ]
    }
    metadata: dict[str, Any] = {"labels": {"app": name}}
    if gated:
        spec["initContainers"] = [gate_container(GateOptions(timeout_seconds=60))]
        metadata["annotations"] = {GATE_ANNOTATION: GATE_OPEN}  # open before it runs
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": metadata, "spec": spec},
        },
    }


def started_in(lab: Lab, name: str) -> float:
    """Seconds from the StatefulSet's creation to its pod's consumer writing its first line."""
    began = time.time()
    body = statefulset(lab, name, gated=name.startswith("g"))
    apps = client.AppsV1Api(lab.api_client)
    apps.create_namespaced_stateful_set(NS, body, _preload_content=False)
    root = lab.config.state_dir / "logs" / "pods"
    while time.time() - began < TIMEOUT_S:
        for found in root.glob(f"{NS}_{name}-0_*"):
            log = found / "consumer" / "0.log"
            if log.exists() and log.stat().st_size > 0:
                return time.time() - began
        time.sleep(0.01)
    raise TimeoutError(f"{name}: no consumer line within {TIMEOUT_S:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=8, help="pairs to run (default 8)")
    args = parser.parse_args()
    config = LabConfig(
        state_dir=Path(tempfile.mkdtemp(prefix="rebalancer-bench-gate-")),
        broker_port=free_port(),
        reports_port=free_port(),
        prometheus_port=None,
    )
    lab = Lab(config)
    times: dict[str, list[float]] = {"gated": [], "ungated": []}
    try:
        lab.start(fleet=False, pods=True, jitter="0")
        for index in range(args.pods):
            for kind in ("ungated", "gated"):
                name = f"{kind[0]}{index}"
                asyncio.run(ensure_topic(lab.bootstrap, name, 2))
                times[kind].append(started_in(lab, name))
            print(f"pair {index + 1}: ungated {times['ungated'][-1]:.3f} s, "
                  f"gated {times['gated'][-1]:.3f} s", flush=True)  # fmt: skip
    finally:
        lab.stop()
    for kind, values in times.items():
        middle = statistics.median(values)
        print(f"{kind}: median {middle:.3f} s [{min(values):.3f}-{max(values):.3f}]")
    extra = [g - u for g, u in zip(times["gated"], times["ungated"], strict=True)]
    print(f"the open gate's cost per pod: median {statistics.median(extra):.3f} s "
          f"[{min(extra):.3f}-{max(extra):.3f}]")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
