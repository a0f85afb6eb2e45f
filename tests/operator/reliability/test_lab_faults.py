"""Faults, hostile resources and planted secrets against the real operator in the lab.

The order matters and is the file's order: the tests share one lab
(tests/operator/reliability/conftest.py, on Kubernetes' own control plane), and the last ones
restart the operator and the broker. The operator talks to the API server through a proxy
(lab/rebalancer_lab/api_faults.py) from the first test on,
so that the API faults a test injects (409, 429 and 500 answers to chosen requests, watches cut)
reach the operator and nothing else: the tests' own kubectl goes to the API server directly.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    events_for,
    eventually,
    get_cg,
    kubectl,
    restart_operator,
    statefulset,
)
from tests.operator.reliability.strategies import SLOW_PATTERNS

from rebalancer_lab.api_faults import FaultyApi
from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
SECRET = f"planted-{uuid.uuid4().hex}"
USERNAME = f"user-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module", autouse=True)
def faulty(lab: Lab) -> Iterator[FaultyApi]:
    """The proxy every request of the operator passes through: the lab's operator is started
    again with the proxy's kubeconfig (a restarted operator keeps it: same command)."""
    assert lab.plane is not None and lab.operator is not None
    with FaultyApi(lab.plane) as proxy:
        lab.operator.stop(grace=15)
        lab.start_operator(proxy.write_kubeconfig(lab.config.state_dir / "operator-kubeconfig"))
        yield proxy
        # The operator goes before the proxy it talks through, not after it with the lab.
        assert lab.operator is not None
        lab.operator.stop(grace=15)


def ready(lab: Lab, name: str, members: int) -> dict[str, Any] | None:
    body = get_cg(lab, name)
    group = body.get("status", {}).get("group", {})
    if group.get("members") == members and condition(body, "Ready").get("status") == "True":
        return body
    return None


def rebalance_events(lab: Lab, name: str) -> list[dict[str, Any]]:
    return [e for e in events_for(lab, name) if e["reason"] == "Rebalance"]


def test_hostile_resources_are_refused_by_name_and_the_operator_lives_on(lab: Lab) -> None:
    """A sample of the generated bad specs, through admission and the operator."""
    bad: dict[str, tuple[dict[str, Any], str]] = {}
    for index, pattern in enumerate([*SLOW_PATTERNS[:4], "(unclosed"]):
        body = consumer_group(f"hostile-{index}", lab.bootstrap)
        body["spec"]["subscription"] = {"pattern": pattern}
        bad[f"hostile-{index}"] = (body, "spec.subscription.pattern")
    too_long = consumer_group("hostile-long", lab.bootstrap)
    too_long["spec"]["workload"]["name"] = "w" + "é" * 300
    bad["hostile-long"] = (too_long, "spec.workload.name")
    huge = consumer_group("hostile-huge", lab.bootstrap)
    huge["spec"]["policy"]["observe"]["intervalSeconds"] = 10**30
    bad["hostile-huge"] = (huge, "spec.policy.observe.intervalSeconds")
    negative = consumer_group("hostile-negative", lab.bootstrap)
    negative["spec"]["policy"]["observe"]["reportTtlSeconds"] = -5
    bad["hostile-negative"] = (negative, "spec.policy.observe.reportTtlSeconds")

    refused_at_admission: list[str] = []
    for name, (body, field) in bad.items():
        answer = kubectl(lab, "apply", "-f", "-", stdin=json.dumps(body), check=False)
        if "created" not in answer:
            # The CRD schema answered: the message must name the field too.
            leaf = field.rsplit(".", 1)[-1]
            assert leaf in answer, (name, answer)
            refused_at_admission.append(name)
    print("refused at admission:", refused_at_admission)
    started = time.monotonic()
    for name, (_, field) in bad.items():
        if name in refused_at_admission:
            continue

        def invalid(name: str = name) -> dict[str, Any] | None:
            found = condition(get_cg(lab, name), "Degraded")
            return found if found.get("reason") == "InvalidSpec" else None

        found = eventually(invalid, 60, f"{name} Degraded InvalidSpec")
        assert field in found["message"], (name, found)
        assert len(found["message"]) < 2000
        warnings = [e for e in events_for(lab, name) if e["reason"] == "InvalidSpec"]
        assert warnings and field in warnings[0]["message"]
    # A slow pattern must be refused in well under a second of operator time; the whole batch
    # (the operator's watch, parsing, and status writes) in a few seconds.
    assert time.monotonic() - started < 60
    assert lab.operator is not None and lab.operator.running
    with urllib.request.urlopen(
        f"http://{lab.config.host}:{lab.config.reports_port}/healthz", timeout=5
    ) as response:
        assert response.status == 200
    for name in bad:
        if name not in refused_at_admission:
            kubectl(lab, "delete", "consumergroup", name, "--wait=false")


