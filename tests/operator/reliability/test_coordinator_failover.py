"""The group coordinator SIGKILLed on a three-node Apache Kafka cluster: in the middle of a
managed rollout, and in the middle of an enforced rebalance.

Real parts: three Apache Kafka nodes in KRaft mode (each broker and controller), Kubernetes'
control plane (its StatefulSet controller), the lab's kubelet (each pod a `rebalancer gate` init
container, then a consumer process; with the enforcement sidecar injected, `rebalancer sidecar`
beside it), the operator as its own process, and a producer of numbered messages.

The topics have three replicas and min.insync.replicas 2, and the producer waits for all in-sync
replicas (librdkafka's default acks): a message the producer was told is delivered is on at least
two nodes, so losing one node loses nothing. The consumers record every message before they
commit it; every delivered number must be recorded at least once (duplicates are at-least-once's
right and are counted, not failed).

The coordinator of a classic group is the leader of the group's __consumer_offsets partition.
When it dies, the controller moves that leadership once it has fenced the node
(broker.session.timeout.ms, 9 s by default); until then FindCoordinator has no answer and the
members, the sidecar and the operator wait. Each case starts the killed node again at its end,
so the next case has the whole cluster.

Status must tell what happened: a CoordinatorMoved Event from the killed node to the one Kafka
names after it, status.group.coordinator on that node, and, once the killed node is back and has
its partitions again (a preferred leader election, which Kafka's own imbalance check would make
within 5 minutes), the move back, told the same way. While no coordinator answered, a Degraded
condition, if any, names the coordinator, not the cluster.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType
from confluent_kafka.admin import AdminClient, NewTopic
from tests.operator.e2e.support import (
    apply,
    events_for,
    eventually,
    free_port,
    get_cg,
    incarnations,
    kubectl,
    running_lab,
)
from tests.operator.reliability.rollout_fleets import (
    SESSION_MS,
    HoldWatch,
    assert_rolled_once,
    assert_truthful_end,
    batches_opened,
    bump_template,
    event_names,
    fleet,
    managed,
    patch_rollout,
    pods_of,
    rollout_of,
)

from rebalancer.structs.enforcement import control_topic, flip_topic
from rebalancer_lab.ledgers import delivered, numbered_producer, recorded, summarize
from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.running import Lab

# Lab start (three JVMs, the control plane) is outside the test's clock; each case is a cold
# start, a rollout or an injection, one failover (10-13 s measured, fencing included) and the
# wait for every message: 60-80 s each measured, the module 3 min with the lab's start, on 2
# cores shared with other test runs; 900 s leaves room for a machine several times as busy.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PARTITIONS = 4
REPLICATION = 3
MIN_INSYNC = 2
RATE = 40.0  # numbered messages per second, each case
# The longest the coordinator may take to move: the controller fences the dead node after
# broker.session.timeout.ms (9 s) and elects new leaders; measured 9-11 s alone. A JVM or the
# kubelet's processes starved on 2 shared cores have taken several times their usual time, so
# six times the measured figure.
FAILOVER_S = 60.0
# A rollout of four batches of one takes about 40-60 s in this lab with no fault; a batch waits
# out the failover plus the members' rejoin (session 6 s) on top. Three times the sum.
ROLLOUT_S = 300.0
# The cold start of a fleet: pods started, a first generation with every member (the broker's
# 3 s initial delay sliding with each join). 30 s measured at most; four times that.
COLD_START_S = 120.0
# Every produced message processed after the producer stopped: the consumers read at several
# hundred messages a second, the backlog is a few seconds' worth; generous for a busy machine.
DRAIN_S = 120.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # Pods wait up to a second before their first container starts: not all at once.
    with running_lab(
        tmp_path_factory.mktemp("lab"),
        fleet=False,
        own_broker=True,  # three nodes of its own, one of which is killed
        brokers=3,
        pods=True,
        jitter="uniform(0,1)",
        session_timeout_ms=SESSION_MS,
    ) as running:
        yield running


# -- Kafka: topics that survive one node, and the cluster made whole again -------------------


def create_topics(lab: Lab, topics: dict[str, int]) -> None:
    """Each topic with REPLICATION replicas and min.insync.replicas MIN_INSYNC. Asked while all
    three nodes run, by a client dropped at once (a librdkafka client that loses a broker with
    a request in flight can abort its process when the broker comes back)."""
    admin = AdminClient({"bootstrap.servers": lab.bootstrap})
    config = {"min.insync.replicas": str(MIN_INSYNC)}
    futures = admin.create_topics(
        [NewTopic(topic, count, REPLICATION, config=config) for topic, count in topics.items()]
    )
    for future in futures.values():
        future.result(timeout=60)
    del admin


def not_whole(lab: Lab, topics: list[str]) -> tuple[list[str], list[str]]:
    """Partitions of `topics` (and of __consumer_offsets) with fewer in-sync replicas than
    replicas, and those led by another node than their preferred one: both empty when the
    cluster is whole."""
    admin = AdminClient({"bootstrap.servers": lab.bootstrap, "log_level": "0"})
    try:
        metadata = admin.list_topics(timeout=10)
    finally:
        del admin
    lagging, misled = [], []
    for topic in [*topics, "__consumer_offsets"]:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            lagging.append(f"{topic}: not in the metadata")
            continue
        for number, partition in found.partitions.items():
            if len(partition.isrs) < len(partition.replicas):
                lagging.append(f"{topic}[{number}] isr {partition.isrs} of {partition.replicas}")
            elif partition.leader != partition.replicas[0]:
                misled.append(f"{topic}[{number}] led by {partition.leader}")
    return lagging, misled


def elect_preferred_leaders(lab: Lab) -> None:
    """Give every partition back to its preferred replica now, rather than at the controller's
    next imbalance check (leader.imbalance.check.interval.seconds, 300 s): left to it, the
    group coordinators of the next case could move back in the middle of it."""
    admin = AdminClient({"bootstrap.servers": lab.bootstrap, "log_level": "0"})
    try:
        results = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=30)
    finally:
        del admin
    failed = {
        f"{tp.topic}[{tp.partition}]": error
        for tp, error in results.items()
        if error is not None and error.args[0].name() != "ELECTION_NOT_NEEDED"
    }
    assert not failed, f"preferred leader elections failed: {failed}"


def restart_node(lab: Lab, node: int, topics: list[str]) -> float:
    """Start the killed node again, wait until its replicas are in sync and give the partitions
    back to their preferred leaders: the cluster as it was before the kill. Seconds taken."""
    assert lab.broker is not None
    started = time.monotonic()
    lab.broker.start_node(node)
    # Its replicas catch up from the leaders; a case that began before would lose the node's
    # copies as if a second node were down.
    try:
        eventually(
            lambda: not not_whole(lab, topics)[0], FAILOVER_S, f"node {node}'s replicas in sync"
        )
        elect_preferred_leaders(lab)
        eventually(lambda: not any(not_whole(lab, topics)), FAILOVER_S, "the preferred leaders")
    except AssertionError:
        raise AssertionError(f"the cluster is not whole again: {not_whole(lab, topics)}") from None
    return time.monotonic() - started


def new_coordinator(lab: Lab, group: str, killed: int) -> int:
    """The node that coordinates `group` once it is another than `killed` (asked from a process
    of its own, again and again: right after the kill no node answers for the group)."""
    assert lab.broker is not None
    deadline = time.monotonic() + FAILOVER_S
    seen: list[int] = []
    while time.monotonic() < deadline:
        found = lab.broker.coordinator_of(group, timeout=max(1.0, deadline - time.monotonic()))
        if found != killed:
            return found
        seen.append(found)
        time.sleep(0.2)
    raise AssertionError(
        f"group {group!r}: no coordinator other than the killed node {killed} within "
        f"{FAILOVER_S:.0f} s (answers: {seen})"
    )


def kill_node(lab: Lab, node: int) -> float:
    """SIGKILL one node, as a crashed machine; the moment of the kill (monotonic)."""
    assert lab.broker is not None
    lab.broker.kill_node(node)
    killed_at = time.monotonic()
    assert not lab.broker.node(node).running, f"node {node} still runs after SIGKILL"
    return killed_at


# -- what the operator says, sampled ----------------------------------------------------------


class StatusLog:
    """status.rollout, status.group and the conditions, sampled in the background with the
    time since `origin`: what the operator said through the outage, for the assertions and
    for the failure messages."""

    def __init__(self, lab: Lab, name: str, every: float = 0.5) -> None:
        self.lab = lab
        self.name = name
        self.every = every
        self.origin = time.monotonic()
        self.samples: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"status-{name}", daemon=True)

    def __enter__(self) -> StatusLog:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                status = get_cg(self.lab, self.name).get("status") or {}
            except Exception:  # an API hiccup costs one sample, not the log
                continue
            self.samples.append((time.monotonic(), status))

    def since(self, moment: float) -> list[tuple[float, dict[str, Any]]]:
        return [(at - moment, status) for at, status in self.samples if at >= moment]

    def first(self, moment: float, probe: Any) -> float | None:
        """Seconds from `moment` to the first sample for which probe(status) holds."""
        for offset, status in self.since(moment):
            if probe(status):
                return offset
        return None

    def timeline(self, moment: float) -> str:
        """Each change of what status says, from `moment` on, one short line each."""
        lines: list[str] = []
        last = None
        for offset, status in self.since(moment - 2.0):
            group = status.get("group") or {}
            rollout = status.get("rollout") or {}
            conditions = {
                item.get("type"): f"{item.get('status')}/{item.get('reason')}"
                for item in status.get("conditions") or []
            }
            enforcement = status.get("enforcement") or {}
            said = (
                f"rollout {rollout.get('phase')} {rollout.get('batch')}/{rollout.get('batches')}"
                f"; group {group.get('state')} gen {group.get('generation')} members "
                f"{group.get('members')} coordinator {group.get('coordinator')}"
                f"; enforcement {enforcement.get('lastStatus')}; {conditions}"
            )
            if said != last:
                lines.append(f"{offset:+6.1f} s {said}")
                last = said
        return "\n".join(lines[-40:])


def degraded_during(log: StatusLog, moment: float) -> list[str]:
    """Each distinct Degraded=True condition status showed from `moment` on, as reason: message."""
    found: list[str] = []
    for _, status in log.since(moment):
        for item in status.get("conditions") or []:
            if item.get("type") == "Degraded" and item.get("status") == "True":
                said = f"{item.get('reason')}: {item.get('message')}"
                if said not in found:
                    found.append(said)
    return found


def assert_outage_told_truly(log: StatusLog, killed_at: float) -> list[str]:
    """While the group had no coordinator, status may say the group could not be observed, but
    what it names is the coordinator: two of three brokers answered all along, so "cannot
    reach Kafka" would send its reader to the wrong place."""
    degraded = degraded_during(log, killed_at)
    wrong = [
        said
        for said in degraded
        if said.startswith("KafkaUnreachable:") or "coordinator" not in said
    ]
    assert not wrong, f"Degraded during the outage without naming the coordinator: {wrong}"
    return degraded


