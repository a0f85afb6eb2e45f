"""An admin gateway through a broker outage of the length that made librdkafka 2.16.0 abort the
whole process when the broker came back (an assertion in rd_kafka_enq_once_del_source_return):
the gateway replaces a client whose request went unanswered, so the process lives and the
gateway answers again once the broker is back. And through the loss of a group's coordinator
on three nodes, which aborted the process the same way once Kafka named the new coordinator
after a DescribeGroups had timed out in librdkafka: requests to a coordinator are bounded by the
gateway's own clock instead. When the killed node is back and takes its partitions back, the
old node answers that it is the coordinator no longer, and the gateway looks the coordinator up
anew instead of asking the old node at every look.

Run in child processes: an abort would take pytest down with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = textwrap.dedent(
    """
    import asyncio, logging, sys, time
    from pathlib import Path

    from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
    from rebalancer.clients.kafka_errors import KafkaUnavailable
    from rebalancer_lab.broker import KafkaBroker, free_port

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    logging.getLogger("rebalancer.kafka.librdkafka").setLevel(logging.CRITICAL)

    async def main(state: Path, outage: float) -> None:
        # A port of its own: the broker comes back on it.
        broker = KafkaBroker(port=free_port("127.0.0.1"), log_dir=state)
        broker.start()
        gateway = AdminGateway(build_client_config([broker.bootstrap], None))
        print("before", (await gateway.describe_group("g")).state, flush=True)
        broker.stop()
        started = time.monotonic()
        while time.monotonic() - started < outage:
            try:
                await gateway.describe_group("g")
            except KafkaUnavailable:
                print("unavailable", flush=True)
            await asyncio.sleep(2)
        broker.start()
        await asyncio.sleep(5)
        for _ in range(20):
            try:
                print("after", (await gateway.describe_group("g")).state, flush=True)
                break
            except KafkaUnavailable:
                await asyncio.sleep(1)
        gateway.close()
        broker.stop()

    asyncio.run(main(Path(sys.argv[1]), float(sys.argv[2])))
    """
)


def test_the_gateway_outlives_a_broker_outage_and_answers_after_it(tmp_path: Path) -> None:
    # A session of its own: an aborted child would leave its broker running otherwise.
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        said, _ = child.communicate(timeout=150)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == 0, said[-3000:]
    assert "unavailable" in said and "replaced the Kafka admin client" in said, said[-3000:]
    assert any(line.startswith("after ") for line in said.splitlines()), said[-3000:]


COORDINATOR_SCRIPT = textwrap.dedent(
    """
    import asyncio, logging, sys, time
    from pathlib import Path

    from confluent_kafka import ElectionType
    from confluent_kafka.admin import AdminClient

    from rebalancer.clients.kafka_admin import AdminGateway, build_client_config
    from rebalancer.clients.kafka_errors import KafkaRequestFailed, KafkaUnavailable
    from rebalancer_lab.broker import KafkaCluster

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    logging.getLogger("rebalancer.kafka.librdkafka").setLevel(logging.CRITICAL)

    async def main(state: Path) -> None:
        cluster = KafkaCluster(3, log_dir=state)
        cluster.start()
        # Requests time out (3 s) well before Kafka names a new coordinator (9 s of fencing).
        config = {**build_client_config(cluster.bootstrap.split(","), None)}
        config["socket.timeout.ms"] = "3000"
        gateway = AdminGateway(config)
        coordinator = (await gateway.describe_group("g")).coordinator_id
        print("before", coordinator, flush=True)
        cluster.kill_node(coordinator)
        started = time.monotonic()
        while time.monotonic() - started < 60:
            try:
                moved = (await gateway.describe_group("g")).coordinator_id
            except KafkaUnavailable as error:
                print("unavailable:", error, flush=True)
            else:
                print("after", moved, flush=True)
                # On: the process must also live past the moment the new one was named.
                if time.monotonic() - started > 30:
                    break
            await asyncio.sleep(1)
        # The node back, and its partitions given back to it once its replicas are in sync
        # (asked again until then): the group moves again.
        cluster.start_node(coordinator)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        started = time.monotonic()
        while time.monotonic() - started < 60:
            admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=30)
            try:
                back = (await gateway.describe_group("g")).coordinator_id
            except (KafkaRequestFailed, KafkaUnavailable) as error:
                print("failed:", error, flush=True)
            else:
                print("back", back, flush=True)
                if back == coordinator:
                    break
            await asyncio.sleep(1)
        del admin
        gateway.close()
        cluster.stop()

    asyncio.run(main(Path(sys.argv[1])))
    """
)


def test_the_gateway_outlives_its_group_coordinator_killed_on_three_nodes(
    tmp_path: Path,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", COORDINATOR_SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # Three JVMs start in 11-30 s on 2 busy cores; 60 s of describing after the kill, a
        # node started again, 60 s more.
        said, _ = child.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == 0, said[-3000:]
    lines = said.splitlines()
    before = next(int(line.split()[1]) for line in lines if line.startswith("before "))
    # While there was none, the gateway said the coordinator did not answer, not the cluster.
    waits = [line for line in lines if line.startswith("unavailable:")]
    assert waits and all("no coordinator of group 'g' answered" in line for line in waits), waits
    after = {int(line.split()[1]) for line in lines if line.startswith("after ")}
    assert after and before not in after, (before, after)
    # Given back to its first node, the group is found there within the 60 s of looking.
    back = [int(line.split()[1]) for line in lines if line.startswith("back ")]
    assert back and back[-1] == before, lines[-12:]