def test_a_planted_secret_appears_nowhere(lab: Lab) -> None:
    apply(
        lab,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "sasl-creds", "namespace": "default"},
            "stringData": {"username": USERNAME, "password": SECRET},
        },
    )
    body = consumer_group("secured", lab.bootstrap)
    body["spec"]["kafka"]["sasl"] = {
        "mechanism": "SCRAM-SHA-512",
        "usernameSecretRef": {"name": "sasl-creds", "key": "username"},
        "passwordSecretRef": {"name": "sasl-creds", "key": "password"},
    }
    apply(lab, body)

    def failed_with_credentials() -> dict[str, Any] | None:
        found = condition(get_cg(lab, "secured"), "Degraded")
        # The broker speaks no SASL: the operator must have read the Secret and failed after.
        return found if found.get("reason") not in (None, "SecretNotFound") else None

    found = eventually(failed_with_credentials, 90, "the operator to use the Secret and fail")
    print("with the Secret:", found["reason"], found["message"][:200])
    time.sleep(5)  # a few retries' worth of logs and Events
    places = {
        "operator log": (lab.config.state_dir / "logs" / "operator.log").read_text(
            errors="replace"
        ),
        "kubectl get cg -o yaml": kubectl(lab, "get", "consumergroups", "-A", "-o", "yaml"),
        "events": kubectl(lab, "get", "events", "-A", "-o", "yaml"),
        "metrics": urllib.request.urlopen(lab.metrics_url, timeout=5).read().decode(),
        "history": "".join(
            path.read_bytes().decode("latin-1")
            for path in Path(lab.config.state_dir / "history").rglob("*")
            if path.is_file()
        ),
    }
    leaks = [where for where, text in places.items() if SECRET in text]
    assert not leaks, f"the planted secret appears in {leaks}"
    assert all(text for where, text in places.items() if where != "history")
    kubectl(lab, "delete", "consumergroup", "secured", "--wait=false")


@pytest.fixture(scope="module")
def observed(lab: Lab) -> list[ChildProcess]:
    """The group `steady`, two consumers, observed by the operator and Ready."""
    asyncio.run(ensure_topic(lab.bootstrap, "steady", 4))
    apply(lab, statefulset("steady-consumer"), consumer_group("steady", lab.bootstrap))
    members = [
        lab.start_consumer(index, group_id="steady", prefix="steady-consumer") for index in (0, 1)
    ]
    eventually(lambda: ready(lab, "steady", 2), 90, "steady: 2 members, Ready")
    return members


def test_status_patches_answered_409_429_500_and_dropped_watches(
    lab: Lab, faulty: FaultyApi, observed: list[ChildProcess]
) -> None:
    before = get_cg(lab, "steady")["status"]["group"]
    for status in (409, 429, 500):
        faulty.inject(
            status=status, method="PATCH", path_regex=r"/consumergroups/steady(/status)?$", times=2
        )
    # The operator's watches pass through the proxy: cutting them must cut at least one.
    assert faulty.drop_watches() >= 1
    # A rebalance the operator must get into status through the faults.
    observed[1].stop()
    lab.consumers.remove(observed[1])
    faulty.drop_watches()

    def shrunk() -> dict[str, Any] | None:
        body = ready(lab, "steady", 1)
        if body and body["status"]["group"]["rebalances"] > before["rebalances"]:
            return body
        return None

    body = eventually(shrunk, 120, "steady: 1 member, Ready, one more rebalance")
    # Status got through, and only after every fault was met by the operator's writes.
    assert not faulty.active(), [(f.status, f.times) for f in faulty.active()]
    assert body["status"]["group"]["generation"] > before["generation"]
    observed[1] = lab.start_consumer(1, group_id="steady", prefix="steady-consumer")
    eventually(lambda: ready(lab, "steady", 2), 90, "steady: 2 members again")


def test_a_killed_operator_resumes_status_without_repeating_events(
    lab: Lab, observed: list[ChildProcess]
) -> None:
    eventually(lambda: ready(lab, "steady", 2), 90, "steady: Ready")
    time.sleep(3)
    before = get_cg(lab, "steady")["status"]["group"]
    events_before = rebalance_events(lab, "steady")
    counts_before = {e["metadata"]["name"]: e.get("count", 1) for e in events_before}
    restart_operator(lab)

    def observed_again() -> dict[str, Any] | None:
        group = get_cg(lab, "steady")["status"]["group"]
        return group if group["observedAt"] > before["observedAt"] else None

    after = eventually(observed_again, 90, "the restarted operator to write status")
    assert after["rebalances"] >= before["rebalances"], "the rebalance count was reset"
    assert after["generation"] == before["generation"]
    time.sleep(5)
    events_after = rebalance_events(lab, "steady")
    # Nothing happened to the group: no event may be new, and none may count up.
    new = [e["message"] for e in events_after if e["metadata"]["name"] not in counts_before]
    assert not new, f"Rebalance events repeated after the restart: {new}"
    assert {e["metadata"]["name"]: e.get("count", 1) for e in events_after} == counts_before
    # And the restarted operator still sees a real rebalance.
    observed[0].stop()
    lab.consumers.remove(observed[0])
    eventually(
        lambda: get_cg(lab, "steady")["status"]["group"]["rebalances"] > after["rebalances"],
        60,
        "a rebalance seen by the restarted operator",
    )
    observed[0] = lab.start_consumer(0, group_id="steady", prefix="steady-consumer")
    eventually(lambda: ready(lab, "steady", 2), 90, "steady: 2 members again")


def test_a_restarted_broker_is_degraded_then_recovers(
    lab: Lab, observed: list[ChildProcess]
) -> None:
    assert lab.broker is not None
    lab.broker.stop()

    def unreachable() -> dict[str, Any] | None:
        found = condition(get_cg(lab, "steady"), "Degraded")
        return found if found.get("reason") == "KafkaUnreachable" else None

    found = eventually(unreachable, 90, "Degraded KafkaUnreachable")
    assert found["status"] == "True" and lab.bootstrap in found["message"]
    assert condition(get_cg(lab, "steady"), "Ready").get("status") != "True"
    # Memory storage: the broker comes back empty, as after losing its disks.
    lab.broker.start()
    asyncio.run(ensure_topic(lab.bootstrap, "steady", 4))

    def recovered() -> dict[str, Any] | None:
        body = ready(lab, "steady", 2)
        if body and condition(body, "Degraded").get("status") != "True":
            return body
        return None

    eventually(recovered, 150, "steady: Ready again after the broker came back")
    reasons = [e["reason"] for e in events_for(lab, "steady")]
    assert "Recovered" in reasons, reasons