def moved_events(lab: Lab, name: str, seen: set[str]) -> list[dict[str, Any]]:
    return [
        event
        for event in events_for(lab, name)
        if event["reason"] == "CoordinatorMoved" and event["metadata"]["name"] not in seen
    ]


def assert_move_told(
    lab: Lab, name: str, seen: set[str], killed: int, moved_to: int, log: StatusLog
) -> str:
    """The operator told the move: a CoordinatorMoved Event from the killed node to the one
    Kafka names now, and status.group.coordinator on the new node. Returns the message."""
    try:
        events = eventually(
            lambda: moved_events(lab, name, seen), FAILOVER_S, "a CoordinatorMoved Event"
        )
    except AssertionError:
        recent = [(e["reason"], e.get("message")) for e in events_for(lab, name)][-10:]
        raise AssertionError(
            f"no CoordinatorMoved Event after node {killed} was killed; Events {recent}; "
            f"status over time:\n{log.timeline(log.origin)}"
        ) from None
    messages = [str(event.get("message")) for event in events]
    expected = f"group coordinator moved from node {killed} to node {moved_to}"
    assert any(message.startswith(expected) for message in messages), (expected, messages)
    # One move, told once: the observer remembers the node it told.
    assert len(events) == 1 and events[0].get("count", 1) == 1, messages
    group = get_cg(lab, name)["status"]["group"]
    assert group.get("coordinator") == moved_to, group
    return messages[0]


