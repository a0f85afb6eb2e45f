"""No message lost: numbered messages through an enforced rebalance and a hard-killed consumer.

The consumers are at-least-once (they commit after processing and record every message they
processed); every produced number must be recorded at least once. Duplicates are allowed by
at-least-once and reported, not failed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.operator.e2e.support import (
    apply,
    condition,
    consumer_group,
    eventually,
    free_port,
    get_cg,
    kubectl,
    statefulset,
)

from rebalancer_lab.ledgers import numbered_producer, recorded
from rebalancer_lab.processes import ChildProcess
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = pytest.mark.e2e
TOKEN = "ledger-sidecar-token"
COUNT = 1500
RATE = 100.0


def test_every_produced_message_is_processed(lab: Lab, tmp_path: Path) -> None:
    name = "ledger"
    asyncio.run(ensure_topic(lab.bootstrap, name, 6))
    records = [tmp_path / f"consumer-{index}.tsv" for index in range(3)]

    def consumer(index: int) -> ChildProcess:
        env = {"RECORD_FILE": str(records[index])}
        return lab.start_consumer(index, group_id=name, prefix=f"{name}-consumer", env=env)

    consumers = [consumer(0), consumer(1)]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    port = free_port()
    lab.start_sidecar(f"{name}-consumer-0", name, token_file, port)
    body = consumer_group(name, lab.bootstrap)
    body["spec"]["policy"]["enforce"] = {
        "requestToken": "first",
        "sidecar": {"url": f"http://127.0.0.1:{port}", "tokenSecretRef": {"name": "ledger-t"}},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ledger-t", "namespace": "default"},
        "stringData": {"token": TOKEN},
    }
    apply(lab, secret, statefulset(f"{name}-consumer"), body)

    def settled() -> dict[str, Any] | None:
        found = get_cg(lab, name)
        ready = condition(found, "Ready").get("status") == "True"
        return found if ready and found["status"]["group"].get("members") == 2 else None

    # Generous: on CI this test runs beside the Spark standalone cluster's (two JVMs more).
    generation = eventually(settled, 240, "two members, Ready")["status"]["group"]["generation"]

    producer = numbered_producer(lab, "ledger-producer", name, RATE, COUNT)
    producer.start()
    time.sleep(3)
    patch = json.dumps({"spec": {"policy": {"enforce": {"requestToken": "second"}}}})
    kubectl(lab, "patch", "consumergroup", name, "--type=merge", "-p", patch)

    def enforced() -> dict[str, Any] | None:
        status = get_cg(lab, name)["status"]
        done = (status.get("enforcement") or {}).get("lastStatus") == "enforced"
        return status if done and status["group"]["generation"] > generation else None

    eventually(enforced, 60, "the enforced rebalance")
    # A node failure: no LeaveGroup, no last commit; the batch in flight is redelivered.
    victim = consumers[1]
    assert victim.process is not None
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait(timeout=10)
    victim.stop()
    lab.consumers.remove(victim)
    time.sleep(2)
    consumers[1] = consumer(2)

    assert producer.process is not None
    assert producer.process.wait(timeout=COUNT / RATE + 60) == 0, "the producer lost messages"
    produced = set(range(COUNT))

    def all_processed() -> Counter[int] | None:
        seen = recorded(records)
        return seen if produced <= set(seen) else None

    try:
        seen = eventually(all_processed, 120, "every produced message to be processed", every=1)
    except AssertionError:
        seen = recorded(records)
        missing = sorted(produced - set(seen))
        raise AssertionError(f"{len(missing)} messages lost, first {missing[:20]}") from None
    duplicates = {number: times for number, times in seen.items() if times > 1}
    summary = (
        f"produced {COUNT}, processed {len(produced & set(seen))} distinct, "
        f"{sum(seen.values()) - len(seen)} redeliveries over {len(duplicates)} messages"
    )
    print(summary)
    (lab.config.state_dir / "no-message-lost.txt").write_text(summary + "\n")
    assert set(seen) <= produced, "a consumer recorded a number nobody produced"
