"""The controllers' work queue: deduplicated, never concurrent per key, delayable."""

from __future__ import annotations

import threading
import time

from rebalancer.lab.kube.queueing import WorkQueue


def test_a_key_added_twice_is_handed_out_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert [queue.get(), queue.get()] == ["a", "b"]
    assert len(queue) == 0


def test_a_key_added_while_processing_comes_back_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")  # a change arrived during the reconcile
    assert len(queue) == 0, "never handed to a second worker while in progress"
    queue.done("a")
    assert queue.get() == "a"


def test_delayed_keys_come_in_time_order_and_the_earliest_request_wins() -> None:
    queue: WorkQueue[str] = WorkQueue()
    start = time.monotonic()
    queue.add_after("late", 0.2)
    queue.add_after("soon", 0.05)
    queue.add_after("soon", 5.0)  # later than already asked: ignored
    assert queue.get() == "soon"
    queue.done("soon")
    assert queue.get() == "late"
    assert 0.15 <= time.monotonic() - start < 1.0
    queue.done("late")
    assert len(queue) == 0


def test_shutdown_wakes_a_waiting_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    time.sleep(0.05)
    queue.shutdown()
    worker.join(2)
    assert got == [None]