# -- the ledger ---------------------------------------------------------------------------------


def no_message_lost(lab: Lab, producer: ChildProcess, records: Path, label: str) -> str:
    """Stop the producer; every number it delivered must be recorded by some consumer. Returns
    the summary (produced, distinct processed, redeliveries)."""
    # Its last deliveries may wait on a busy machine: it says what it delivered.
    producer.stop(grace=60)
    produced = set(range(delivered(producer)))
    assert len(produced) > 500, f"only {len(produced)} messages produced over the case"

    def files() -> list[Path]:
        return sorted(records.glob("*.tsv"))

    try:
        eventually(
            lambda: produced <= set(recorded(files())), DRAIN_S, "every message processed", 1
        )
    finally:
        seen = recorded(files())
    summary = summarize(produced, seen)
    (lab.config.state_dir / f"{label}-ledger.txt").write_text(summary + "\n")
    return summary


def start_producer(lab: Lab, name: str) -> ChildProcess:
    producer = numbered_producer(lab, f"{name}-producer", name, rate=RATE, count=0)
    producer.start()
    return producer


def settled(lab: Lab, name: str, members: int) -> dict[str, Any] | None:
    group = (get_cg(lab, name).get("status") or {}).get("group") or {}
    whole = group.get("state") == "Stable" and group.get("assignedPartitions") == PARTITIONS
    return group if whole and group.get("members") == members else None


