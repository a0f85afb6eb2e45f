"""Every alert of the chart's PrometheusRule, evaluated by `promtool test rules` on series that
make it fire and on series that must leave it quiet; and every alert's runbook.

The rules are the chart's as helm renders them (release and namespace `rebalancer`, so the
operator's job is `rebalancer`). Expected annotations are the rendered templates with the alert's
labels and value put in, so a broken template fails here rather than in a user's Alertmanager.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.deploy.chart.support import ALL_FEATURES, ROOT, Helm, only

from rebalancer import __version__

RUNBOOKS = ROOT / "docs" / "runbooks.md"
GROUP = {"namespace": "shop", "consumergroup": "orders", "group_id": "orders-v1"}
G = 'namespace="shop", consumergroup="orders", group_id="orders-v1"'


@dataclass(frozen=True)
class Case:
    """Series, the time to evaluate at, and the alerts expected then (labels beyond alertname
    and severity, and what `$value` prints as in the annotations)."""

    series: list[tuple[str, str]]
    at: str
    fires: list[dict[str, str]] = field(default_factory=list)
    value: str = ""


# alert -> (a case or cases that fire, cases that must not)
CASES: dict[str, tuple[Case | list[Case], list[Case]]] = {
    "RebalancerOperatorDown": (
        [
            # Scraped, then failing.
            Case(
                [('up{job="rebalancer", namespace="rebalancer", instance="a:8090"}', "1x5 0x15")],
                "15m",
                [{"job": "rebalancer", "namespace": "rebalancer"}],
            ),
            # No target at all (no replica leads, or the ServiceMonitor is not picked up).
            Case(
                [('up{job="other", namespace="rebalancer", instance="b:9090"}', "1x20")],
                "15m",
                [{"job": "rebalancer", "namespace": "rebalancer"}],
            ),
        ],
        [
            # Up throughout.
            Case(
                [('up{job="rebalancer", namespace="rebalancer", instance="a:8090"}', "1x20")],
                "15m",
            ),
            # Down for less than operatorDownFor (5m): a restart.
            Case(
                [
                    (
                        'up{job="rebalancer", namespace="rebalancer", instance="a:8090"}',
                        "1x8 0x3 1x9",
                    )
                ],
                "12m",
            ),
        ],
    ),
    "RebalancerObservationStale": (
        # Observed every minute until 5m, then never again.
        Case(
            [(f"rebalancer_group_last_observation_timestamp_seconds{{{G}}}", "0+60x5 300x20")],
            "21m",
            [GROUP],
            "16m 0s",
        ),
        [Case([(f"rebalancer_group_last_observation_timestamp_seconds{{{G}}}", "0+60x25")], "21m")],
    ),
    "RebalancerFrequentRebalances": (
        Case(
            [(f'rebalancer_rebalances_total{{{G}, cause="member-joined"}}', "0+1x30")],
            "25m",
            [GROUP],
            "15",
        ),
        # Three in 15 minutes: below rebalancesPer15Minutes (5).
        [Case([(f'rebalancer_rebalances_total{{{G}, cause="member-joined"}}', "0+0.2x30")], "25m")],
    ),
    "RebalancerSlowRebalances": (
        # Every rebalance took between 60 and 90 s: the 95th percentile is 88.5 s.
        Case(
            [
                (f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="30.0"}}', "0x30"),
                (f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="60.0"}}', "0x30"),
                (f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="90.0"}}', "0+1x30"),
                (f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="+Inf"}}', "0+1x30"),
            ],
            "30m",
            [GROUP],
            "1m 28s",
        ),
        [
            Case(
                [
                    (
                        f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="30.0"}}',
                        "0+1x30",
                    ),
                    (
                        f'rebalancer_rebalance_time_to_stable_seconds_bucket{{{G}, le="+Inf"}}',
                        "0+1x30",
                    ),
                ],
                "30m",
            )
        ],
    ),
    "RebalancerGroupNotReady": (
        Case([(f"rebalancer_group_ready{{{G}}}", "0x30")], "20m", [GROUP]),
        # Not Ready for 10 minutes (a rollout), then Ready.
        [Case([(f"rebalancer_group_ready{{{G}}}", "0x10 1x20")], "20m")],
    ),
    "RebalancerGroupDegraded": (
        Case([(f"rebalancer_group_degraded{{{G}}}", "1x30")], "15m", [GROUP]),
        [
            Case([(f"rebalancer_group_degraded{{{G}}}", "0x30")], "15m"),
            Case([(f"rebalancer_group_degraded{{{G}}}", "1x5 0x25")], "15m"),
        ],
    ),
    "RebalancerRolloutFailed": (
        Case(
            [
                (f'rebalancer_rollout_phase{{{G}, phase="Failed"}}', "0x3 1x10"),
                (f'rebalancer_rollout_phase{{{G}, phase="BatchJoining"}}', "1x3 0x10"),
            ],
            "10m",
            [GROUP],
        ),
        [
            Case(
                [
                    (f'rebalancer_rollout_phase{{{G}, phase="Failed"}}', "0x13"),
                    (f'rebalancer_rollout_phase{{{G}, phase="BatchJoining"}}', "1x13"),
                ],
                "10m",
            )
        ],
    ),
    "RebalancerGateBypassed": (
        Case([(f"rebalancer_gate_bypasses_total{{{G}}}", "0x5 2x20")], "10m", [GROUP], "2"),
        [
            Case([(f"rebalancer_gate_bypasses_total{{{G}}}", "0x30")], "10m"),
            # Two bypasses half an hour ago are over.
            Case([(f"rebalancer_gate_bypasses_total{{{G}}}", "0x5 2x40")], "40m"),
        ],
    ),
    "RebalancerEnforcementFailing": (
        [
            Case(
                [
                    (
                        f'rebalancer_enforced_rebalances_total{{{G}, outcome="unreachable"}}',
                        "0x5 1x20",
                    ),
                    (f'rebalancer_enforced_rebalances_total{{{G}, outcome="enforced"}}', "0x25"),
                ],
                "10m",
                [GROUP],
            ),
            # A sidecar that cannot join the group's protocol.
            Case(
                [
                    (
                        f'rebalancer_enforced_rebalances_total{{{G}, outcome="unsupported"}}',
                        "0x5 1x20",
                    )
                ],
                "10m",
                [GROUP],
            ),
        ],
        # Enforced and skipped requests are not failures.
        [
            Case(
                [
                    (
                        f'rebalancer_enforced_rebalances_total{{{G}, outcome="enforced"}}',
                        "0x5 3x20",
                    ),
                    (f'rebalancer_enforced_rebalances_total{{{G}, outcome="skipped"}}', "0x5 1x20"),
                    (f'rebalancer_enforced_rebalances_total{{{G}, outcome="unreachable"}}', "0x25"),
                    (f'rebalancer_enforced_rebalances_total{{{G}, outcome="unsupported"}}', "0x25"),
                ],
                "10m",
            )
        ],
    ),
    "RebalancerReportsUnauthorized": (
        Case(
            [('rebalancer_member_reports_rejected_total{reason="unauthorized"}', "0+1x40")],
            "25m",
            [{}],
        ),
        [
            Case(
                [
                    ('rebalancer_member_reports_rejected_total{reason="unauthorized"}', "0x40"),
                    ('rebalancer_member_reports_rejected_total{reason="too_large"}', "0+1x40"),
                ],
                "25m",
            )
        ],
    ),
}


def rendered_rules(helm: Helm) -> list[dict[str, Any]]:
    rule = only(helm.render(ALL_FEATURES), "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def expand(template: str, labels: dict[str, str], value: str) -> str:
    """What Prometheus makes of an annotation: the label and value templates filled in."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)
    return re.sub(r"\{\{ \$value \| [^}]+ \}\}", value, text)


