"""The chart's PodMonitor for the enforcing sidecars: off by default, and when on it scrapes the
port the operator gives an injected sidecar, in the namespaces the operator watches."""

from __future__ import annotations

import yaml
from tests.deploy.chart.support import CHART, NAMESPACED, Helm, by_kind, only

from rebalancer.planning.sidecar_templates import SIDECAR_PORT_NAME


def test_off_by_default(helm: Helm) -> None:
    assert not by_kind(helm.render({}), "PodMonitor")


def test_scrapes_the_injected_sidecars_port_everywhere(helm: Helm) -> None:
    monitor = only(
        helm.render({"podMonitor": {"enabled": True, "labels": {"release": "prometheus"}}}),
        "PodMonitor",
    )
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    spec = monitor["spec"]
    assert spec["namespaceSelector"] == {"any": True}
    assert spec["selector"] == {}
    (endpoint,) = spec["podMetricsEndpoints"]
    # The name the operator gives the port of a sidecar it injects.
    assert endpoint["port"] == SIDECAR_PORT_NAME
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["podMonitor"]["portName"] == SIDECAR_PORT_NAME
    assert endpoint["path"] == "/metrics"


def test_follows_the_watched_namespaces_and_a_selector(helm: Helm) -> None:
    values = {
        **NAMESPACED,
        "podMonitor": {"enabled": True, "selector": {"matchLabels": {"app": "orders"}}},
    }
    spec = only(helm.render(values), "PodMonitor")["spec"]
    assert spec["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}
    assert spec["selector"] == {"matchLabels": {"app": "orders"}}
    explicit = {**values, "podMonitor": {"enabled": True, "namespaces": ["apps"]}}
    spec = only(helm.render(explicit), "PodMonitor")["spec"]
    assert spec["namespaceSelector"] == {"matchNames": ["apps"]}