def completed_after(lab: Lab, name: str, before: str | None) -> dict[str, Any] | None:
    rollout = rollout_of(lab, name)
    done = rollout.get("phase") == "Completed" and rollout.get("rolloutId") != before
    return rollout if done else None


def cold_start(lab: Lab, name: str, replicas: int, body: dict[str, Any], records: Path) -> str:
    """The ConsumerGroup `body` and its fleet, its cold start Completed and the group settled
    on every partition; the cold start's rolloutId."""
    apply(lab, body, fleet(lab, name, replicas, record_dir=records))
    done = eventually(
        lambda: completed_after(lab, name, None), COLD_START_S, f"{name}: the cold start"
    )
    eventually(lambda: settled(lab, name, replicas), COLD_START_S, f"{name}: {replicas} settled")
    return str(done["rolloutId"])


def with_cluster(body: dict[str, Any], lab: Lab) -> dict[str, Any]:
    # All three nodes, one per entry: any of them answers the operator's first request.
    body["spec"]["kafka"]["bootstrapServers"] = lab.bootstrap.split(",")
    return body


def seconds(value: float | None) -> str:
    return "(not seen)" if value is None else f"{value:.1f} s"


def remove_fleet(lab: Lab, name: str) -> None:
    """A finished case's fleet and ConsumerGroup deleted: its pods would only take CPU from the
    next case."""
    kubectl(lab, "delete", "sts", f"{name}-consumer", "--wait=false", check=False)
    kubectl(lab, "delete", "cg", name, "--wait=false", check=False)


def recover(lab: Lab, node: int, topics: list[str]) -> None:
    """The node started again after a case that failed half-way, for the next case; its own
    failure is printed, not raised over the case's."""
    try:
        restart_node(lab, node, topics)
    except Exception as error:  # the case's own failure is the one to see
        print(f"restarting node {node} after the failure failed too: {error}")


