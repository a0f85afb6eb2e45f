"""The operator's metrics as users see them: a real group joins, the operator's /metrics passes
`promtool check metrics` and has the group's new series, and every query of the Grafana dashboard
runs against the lab's real Prometheus that scraped it (the group's panels with data)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.deploy.chart.support import CHART
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    events_for,
    eventually,
    free_port,
    get_cg,
    kubectl,
    statefulset,
)

from rebalancer import metrics
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e

DASHBOARD = CHART / "dashboards" / "rebalancer.json"
# Grafana's built-in variables at what the dashboard would use on the lab's 2 s scrapes.
BUILTINS = {"$__rate_interval": "30s", "$__interval": "10s", "$__range": "10m"}
# Panels that must show the group: the new series, and the group's basics.
WITH_DATA = {
    "Time to Stable",
    "Partitions without an owner",
    "Unowned partition-seconds in range",
    "Rollout phase",
    "State",
    "Members",
    "Ready",
    "Operator CPU",
    "Operator memory",
}


def scrape(lab: Lab) -> str:
    with urllib.request.urlopen(lab.metrics_url, timeout=10) as response:
        return str(response.read().decode())


def samples_of(text: str, group: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("consumergroup") == group:
                found.setdefault(sample.name, []).append(sample)
    return found


def instant(url: str, promql: str) -> dict[str, Any]:
    """The whole answer of an instant query, errors included (a bad query is a 400)."""
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(address, timeout=10) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as error:
        return dict(json.loads(error.read()))


def rendered(expr: str, group: str) -> str:
    """A dashboard query as Grafana sends it with the group picked and every other variable All."""
    text = expr.replace("${datasource}", "")
    for name, value in BUILTINS.items():
        text = text.replace(name, value)
    return (
        text.replace("$namespace", ".*").replace("$consumergroup", group).replace("$group_id", ".*")
    )


def test_a_joined_group_shows_in_metrics_promtool_and_every_dashboard_query(lab: Lab) -> None:
    if lab.prometheus_url is None:
        pytest.skip("no prometheus binary installed (Debian package prometheus)")
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    url = lab.prometheus_url
    name = f"met-{uuid.uuid4().hex[:6]}"
    group_id = f"{name}-kafka"
    asyncio.run(ensure_topic(lab.bootstrap, group_id, 6))
    body = consumer_group(name, lab.bootstrap, group_id=group_id)
    body["spec"]["subscription"] = {"topics": [group_id]}
    apply(lab, statefulset(f"{name}-consumer"), body)
    consumers = [
        lab.start_consumer(index, group_id=group_id, prefix=f"{name}-consumer")
        for index in range(2)
    ]

    def ready() -> bool:
        found = get_cg(lab, name)
        members = (found.get("status") or {}).get("group", {}).get("members")
        return members == 2 and condition(found, "Ready").get("status") == "True"

    eventually(ready, 90, "2 members, Ready")

    # The cold start (Empty, the broker's initial delay, Stable) is one time to Stable.
    def measured() -> dict[str, list[Any]] | None:
        found = samples_of(scrape(lab), name)
        counts = found.get("rebalancer_rebalance_time_to_stable_seconds_count", [])
        return found if counts and counts[0].value >= 1 else None

    found = eventually(measured, 60, "a time to Stable in /metrics")
    assert found["rebalancer_rebalance_time_to_stable_seconds_sum"][0].value > 0
    # A member leaves (its last report releases its partitions) and the other takes them over:
    # the partitions' wait is timed by reports, and counted.
    consumers[1].stop()

    def unowned() -> dict[str, list[Any]] | None:
        found = samples_of(scrape(lab), name)
        counted = found.get("rebalancer_unowned_partition_seconds_total", [])
        return found if counted and counted[0].value > 0 else None

    found = eventually(unowned, 60, "unowned partition-seconds in /metrics")
    text = scrape(lab)
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for series in found.values():
        for sample in series:
            assert sample.labels["group_id"] == group_id, sample
            assert sample.labels["namespace"] == "default", sample
    phases = {s.labels["phase"]: s.value for s in found["rebalancer_rollout_phase"]}
    assert phases["Idle"] == 1 and sum(phases.values()) == 1
    assert found["rebalancer_rollout_batches"][0].value == 0
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"process_resident_memory_bytes", "process_cpu_seconds", "python_info"} <= names

    # Prometheus has scraped the measured rebalance: every panel can be drawn.
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = [panel for panel in board["panels"] if panel["type"] != "row"]
    queries = [(panel["title"], target["expr"]) for panel in panels for target in panel["targets"]]
    time_to_stable = next(expr for title, expr in queries if title == "Time to Stable")
    eventually(
        lambda: instant(url, rendered(time_to_stable, name))["data"]["result"],
        60,
        "the time to Stable in Prometheus",
        every=1.0,
    )
    shown: set[str] = set()
    for title, expr in queries:
        answer = instant(url, rendered(expr, name))
        assert answer["status"] == "success", (title, answer.get("error"))
        if answer["data"]["result"]:
            shown.add(title)
    assert shown >= WITH_DATA, sorted(WITH_DATA - shown)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        # label_values(metric{selector}, label) is Grafana's; Prometheus answers it as series.
        inner = variable["query"].removeprefix("label_values(").rsplit(",", 1)[0]
        answer = instant(url, rendered(inner, name))
        assert answer["status"] == "success", (variable["name"], answer.get("error"))
        label = variable["query"].rsplit(",", 1)[1].strip(" )")
        values = {series["metric"][label] for series in answer["data"]["result"]}
        assert {"namespace": "default", "consumergroup": name, "group_id": group_id}[
            label
        ] in values
    kubectl(lab, "delete", "consumergroup", name, "--wait=true", "--timeout=30s")


def enforcements(lab: Lab, group: str) -> dict[str, float]:
    found = samples_of(scrape(lab), group).get("rebalancer_enforced_rebalances_total", [])
    return {sample.labels["outcome"]: sample.value for sample in found}


def test_enforce_requests_are_counted_once_by_final_outcome(lab: Lab, tmp_path: Path) -> None:
    """A request no sidecar answers is retried: counted once as unreachable. The sidecar then
    started, the same request is enforced: counted once as enforced."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian package prometheus)")
    name = f"enf-{uuid.uuid4().hex[:6]}"
    asyncio.run(ensure_topic(lab.bootstrap, name, 4))
    lab.start_consumer(0, group_id=name, prefix=f"{name}-consumer")
    port = free_port()  # nothing listens there yet
    body = consumer_group(name, lab.bootstrap)
    body["spec"]["policy"]["enforce"] = {
        "requestToken": "first",
        "sidecar": {"url": f"http://127.0.0.1:{port}", "tokenSecretRef": {"name": f"{name}-t"}},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-t", "namespace": "default"},
        "stringData": {"token": "lab-sidecar-token"},
    }
    apply(lab, secret, statefulset(f"{name}-consumer"), body)

    def baseline() -> bool:
        found = get_cg(lab, name)
        memory = ((found.get("status") or {}).get("enforcement") or {}).get("memory") or {}
        ready = condition(found, "Ready").get("status") == "True"
        return ready and memory.get("token") == "first"

    # Ready, and the first token taken as the baseline: only a change of it asks.
    eventually(baseline, 90, "Ready with the baseline token")
    kubectl(
        lab,
        "patch",
        "consumergroup",
        name,
        "--type=merge",
        "-p",
        '{"spec":{"policy":{"enforce":{"requestToken":"second"}}}}',
    )

    def failed_twice() -> bool:
        failures = [e for e in events_for(lab, name) if e["reason"] == "EnforceFailed"]
        return sum(int(e.get("count") or 1) for e in failures) >= 2

    eventually(failed_twice, 60, "the request tried twice without a sidecar", every=1.0)
    assert enforcements(lab, name)["unreachable"] == 1

    token = tmp_path / "token"
    token.write_text("lab-sidecar-token")
    lab.start_sidecar(f"{name}-consumer-0", name, token, port)
    counted = eventually(
        lambda: (found := enforcements(lab, name)).get("enforced") and found,
        120,
        "the request enforced",
        every=1.0,
    )
    assert counted == {outcome: 0.0 for outcome in counted} | {"enforced": 1.0, "unreachable": 1.0}
    assert set(counted) == set(metrics.ENFORCE_OUTCOMES)
    # The sidecar's own /metrics, as the chart's PodMonitor scrapes it: valid, with the request
    # it accepted and its process's series.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    checked = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    sidecar = {
        (sample.name, sample.labels.get("answer")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert sidecar[("rebalancer_sidecar_requests_total", "accepted")] >= 1
    assert sidecar[("rebalancer_sidecar_actor", None)] == 1
    assert ("process_resident_memory_bytes", None) in sidecar
    kubectl(lab, "delete", "consumergroup", name, "--wait=true", "--timeout=30s")
