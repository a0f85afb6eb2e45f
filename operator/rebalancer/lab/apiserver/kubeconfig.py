"""Kubeconfig files pointing clients at the emulator (plain HTTP, a token it ignores)."""

from __future__ import annotations

from pathlib import Path

import yaml

CONTEXT = "rebalancer-lab"


def write_kubeconfig(path: str | Path, server: str, namespace: str = "default") -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server}}],
        "users": [{"name": CONTEXT, "user": {"token": "rebalancer-lab"}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