def assert_move_back_told(
    lab: Lab, name: str, seen: set[str], moved_to: int, report: dict[str, Any]
) -> None:
    """With the preferred leaders back, the group may be coordinated by its first node again:
    that move is told like the first one."""
    assert lab.broker is not None
    back = lab.broker.coordinator_of(name)
    report["coordinator_after_restart"] = back
    if back == moved_to:
        return
    expected = f"group coordinator moved from node {moved_to} to node {back}"

    def told() -> list[str]:
        messages = [str(e.get("message")) for e in moved_events(lab, name, seen)]
        return [m for m in messages if m.startswith(expected)]

    eventually(told, FAILOVER_S, f"an Event saying {expected!r}")
    group = eventually(
        lambda: (g := get_cg(lab, name)["status"]["group"]).get("coordinator") == back and g,
        FAILOVER_S,
        f"status.group.coordinator {back}",
    )
    assert group["coordinator"] == back


# -- 1. the coordinator killed in the middle of a managed rollout -----------------------------

ROLLOUT = "failover"
# A rerun starts a fleet, a topic and a group of its own, not the failed attempt's.
ATTEMPTS = itertools.count(1)
ROLLOUT_REPLICAS = 4


def test_the_coordinator_killed_mid_rollout(lab: Lab) -> None:
    name = f"{ROLLOUT}-{next(ATTEMPTS)}"
    assert lab.broker is not None
    records = lab.config.state_dir / f"{name}-records"
    create_topics(lab, {name: PARTITIONS})
    # The cold start in one batch; the rolling update below goes one pod per batch.
    body = with_cluster(managed(lab, name, maxBatchSize=ROLLOUT_REPLICAS), lab)
    before = cold_start(lab, name, ROLLOUT_REPLICAS, body, records)
    coordinator = lab.broker.coordinator_of(name)
    eventually(
        lambda: get_cg(lab, name)["status"]["group"].get("coordinator") == coordinator,
        30,
        f"status.group.coordinator to name node {coordinator}, as Kafka does",
    )
    pods = [f"{name}-consumer-{k}" for k in range(ROLLOUT_REPLICAS)]
    lives = {pod: incarnations(lab, pod) for pod in pods}
    seen = event_names(lab, name)
    producer = start_producer(lab, name)
    report: dict[str, Any] = {"coordinator": coordinator}
    down = False
    try:
        with HoldWatch(lab, name) as holds, StatusLog(lab, name) as log:
            patch_rollout(lab, name, maxBatchSize=1)
            time.sleep(2)  # the producer's first messages before the rollout
            bump_template(lab, name, "2")
            steps: list[tuple[Any, Any]] = []

            def second_batch() -> dict[str, Any] | None:
                rollout = rollout_of(lab, name)
                step = (rollout.get("batch"), rollout.get("phase"))
                if not steps or steps[-1] != step:
                    steps.append(step)
                fresh = rollout.get("rolloutId") != before
                # Mid-batch: its pod released, the group not settled with it yet. A pod that
                # comes back within its session may pass from joining to settling between
                # two looks.
                joining = rollout.get("phase") in ("BatchJoining", "BatchSettling")
                return rollout if fresh and joining and rollout.get("batch") == 2 else None

            try:
                during = eventually(second_batch, ROLLOUT_S, "batch 2 under way", every=0.1)
            except AssertionError:
                raise AssertionError(
                    f"batch 2 never seen; steps {steps}; status:\n{log.timeline(log.origin)}"
                ) from None
            killed_at = kill_node(lab, coordinator)
            down = True
            moved_to = new_coordinator(lab, name, coordinator)
            report["kill_to_new_coordinator_s"] = time.monotonic() - killed_at
            try:
                final = eventually(
                    lambda: completed_after(lab, name, before), ROLLOUT_S, "the rollout Completed"
                )
            except AssertionError:
                raise AssertionError(
                    f"the rollout did not complete after node {coordinator} was killed at "
                    f"batch 2 ({during.get('phase')}); status from the kill:\n"
                    f"{log.timeline(killed_at)}"
                ) from None
            report["kill_to_rollout_end_s"] = time.monotonic() - killed_at
            message = assert_move_told(lab, name, seen, coordinator, moved_to, log)
            report["told_in_s"] = log.first(
                killed_at, lambda s: (s.get("group") or {}).get("coordinator") == moved_to
            )
            timeline = log.timeline(killed_at)
            report["degraded"] = assert_outage_told_truly(log, killed_at)
        # The rollout went on from where it was: the same one, every batch once, in order,
        # every pod replaced once, nothing claiming progress or trouble at the end.
        assert final["rolloutId"] == during["rolloutId"], (during, final)
        assert final["batches"] == ROLLOUT_REPLICAS, final
        assert final["membersJoined"] == ROLLOUT_REPLICAS, final
        assert_truthful_end(lab, name, ROLLOUT_REPLICAS)
        numbers = batches_opened(lab, name, "rolling-update", seen)
        assert numbers == list(range(1, ROLLOUT_REPLICAS + 1)), f"batches opened: {numbers}"
        assert_rolled_once(lab, name, final, ROLLOUT_REPLICAS)
        replaced = {pod: incarnations(lab, pod) - lives[pod] for pod in lives}
        assert replaced == {pod: 1 for pod in lives}, f"pods replaced: {replaced}"
        # Held pods were explained by a condition all along, the outage included.
        holds.assert_clean()
        report["restart_s"] = restart_node(lab, coordinator, [name])
        down = False
        assert_move_back_told(lab, name, seen, moved_to, report)
    finally:
        if down:
            recover(lab, coordinator, [name])
        producer.stop(grace=60)
    report["ledger"] = no_message_lost(lab, producer, records, name)
    remove_fleet(lab, name)
    print(
        f"\nmid-rollout: node {coordinator} killed at batch 2 ({during['phase']}); "
        f"{message}; new coordinator after {report['kill_to_new_coordinator_s']:.1f} s, in "
        f"status after {seconds(report['told_in_s'])}; rollout Completed "
        f"{report['kill_to_rollout_end_s']:.1f} s after the kill; node back and leaders "
        f"preferred after {report['restart_s']:.1f} s, coordinator then node "
        f"{report['coordinator_after_restart']}; Degraded meanwhile: {report['degraded']}; "
        f"{report['ledger']}\nstatus from the kill:\n{timeline}"
    )
    (lab.config.state_dir / f"{name}-report.json").write_text(json.dumps(report, default=str))


