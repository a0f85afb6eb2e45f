"""The image of the join gate and the sidecar (--gate-image): the agent image, or the operator's."""

from __future__ import annotations

from typing import Any

import pytest
from tests.deploy.chart.support import Helm, only

from rebalancer import __version__

DIGEST = "sha256:" + "a" * 64


def gate_image(helm: Helm, values: dict[str, Any]) -> str:
    deployment = only(helm.render(values), "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    [arg] = [a for a in container["args"] if a.startswith("--gate-image=")]
    return str(arg.removeprefix("--gate-image="))


@pytest.mark.parametrize(
    ("values", "image"),
    [
        ({}, f"ghcr.io/rebalancer-dev/rebalancer-agent:{__version__}"),
        ({"image": {"tag": "1.2.3"}}, "ghcr.io/rebalancer-dev/rebalancer-agent:1.2.3"),
        ({"agentImage": {"tag": "2.0"}}, "ghcr.io/rebalancer-dev/rebalancer-agent:2.0"),
        ({"agentImage": {"digest": DIGEST}}, f"ghcr.io/rebalancer-dev/rebalancer-agent@{DIGEST}"),
        (
            {"agentImage": {"repository": ""}, "image": {"repository": "registry.example/rb"}},
            f"registry.example/rb:{__version__}",
        ),
    ],
    ids=["default", "operator-tag", "own-tag", "digest", "operator-image"],
)
def test_the_gate_image_follows_the_values(helm: Helm, values: dict[str, Any], image: str) -> None:
    assert gate_image(helm, values) == image


def test_the_schema_refuses_an_unknown_agent_image_key(helm: Helm) -> None:
    result = helm.template({"agentImage": {"registry": "x"}})
    assert result.returncode != 0
    assert "agentImage" in result.stderr
