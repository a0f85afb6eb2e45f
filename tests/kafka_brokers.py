"""One Apache Kafka broker for the whole test session, started the first time a test asks for it.

Tests share it with a fresh group id and topic each. A test that stops, kills or restarts its
broker starts one of its own instead (`KafkaBroker` directly), so that the others never see it go.
The broker stops when the session's process exits (rebalancer_lab.broker stops every broker it
started at exit).
"""

from __future__ import annotations

import tempfile
import threading

from rebalancer_lab.broker import KafkaBroker

_lock = threading.Lock()
_broker: KafkaBroker | None = None


def shared_broker() -> KafkaBroker:
    global _broker
    with _lock:
        if _broker is None or not _broker.running:
            broker = KafkaBroker(log_dir=tempfile.mkdtemp(prefix="rebalancer-test-kafka-"))
            broker.start()
            _broker = broker
        return _broker