# -- 2. the coordinator killed while the enforcement sidecar rejoins --------------------------

ENFORCED = "enforced"
ENFORCED_REPLICAS = 3
TOKEN = "failover-sidecar-token"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# The sidecar gives a rejoin up after enforce_timeout_seconds (120 s) with no new generation,
# and the operator sends a failed call again 15 s later by itself; a failure that lasts longer
# than both is final, and the request is asked again, once, with a new token.
GIVEN_UP_S = 150.0


def sidecar_view(address: str, port: int) -> dict[str, Any] | None:
    """The sidecar's /v1/group at its pod's address; None while nothing answers there."""
    request = urllib.request.Request(
        f"http://{address}:{port}/v1/group", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        with DIRECT.open(request, timeout=2) as answer:
            return dict(json.loads(answer.read().decode()))
    except (OSError, ValueError):
        return None


def sidecar_addresses(lab: Lab, name: str) -> list[str]:
    """The addresses of the fleet's Ready pods that run the sidecar."""
    found = []
    for pod in pods_of(lab, name):
        containers = [c["name"] for c in pod["spec"]["containers"]]
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        live = not pod["metadata"].get("deletionTimestamp")
        if "rebalancer-sidecar" in containers and ready and live:
            found.append(pod["status"]["podIP"])
    return sorted(found)


def enforcement(lab: Lab, name: str) -> dict[str, Any]:
    return dict((get_cg(lab, name).get("status") or {}).get("enforcement") or {})


def patch_enforce(lab: Lab, name: str, **fields: Any) -> None:
    patch = json.dumps({"spec": {"policy": {"enforce": fields}}})
    kubectl(lab, "patch", "cg", name, "--type=merge", "-p", patch)


def injected(lab: Lab, name: str, port: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Inject the sidecar into the running fleet and wait until every pod runs it and every
    sidecar is in the group; the pods' addresses and the sidecars' views."""
    before = rollout_of(lab, name).get("rolloutId")
    patch_rollout(lab, name, maxBatchSize=1)
    patch_enforce(lab, name, sidecar={"inject": True})
    eventually(
        lambda: completed_after(lab, name, before), ROLLOUT_S, "the sidecar rolled into the pods"
    )

    def every_pod() -> list[str] | None:
        found = sidecar_addresses(lab, name)
        return found if len(found) == ENFORCED_REPLICAS else None

    addresses = eventually(every_pod, COLD_START_S, "every pod Ready with the sidecar")

    def joined() -> list[dict[str, Any]] | None:
        views = [sidecar_view(address, port) for address in addresses]
        return [v for v in views if v] if all(v and v["generation"] >= 0 for v in views) else None

    eventually(joined, COLD_START_S, "every sidecar in the group")
    eventually(lambda: enforcement(lab, name).get("memory"), 60, "the enforce policy taken in")
    time.sleep(4)  # the sidecars' own joins are over
    eventually(lambda: settled(lab, name, ENFORCED_REPLICAS), COLD_START_S, "the group settled")
    views = joined()
    assert views is not None, "a sidecar left the group"
    return addresses, views


def test_the_coordinator_killed_while_the_sidecar_rejoins(lab: Lab) -> None:
    name = ENFORCED
    assert lab.broker is not None
    records = lab.config.state_dir / f"{name}-records"
    topics = [name, control_topic(name), flip_topic(name)]
    # The sidecars' control topics made here like the application's, so the control log
    # survives the node too (a sidecar makes missing ones with the broker's defaults).
    create_topics(lab, {name: PARTITIONS, control_topic(name): 1, flip_topic(name): 1})
    port = free_port()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-token", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    apply(lab, secret)
    body = with_cluster(managed(lab, name, maxBatchSize=ENFORCED_REPLICAS), lab)
    # The first token is the baseline: it never enforces.
    body["spec"]["policy"]["enforce"] = {
        "requestToken": "first",
        "sidecar": {"port": port, "tokenSecretRef": {"name": f"{name}-token"}},
    }
    cold_start(lab, name, ENFORCED_REPLICAS, body, records)
    addresses, views = injected(lab, name, port)
    group = settled(lab, name, ENFORCED_REPLICAS)
    assert group is not None, get_cg(lab, name).get("status")
    generation = int(group["generation"])
    actors = [view for view in views if view.get("actor")]
    assert len(actors) == 1, f"one acting sidecar expected: {views}"
    actor_address = addresses[views.index(actors[0])]
    subscribed = actors[0]["subscription"]
    coordinator = lab.broker.coordinator_of(name)
    seen = event_names(lab, name)
    producer = start_producer(lab, name)
    report: dict[str, Any] = {"coordinator": coordinator, "generation_before": generation}
    retried: list[str] = []
    down = False
    try:
        with StatusLog(lab, name, every=0.3) as log:
            time.sleep(2)  # the producer's first messages before the request
            asked_at = time.monotonic()
            patch_enforce(lab, name, requestToken="second")

            # The actor adds or drops its flip topic and rejoins: the moment to kill is once
            # its subscription changed, before the group has formed anew.
            def flipped() -> dict[str, Any] | None:
                view = sidecar_view(actor_address, port)
                return view if view and view.get("subscription") != subscribed else None

            # The operator's enforce timer runs every 3 s; the request goes through the
            # control log to the actor: a few seconds measured.
            at_flip = eventually(flipped, 60, "the acting sidecar's rejoin", every=0.02)
            killed_at = kill_node(lab, coordinator)
            down = True
            report["token_to_kill_s"] = killed_at - asked_at
            # In flight: the actor had not seen a new generation yet when the node died.
            assert at_flip["generation"] == generation, (
                f"the rejoin was over before the kill (generation {at_flip['generation']} at "
                f"the flip, {generation} before the request): nothing was in flight"
            )
            moved_to = new_coordinator(lab, name, coordinator)
            report["kill_to_new_coordinator_s"] = time.monotonic() - killed_at
            failing_since: list[float] = []

            def enforced() -> dict[str, Any] | None:
                record = enforcement(lab, name)
                status = record.get("lastStatus")
                if status not in ("failed", "expired"):
                    failing_since.clear()
                elif not failing_since:
                    failing_since.append(time.monotonic())
                elif not retried and time.monotonic() - failing_since[0] > 30:
                    # Neither the operator's own retry nor the sidecar recovered it.
                    retried.append(f"{status}: {record}")
                    patch_enforce(lab, name, requestToken="third")
                done = status == "enforced" and (record.get("lastGeneration") or 0) > generation
                return record if done else None

            try:
                record = eventually(enforced, GIVEN_UP_S + ROLLOUT_S, "the enforced rebalance")
            except AssertionError:
                raise AssertionError(
                    f"not enforced after node {coordinator} was killed mid-rejoin (retried: "
                    f"{retried}); status from the kill:\n{log.timeline(killed_at)}"
                ) from None
            report["kill_to_enforced_s"] = time.monotonic() - killed_at
            report["retried"] = retried
            message = assert_move_told(lab, name, seen, coordinator, moved_to, log)
            report["told_in_s"] = log.first(
                killed_at, lambda s: (s.get("group") or {}).get("coordinator") == moved_to
            )
            statuses: list[str] = []
            for _, status in log.since(asked_at):
                said = (status.get("enforcement") or {}).get("lastStatus")
                if said and (not statuses or statuses[-1] != said):
                    statuses.append(said)
            report["enforcement_statuses"] = statuses
            timeline = log.timeline(killed_at)
            report["degraded"] = assert_outage_told_truly(log, killed_at)
        assert len(retried) <= 1, retried
        assert record["lastCause"] == "on-demand", record
        # The group formed again with every member of the application on every partition, on
        # a generation after the one the request met.
        final = eventually(
            lambda: settled(lab, name, ENFORCED_REPLICAS), COLD_START_S, "the group settled"
        )
        assert final["generation"] > generation, final
        reasons = [e["reason"] for e in events_for(lab, name) if e["metadata"]["name"] not in seen]
        assert "RebalanceEnforced" in reasons, reasons
        report["restart_s"] = restart_node(lab, coordinator, topics)
        down = False
        assert_move_back_told(lab, name, seen, moved_to, report)
    finally:
        if down:
            recover(lab, coordinator, topics)
        producer.stop(grace=60)
    report["ledger"] = no_message_lost(lab, producer, records, name)
    print(
        f"\nmid-enforcement: node {coordinator} killed {report['token_to_kill_s']:.1f} s after "
        f"the token change, at the actor's rejoin (generation {generation}); {message}; new "
        f"coordinator after {report['kill_to_new_coordinator_s']:.1f} s, in status after "
        f"{seconds(report['told_in_s'])}; enforced {report['kill_to_enforced_s']:.1f} s after "
        f"the kill "
        f"(generation {record.get('lastGeneration')}; statuses {statuses}; retried {retried}); "
        f"node back and leaders preferred after {report['restart_s']:.1f} s, coordinator then "
        f"node {report['coordinator_after_restart']}; Degraded meanwhile: {report['degraded']}; "
        f"{report['ledger']}\nstatus from the kill:\n{timeline}"
    )
    (lab.config.state_dir / f"{name}-report.json").write_text(json.dumps(report, default=str))
