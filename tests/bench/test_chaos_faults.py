"""The chaos bench's fault schedule (bench/chaos.py) without a lab: which faults `--faults`
takes, what the default mix draws, how an operator-Kafka cut is drawn, and the sidecar the
bench writes into a fleet's pods."""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

import pytest

from rebalancer.planning.sidecar_templates import SIDECAR_CONTAINER

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import chaos  # noqa: E402
from chaos import (  # noqa: E402
    CUT_S,
    FAULTS,
    SIDECAR_SECRET,
    Run,
    add_sidecar,
    cut_plan,
    draw_fault,
    parse,
)

NEW = ("operator-kafka-cut", "sidecar-kill")


def test_faults_takes_the_cut_and_the_sidecar_kill() -> None:
    args = parse(["--faults", "operator-kafka-cut, sidecar-kill"])
    assert args.faults == list(NEW)
    assert set(NEW) <= set(parse([]).faults)


def test_an_unknown_fault_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--faults", "operator-kafka-cutt"])
    assert "--faults: unknown ['operator-kafka-cutt']" in capsys.readouterr().err


def test_the_default_mix_draws_the_new_faults_and_a_seed_replays_it() -> None:
    rng, again = random.Random(5), random.Random(5)
    drawn = [draw_fault(rng, FAULTS) for _ in range(300)]
    assert drawn[:20] == [draw_fault(again, FAULTS) for _ in range(20)]
    kinds = {kind for kind, _ in drawn}
    assert set(NEW) <= kinds
    assert all(len(draws) == 4 and all(0 <= d < 1 for d in draws) for _, draws in drawn)


def test_a_cut_refuses_or_blackholes_for_the_drawn_time() -> None:
    assert cut_plan([0.0, 0.0, 0, 0]) == ("refuse", CUT_S[0])
    mode, seconds = cut_plan([0.99, 0.5, 0, 0])
    assert mode == "blackhole"
    assert seconds == pytest.approx((CUT_S[0] + CUT_S[1]) / 2)
    rng = random.Random(1)
    plans = [cut_plan([rng.random() for _ in range(4)]) for _ in range(100)]
    assert {mode for mode, _ in plans} == {"refuse", "blackhole"}
    assert all(CUT_S[0] <= seconds < CUT_S[1] for _, seconds in plans)


def test_the_sidecar_goes_straight_to_kafka_not_through_the_operator_proxies() -> None:
    consumer = {
        "name": "consumer",
        "env": [
            {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": "127.0.0.1:1"},
            {"name": "KAFKA_SESSION_TIMEOUT_MS", "value": "20000"},
            {"name": "APP_VERSION", "value": "1"},
        ],
    }
    workload = {"spec": {"template": {"spec": {"containers": [consumer]}}}}
    add_sidecar(workload, "chaos-sts", "127.0.0.1:9001,127.0.0.1:9002")
    spec = workload["spec"]["template"]["spec"]
    consumer_out, sidecar = spec["containers"]
    assert consumer_out is consumer  # the template change of a rollout stays at index 0
    assert sidecar["name"] == SIDECAR_CONTAINER
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:9001,127.0.0.1:9002"
    assert env["KAFKA_GROUP_ID"] == "chaos-sts"
    assert env["KAFKA_SESSION_TIMEOUT_MS"] == "20000"
    assert "APP_VERSION" not in env  # a rollout's revision is the consumer's
    assert spec["volumes"][0]["secret"]["secretName"] == SIDECAR_SECRET


class ExitingReplica:
    """An operator replica whose process ended with `code` until started again."""

    def __init__(self, label: str, code: int | None) -> None:
        self.label, self.code, self.starts = label, code, 0

    def exit_code(self) -> int | None:
        return self.code

    def again(self) -> ExitingReplica:
        self.code, self.starts = None, self.starts + 1
        return self


def supervised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[ExitingReplica], held: bool
) -> Run:
    """The bench's supervisor run for a moment over `replicas`, the operator guard held (a kill
    fault in progress) or not."""
    monkeypatch.setattr(chaos, "SUPERVISE_S", 0.01)
    monkeypatch.setattr(chaos, "RESTART_BACKOFF_S", 0.01)
    run = Run(parse([]), 1, tmp_path)
    run.replicas = replicas  # type: ignore[assignment]
    if held:
        run.busy["operator"].acquire()
    thread = threading.Thread(target=run.supervisor, daemon=True)
    thread.start()
    time.sleep(0.3)
    run.stop.set()
    thread.join(timeout=5)
    return run


def test_an_operator_replica_that_exits_on_its_own_is_started_again_and_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seed 1 for an hour: an injected 409 on kopf's peering keep-alive ended both replicas, and
    # the run went on 18 minutes with no operator, its rollouts left parked.
    exited, running = ExitingReplica("a", 1), ExitingReplica("b", None)
    run = supervised(tmp_path, monkeypatch, [exited, running], held=False)
    assert (exited.starts, running.starts) == (1, 0)
    exits = [event for event in run.events if event.kind == "exit"]
    assert [(e.data["replica"], e.data["code"]) for e in exits] == [("a", 1)]
    assert run.checker.figures()["operator_exits"][0]["replica"] == "a"


def test_a_replica_a_fault_is_killing_is_left_to_the_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed = ExitingReplica("a", -9)
    run = supervised(tmp_path, monkeypatch, [killed], held=True)
    assert killed.starts == 0
    assert not [event for event in run.events if event.kind == "exit"]
