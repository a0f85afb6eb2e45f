"""Enforced rebalances through real sidecars, with real consumer processes, on Apache Kafka.

docs/enforcing.md promises: one enforcement is exactly one new generation for the application's
members, and under cooperative-sticky they revoke nothing. "No further generation" is checked
after waiting longer than a rejoin takes (a heartbeat and a poll, 2 s here).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient
from kafka_support import Fleet, ReportCollector, eventually, fresh, partitions_of
from sidecar_support import SidecarProcess, wait_joined

from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
from rebalancer.structs.brokers import GroupState
from rebalancer_lab.broker import KafkaBroker
from rebalancer_lab.producer import ensure_topic

PARTITIONS = 4
REPORT_TOKEN = "report-token"
BURST = 8
JOIN_HOLD_S = 4.0  # more than a member takes to rejoin (heartbeat 2 s, then its poll)
APP_ENV = {
    "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
    "REBALANCER_REPORT_INTERVAL_S": "1",
    "REBALANCER_REPORT_TOKEN": REPORT_TOKEN,
}


def settled_generation(
    collector: ReportCollector, hosts: list[str], everything: set[tuple[str, int]]
) -> int | None:
    """The generation all `hosts` report once their partitions split `everything`."""
    latest = [collector.latest(host) for host in hosts]
    if any(report is None or report["event"] not in ("assigned", "heartbeat") for report in latest):
        return None
    owned = [partitions_of(report) for report in latest]
    generations = {report["generation"] for report in latest if report is not None}
    if len(generations) != 1 or set().union(*owned) != everything:
        return None
    if sum(len(part) for part in owned) != len(everything):
        return None
    return generations.pop()


def wait_settled(
    collector: ReportCollector, hosts: list[str], everything: set[tuple[str, int]], what: str
) -> int:
    def probe() -> tuple[int] | None:
        # Generation 0 is falsy: poll for a tuple.
        generation = settled_generation(collector, hosts, everything)
        return None if generation is None else (generation,)

    return eventually(probe, 45, what)[0]


def events_since(
    collector: ReportCollector, host: str, since: float
) -> list[tuple[str, int, frozenset[tuple[str, int]]]]:
    return [
        (report["event"], report["generation"], frozenset(partitions_of(report)))
        for report in collector.reports(host)
        if report["timestamp"] >= since and report["event"] != "heartbeat"
    ]


@dataclass
class EnforcedGroup:
    bootstrap: str
    topic: str
    group_id: str
    collector: ReportCollector
    fleet: Fleet
    sidecars: list[SidecarProcess]
    apps: list[str]

    @property
    def everything(self) -> set[tuple[str, int]]:
        return {(self.topic, partition) for partition in range(PARTITIONS)}

    def generation(self) -> int:
        return wait_settled(
            self.collector, self.apps, self.everything, "the application's members settle"
        )

    def owned(self) -> dict[str, set[tuple[str, int]]]:
        return {host: partitions_of(self.collector.latest(host)) for host in self.apps}

    def actor(self) -> SidecarProcess:
        actors = [s for s in self.sidecars if (s.group() or {}).get("actor")]
        assert len(actors) == 1, f"expected one actor, got {[s.pod for s in actors]}"
        return actors[0]


@pytest.fixture(scope="module")
def group(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnforcedGroup]:
    bootstrap = kafka.bootstrap
    topic, group_id = fresh("enforce"), fresh("enforced")
    asyncio.run(ensure_topic(bootstrap, topic, PARTITIONS))
    logs = tmp_path_factory.mktemp("enforce")
    collector = ReportCollector(REPORT_TOKEN).start()
    fleet = Fleet(bootstrap, logs)
    sidecars: list[SidecarProcess] = []
    env = {**APP_ENV, "REBALANCER_REPORT_URL": collector.url}
    try:
        apps = ["app-0", "app-1"]
        for pod in apps:
            fleet.start(pod, group_id, topic, **env)
            sidecars.append(
                SidecarProcess(
                    pod,
                    bootstrap,
                    group_id,
                    logs,
                    extra=["--rate-per-minute", "6", "--burst", str(BURST)],
                    env={
                        "REBALANCER_REPORT_URL": collector.url,
                        "REBALANCER_REPORT_TOKEN": REPORT_TOKEN,
                    },
                )
            )
        formed = EnforcedGroup(bootstrap, topic, group_id, collector, fleet, sidecars, apps)
        wait_joined(sidecars)
        eventually(
            lambda: (
                formed.generation() == min(s.joined()["generation"] for s in sidecars)  # type: ignore[index]
                and sum(bool((s.group() or {}).get("actor")) for s in sidecars) == 1
            ),
            45,
            "apps and sidecars share one generation with one actor",
        )
        yield formed
    finally:
        for sidecar in sidecars:
            sidecar.kill()
        fleet.kill_all()
        collector.close()


def test_enforcing_through_any_sidecar_is_one_generation_and_moves_nothing(
    group: EnforcedGroup,
) -> None:
    before, owned = group.generation(), group.owned()
    actor = group.actor()
    other = next(s for s in group.sidecars if s is not actor)
    started = time.time()
    # Sent to the sidecar that is not the actor: it reaches the actor through the control topic.
    status, body = other.enforce(group.group_id, "e2e-once", reason="test", waitSeconds=40)
    assert status == 200, body
    assert body["status"] == "enforced" and not body["duplicate"]
    assert body["actor"] == f"{actor.pod}-sidecar"
    assert body["fromGeneration"] == before and body["generation"] == before + 1
    eventually(lambda: group.generation() == before + 1, 20, "apps report the new generation")
    time.sleep(JOIN_HOLD_S)
    assert group.generation() == before + 1
    for host in group.apps:
        events = events_since(group.collector, host, started)
        # Exactly one new generation, in which nothing was revoked or lost.
        assert {generation for _, generation, _ in events} == {before + 1}, events
        assert [event for event, _, _ in events] == ["assigned"], events
    assert group.owned() == owned


def other_existing_group(bootstrap: str, topic: str) -> str:
    """A group that exists on the broker (it has committed offsets) but has no sidecar here."""
    other = fresh("bystander")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(other, [KafkaPartition(topic, 0, 1)])]
    )
    futures[other].result(timeout=10)
    return other


def test_bad_requests_get_clear_errors_and_change_nothing(group: EnforcedGroup) -> None:
    before = group.generation()
    sidecar = group.sidecars[0]
    body = {"groupId": group.group_id, "requestId": "bad-1"}
    status, answer, headers = sidecar.call("POST", "/v1/enforce", body, token="wrong")
    assert status == 401 and "token" in answer["error"] and headers["WWW-Authenticate"] == "Bearer"
    status, answer = sidecar.enforce(fresh("ghost"), "bad-2")
    assert status == 404 and "does not exist" in answer["error"]
    bystander = other_existing_group(group.bootstrap, group.topic)
    status, answer = sidecar.enforce(bystander, "bad-3")
    assert status == 409 and f"not of {bystander!r}" in answer["error"]
    status, answer = sidecar.enforce(group.group_id, "has spaces")
    assert status == 400 and answer["field"] == "requestId"
    time.sleep(JOIN_HOLD_S)
    assert group.generation() == before
    # Nothing was written for them either.
    for request_id in ("bad-1", "bad-2", "bad-3"):
        assert sidecar.call("GET", f"/v1/enforce/{request_id}")[0] == 404


def test_one_request_sent_to_both_sidecars_is_acted_on_once(group: EnforcedGroup) -> None:
    before = group.generation()
    started = time.time()
    answers: list[tuple[int, dict[str, Any]]] = []

    def send(sidecar: SidecarProcess) -> None:
        answers.append(sidecar.enforce(group.group_id, "e2e-dup", waitSeconds=40))

    threads = [threading.Thread(target=send, args=(s,)) for s in group.sidecars]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [status for status, _ in answers] == [200, 200], answers
    assert {body["generation"] for _, body in answers} == {before + 1}
    assert sum(body["duplicate"] for _, body in answers) == 1
    eventually(lambda: group.generation() == before + 1, 20, "apps report the new generation")
    time.sleep(JOIN_HOLD_S)
    assert group.generation() == before + 1
    for host in group.apps:
        assert {g for _, g, _ in events_since(group.collector, host, started)} == {before + 1}


def test_a_request_during_a_rebalance_is_in_progress_and_retried_when_stable(
    group: EnforcedGroup, tmp_path: Path
) -> None:
    group.generation()
    sidecar = group.sidecars[0]
    gateway = AdminGateway(build_client_config([group.bootstrap], None))
    env = {**APP_ENV, "REBALANCER_REPORT_URL": group.collector.url}
    try:
        group.fleet.start("app-2", group.group_id, group.topic, **env)
        group.apps.append("app-2")

        def rebalancing() -> bool:
            state = asyncio.run(gateway.describe_group(group.group_id)).state
            return state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)

        eventually(rebalancing, 20, "the new member's join starts a rebalance", every=0.05)
        status, once = sidecar.enforce(group.group_id, "e2e-busy", waitSeconds=10)
        status_retry, retried = sidecar.enforce(
            group.group_id, "e2e-busy-retry", retryWhenStable=True, waitSeconds=10
        )
    finally:
        gateway.close()
    assert status == 200 and once["status"] == "in-progress" and not once["willRetry"], once
    assert "already in progress" in once["message"]
    assert status_retry == 202 and retried["status"] == "in-progress" and retried["willRetry"]

    def enforced() -> dict[str, Any] | None:
        body = sidecar.call("GET", "/v1/enforce/e2e-busy-retry")[1]
        return body if body["status"] == "enforced" else None

    done = eventually(
        enforced,
        40,
        "the retried request is enforced once the group is Stable",
    )
    settled = group.generation()
    assert done["generation"] > retried["fromGeneration"]
    assert settled >= done["generation"]
    assert sidecar.call("GET", "/v1/enforce/e2e-busy")[1]["status"] == "in-progress"


def outcomes_written(group: EnforcedGroup) -> float:
    """Enforcement outcomes the group's sidecars wrote as actors, summed over all of them."""
    total = 0.0
    for sidecar in group.sidecars:
        for line in sidecar.call_text("/metrics").splitlines():
            if line.startswith("rebalancer_sidecar_outcomes_total"):
                total += float(line.rsplit(" ", 1)[1])
    return total


