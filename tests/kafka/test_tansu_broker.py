"""TansuBroker's life cycle: its own broker, so the session's broker is left alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from rebalancer.lab.broker import BrokerStartError, TansuBroker


def answers(bootstrap: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": "0"})
    try:
        return bool(admin.list_topics(timeout=3).brokers)
    except Exception:
        return False


def reaped(pid: int) -> bool:
    """Not running and not a zombie: /proc has no such process left."""
    return not Path(f"/proc/{pid}").exists()


def test_start_restart_stop(tmp_path: Path) -> None:
    broker = TansuBroker(log_dir=tmp_path)
    with broker:
        port = broker.port
        first_pid = broker.pid
        assert port and first_pid and answers(broker.bootstrap)
        broker.restart()
        assert broker.port == port
        assert broker.pid != first_pid
        assert reaped(first_pid)
        assert answers(broker.bootstrap)
        last_pid = broker.pid
    assert last_pid is not None and reaped(last_pid)
    assert not broker.running
    log = (tmp_path / "tansu.log").read_text()
    assert log.count("--- starting") == 2


async def test_async_use(tmp_path: Path) -> None:
    async with TansuBroker(log_dir=tmp_path) as broker:
        assert answers(broker.bootstrap)
        pid = broker.pid
    assert pid is not None and reaped(pid)


def test_a_taken_port_fails_with_the_log(tmp_path: Path, tansu: TansuBroker) -> None:
    clash = TansuBroker(port=tansu.port, log_dir=tmp_path, start_timeout=5)
    with pytest.raises(BrokerStartError, match="Tansu"):
        clash.start()
    assert not clash.running


def test_bootstrap_needs_a_port() -> None:
    with pytest.raises(RuntimeError, match="start it first"):
        _ = TansuBroker().bootstrap


@pytest.mark.skipif(not os.path.exists("/proc/self"), reason="needs /proc")
def test_kill_reaps_too(tmp_path: Path) -> None:
    broker = TansuBroker(log_dir=tmp_path).start()
    pid = broker.pid
    broker.kill()
    assert pid is not None and reaped(pid)
