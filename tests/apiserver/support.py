"""Shared constants and builders of the emulator's conformance suite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
CRD = yaml.safe_load((HERE / "widgets-crd.yaml").read_text())
GROUP, VERSION, PLURAL = "test.rebalancer.dev", "v1", "widgets"


def widget(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"size": 3, "backend": {"url": "https://kafka:9092"}}
    body.update(spec)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": body,
    }