def alert_test(alert: dict[str, Any], case: Case) -> dict[str, Any]:
    expected = []
    for labels in case.fires:
        full = {**labels, "severity": alert["labels"]["severity"]}
        annotations = {
            key: expand(text, full, case.value) for key, text in alert["annotations"].items()
        }
        expected.append({"exp_labels": full, "exp_annotations": annotations})
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in case.series],
        "alert_rule_test": [
            {"eval_time": case.at, "alertname": alert["alert"], "exp_alerts": expected}
        ],
    }


def test_every_alert_fires_on_its_series_and_only_then(helm: Helm, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    alerts = rendered_rules(helm)
    assert sorted(a["alert"] for a in alerts) == sorted(CASES), "every alert has its cases"
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "rebalancer", "rules": alerts}]}))
    tests = []
    for alert in alerts:
        firing, quiet = CASES[alert["alert"]]
        for case in firing if isinstance(firing, list) else [firing]:
            assert case.fires, alert["alert"]
            tests.append(alert_test(alert, case))
        tests.extend(alert_test(alert, case) for case in quiet)
    spec = tmp_path / "tests.yaml"
    spec.write_text(
        yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests})
    )
    checked = subprocess.run(
        [promtool, "test", "rules", str(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def runbook_sections() -> dict[str, str]:
    text = RUNBOOKS.read_text(encoding="utf-8")
    parts = re.split(r"^## (\S+)\n", text, flags=re.MULTILINE)
    return {parts[i].lower(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_alert_links_its_runbook(helm: Helm) -> None:
    sections = runbook_sections()
    # By default the links point at the runbooks of the release that is running, at its tag,
    # not at a branch that moves on after it.
    assert not yaml.safe_load((ROOT / "charts" / "rebalancer" / "values.yaml").read_text())[
        "prometheusRule"
    ]["runbookBaseUrl"]
    base = f"https://github.com/rebalancer-dev/rebalancer/blob/v{__version__}/docs/runbooks.md"
    for alert in rendered_rules(helm):
        url = alert["annotations"]["runbook_url"]
        anchor = alert["alert"].lower()
        assert url == f"{base}#{anchor}", alert["alert"]
        section = sections.get(anchor)
        assert section is not None, f"docs/runbooks.md has no section ## {alert['alert']}"
        for part in ("**Meaning.**", "**Confirm.**", "**Act.**"):
            assert part in section, f"{alert['alert']}: its runbook lacks {part}"
    # No runbook for an alert that no longer exists.
    assert set(sections) == {alert["alert"].lower() for alert in rendered_rules(helm)}


def test_runbook_links_follow_a_base_url_of_ones_own(helm: Helm) -> None:
    wiki = "https://wiki.example.com/rebalancer/runbooks"
    values = {**ALL_FEATURES, "prometheusRule": {**ALL_FEATURES["prometheusRule"]}}
    values["prometheusRule"]["runbookBaseUrl"] = wiki
    rule = only(helm.render(values), "PrometheusRule")
    for alert in (r for group in rule["spec"]["groups"] for r in group["rules"]):
        assert alert["annotations"]["runbook_url"] == f"{wiki}#{alert['alert'].lower()}"


def test_the_operator_down_alert_follows_the_release_and_the_job_value(helm: Helm) -> None:
    values = {**ALL_FEATURES, "prometheusRule": {"enabled": True, "operatorJob": "my-scrape"}}
    rule = only(helm.render(values), "PrometheusRule")
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}
    expr = alerts["RebalancerOperatorDown"]["expr"]
    assert expr.count('up{job="my-scrape", namespace="rebalancer"}') == 2
    assert 'job="rebalancer"' not in expr