def test_the_rate_limit_answers_429_and_changes_nothing(group: EnforcedGroup) -> None:
    # Counted by what the sidecars did, not by the group's generation: on a loaded machine a
    # member can miss a heartbeat and rebalance the group for reasons of its own.
    before = outcomes_written(group)
    sidecar = group.sidecars[1]
    answers = [
        sidecar.call("POST", "/v1/enforce", {"groupId": group.group_id}) for _ in range(BURST + 1)
    ]
    limited = [(status, headers) for status, _, headers in answers if status == 429]
    assert limited, [status for status, _, _ in answers]
    assert all(status in (400, 429) for status, _, _ in answers)
    assert int(limited[0][1]["Retry-After"]) >= 1
    metrics = sidecar.call_text("/metrics")
    assert 'rebalancer_sidecar_requests_total{answer="rate_limited"}' in metrics
    time.sleep(JOIN_HOLD_S)
    assert outcomes_written(group) == before


def test_a_matching_new_topic_reaches_every_member_in_one_generation(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap
    prefix, group_id = fresh("created"), fresh("pattern")
    asyncio.run(ensure_topic(bootstrap, f"{prefix}.a", PARTITIONS))
    # Members discover topics only through enforcement here: their own refresh is 5 minutes
    # away, and a full-metadata cache older than metadata.max.age.ms is refreshed on rejoin
    # (librdkafka; Java consumers refresh before every rejoin anyway).
    properties = tmp_path / "consumer.properties"
    properties.write_text("topic.metadata.refresh.interval.ms=300000\nmetadata.max.age.ms=3000\n")
    collector = ReportCollector(REPORT_TOKEN).start()
    fleet = Fleet(bootstrap, tmp_path)
    apps = [f"member-{number}" for number in range(4)]
    env = {
        **APP_ENV,
        "REBALANCER_REPORT_URL": collector.url,
        "KAFKA_TOPIC_PATTERN": f"^{prefix}\\..*",
        "KAFKA_CONFIG_FILE": str(properties),
    }
    sidecar = SidecarProcess(apps[0], bootstrap, group_id, tmp_path)
    try:
        for host in apps:
            fleet.start(host, group_id, "", **env)
        first = {(f"{prefix}.a", partition) for partition in range(PARTITIONS)}
        before = wait_settled(collector, apps, first, "the members settle")
        wait_joined([sidecar])
        asyncio.run(ensure_topic(bootstrap, f"{prefix}.b", PARTITIONS))
        created = time.time()
        time.sleep(0.5)
        # Without enforcement nobody picks the topic up for minutes.
        assert settled_generation(collector, apps, first) == before
        status, body = sidecar.enforce(group_id, "topics-b", reason="topic created", waitSeconds=40)
        assert status == 200 and body["status"] == "enforced", body
        both = first | {(f"{prefix}.b", partition) for partition in range(PARTITIONS)}
        after = wait_settled(collector, apps, both, "every member takes the new topic")
        time.sleep(JOIN_HOLD_S)
        assert after == before + 1
        assert settled_generation(collector, apps, both) == before + 1
        for host in apps:
            events = events_since(collector, host, created)
            assert {generation for _, generation, _ in events} == {before + 1}, events
            assert any(f"{prefix}.b" == topic for topic, _ in partitions_of(collector.latest(host)))
    finally:
        sidecar.kill()
        fleet.kill_all()
        collector.close()
