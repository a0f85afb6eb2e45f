"""An admin gateway through a broker outage of the length that made librdkafka 2.16.0 abort the
whole process when the broker came back (an assertion in rd_kafka_enq_once_del_source_return):
the gateway replaces a client whose request went unanswered, so the process lives and the
gateway answers again once the broker is back.

Run in a child process: without the replacement, the abort would take pytest down with it.
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
    from rebalancer.lab.broker import KafkaBroker, free_port

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
