"""The example consumer installed as its image installs it (examples/consumer/Dockerfile: the
operator's package without its dependencies, the application, confluent-kafka at the pinned
version), run against a real Apache Kafka broker: it waits at its join gate, takes the identity
slot written beside the gate's file, consumes, sends member reports, and on SIGTERM commits,
closes and says so in a last report.

The image itself is built by `make images` (buildah), which also runs the application in it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
import venv
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.kafka_brokers import shared_broker

from rebalancer import __version__
from rebalancer.structs.gates import JOIN_GATE_ENV, JOIN_GATE_INSTANCE_ID_FILE

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
MESSAGES = 30
# The Dockerfile's way of reading confluent-kafka's pin from the package's metadata.
CONFLUENT_REQUIREMENT = """
import re
from importlib.metadata import requires
print("\\n".join(r for r in requires("rebalancer") if "extra" not in r
                 and re.match(r"confluent-kafka\\b", r)))
"""


def _run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(arg) for arg in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd="/",  # nothing is imported from the source tree by accident
    )


def _wheel(source: Path, dist: Path, pattern: str) -> Path:
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, source)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = dist.glob(pattern)
    return found


@pytest.fixture(scope="module")
def consumer_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from copies laid out as the image's build context, so the tree gets no build files.
    source = tmp_path_factory.mktemp("context")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "operator", source / "operator", ignore=ignore)
    shutil.copytree(ROOT / "examples" / "consumer", source / "examples" / "consumer", ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    operator = _wheel(source, dist, "rebalancer-*.whl")
    example = _wheel(source / "examples" / "consumer", dist, "rebalancer_example_consumer-*.whl")
    assert example.name.startswith(f"rebalancer_example_consumer-{__version__}-")
    home = tmp_path_factory.mktemp("consumer-venv")
    venv.EnvBuilder(with_pip=True).create(home)
    python = home / "bin" / "python"
    installed = _run(python, "-m", "pip", "install", "--quiet", "--no-deps", operator, example)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    listed = _run(python, "-c", CONFLUENT_REQUIREMENT, timeout=60)
    assert listed.returncode == 0, listed.stderr
    [requirement] = listed.stdout.split()
    installed = _run(python, "-m", "pip", "install", "--quiet", requirement)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return home / "bin"


def test_the_install_holds_only_what_the_application_needs(consumer_bin: Path) -> None:
    for absent in ("kopf", "kubernetes", "aiohttp", "aiokafka", "pydantic", "rebalancer-lab"):
        shown = _run(consumer_bin / "python", "-m", "pip", "show", "--quiet", absent, timeout=60)
        assert shown.returncode != 0, f"{absent} is in the example consumer's install"
    helped = _run(consumer_bin / "rebalancer-example-consumer", "--help", timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: rebalancer-example-consumer")


def test_a_missing_bootstrap_address_is_a_clear_error(consumer_bin: Path) -> None:
    done = _run(consumer_bin / "rebalancer-example-consumer", timeout=60)
    assert done.returncode == 2
    assert "KAFKA_BOOTSTRAP_SERVERS" in done.stderr
    assert "Traceback" not in done.stderr


class Reports:
    """A member-report endpoint: every accepted body, in arrival order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(202)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/reports"

    def events(self) -> list[str]:
        return [str(body["event"]) for body in list(self.bodies)]


@pytest.fixture
def reports() -> Iterator[Reports]:
    endpoint = Reports()
    endpoint.thread.start()
    try:
        yield endpoint
    finally:
        endpoint.server.shutdown()


def eventually(check: Callable[[], bool], timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:g} s; the consumer's output:\n{log.read_text()}")
        time.sleep(0.2)


def committed(bootstrap: str, group: str, topic: str) -> int:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        reader.close()
    return sum(max(o.offset, 0) for o in offsets)


def test_gate_slot_reports_and_a_clean_leave_on_a_real_broker(
    consumer_bin: Path, reports: Reports, tmp_path: Path
) -> None:
    bootstrap = shared_broker().bootstrap
    topic = group = f"example-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(MESSAGES):
        producer.produce(topic, key=str(number).encode(), value=b"order")
    assert producer.flush(30) == 0

    gate = tmp_path / "gate" / "open"
    gate.parent.mkdir()
    log = tmp_path / "consumer.log"
    env = {
        "PATH": f"{consumer_bin}:/usr/bin:/bin",
        "POD_NAME": "orders-audit-7f9c-x2",
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_GROUP_ID": group,
        "KAFKA_TOPICS": topic,
        "KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky",
        # A Deployment's pod before its slot: the variable is there, empty.
        "KAFKA_GROUP_INSTANCE_ID": "",
        "KAFKA_SESSION_TIMEOUT_MS": "10000",
        "REBALANCER_REPORT_URL": reports.url,
        "REBALANCER_REPORT_INTERVAL_S": "1",
        "REBALANCER_NAMESPACE": "orders",
        "REBALANCER_CONSUMER_GROUP": "orders-audit",
        JOIN_GATE_ENV: str(gate),
    }
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [consumer_bin / "rebalancer-example-consumer"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd="/",
        )
    try:
        eventually(lambda: "holding the join" in log.read_text(), 30, "no hold at the gate", log)
        time.sleep(2)  # held: nothing joined, nothing reported
        assert reports.bodies == [] and committed(bootstrap, group, topic) == 0
        (gate.parent / JOIN_GATE_INSTANCE_ID_FILE).write_text("orders-audit-1\n")
        gate.write_text("open\n")
        eventually(
            lambda: committed(bootstrap, group, topic) == MESSAGES, 60, "not all committed", log
        )
        eventually(lambda: "heartbeat" in reports.events(), 30, "no heartbeat report", log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text()
    assert f"stopped after processing {MESSAGES} messages" in output
    events = reports.events()
    assert events[0] == "assigned" and events[-1] == "stopped", events
    first = reports.bodies[0]
    assert first["member"]["instanceId"] == "orders-audit-1"
    assert first["consumerGroup"] == "orders-audit" and first["namespace"] == "orders"
    assert len(first["partitions"]) == PARTITIONS
    assert first["generation"] >= 1
    # The coordinator knows the member by its slot. A static member sends no LeaveGroup on
    # close (KIP-345): its replacement takes the slot back within the session, no rebalance.
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert [m.group_instance_id for m in described.members] == ["orders-audit-1"]
