"""The example Kafka Streams application's build key and its refusal of bad settings (the jar is
the one `make streams-app` builds; its behaviour on Kafka is in
tests/operator/e2e/test_streams_rollouts.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from rebalancer_lab.kafka_jars import KafkaSetupError, java_binary
from rebalancer_lab.streams_example import (
    SOURCE_ENV,
    build_key,
    example_jar,
    prune_builds,
    read_events,
    source_dir,
)


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [java_binary(), "-jar", str(example_jar())],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_missing_or_malformed_setting_stops_it_naming_the_variable() -> None:
    base = {"BOOTSTRAP_SERVERS": "127.0.0.1:1", "APPLICATION_ID": "a", "INPUT_TOPIC": "t"}
    missing = run({k: v for k, v in base.items() if k != "INPUT_TOPIC"})
    assert missing.returncode == 2, missing
    assert "INPUT_TOPIC is not set; fix:" in missing.stderr
    protocol = run({**base, "GROUP_PROTOCOL": "consumer"})
    assert protocol.returncode == 2
    assert "GROUP_PROTOCOL=consumer is not a group protocol of Kafka Streams" in protocol.stderr
    assert "set classic or streams" in protocol.stderr
    standbys = run({**base, "NUM_STANDBY_REPLICAS": "-1"})
    assert standbys.returncode == 2
    assert "NUM_STANDBY_REPLICAS=-1 is not a whole number of at least 0" in standbys.stderr


def test_the_build_is_keyed_by_the_pom_and_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "streams-app"
    shutil.copytree(source_dir(), copy, ignore=shutil.ignore_patterns("target"))
    monkeypatch.setenv(SOURCE_ENV, str(copy))
    assert source_dir() == copy
    first = build_key(copy)
    assert build_key(copy) == first
    java = next((copy / "src").rglob("*.java"))
    java.write_text(java.read_text() + "\n// changed\n")
    assert build_key(copy) != first
    monkeypatch.setenv(SOURCE_ENV, str(tmp_path))
    with pytest.raises(KafkaSetupError, match=r"has no pom\.xml"):
        source_dir()


def test_its_events_are_read_from_the_lines_that_hold_them(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text(
        '{"event":"state","at":1.5,"from":"CREATED","to":"REBALANCING"}\n'
        "12:00:00.000 [main] WARN org.apache.kafka.streams.StreamsConfig - something\n"
        '{"event":"restored","store":"counts","partition":3,"records":7,"seconds":0.1}\n'
        '{"event": broken\n'
    )
    events = list(read_events(log))
    assert [e["event"] for e in events] == ["state", "restored"]
    assert events[1]["records"] == 7


def test_a_new_build_removes_builds_unused_for_a_week(tmp_path: Path) -> None:
    kept, stale, recent = (tmp_path / name for name in ("kept", "stale", "recent"))
    for folder in (kept, stale, recent):
        (folder / "lib").mkdir(parents=True)
        (folder / "rebalancer-streams-example.jar").write_bytes(b"jar")
    weeks_ago = time.time() - 8 * 24 * 3600
    for path in (stale, stale / "rebalancer-streams-example.jar"):
        os.utime(path, (weeks_ago, weeks_ago))
    os.utime(kept, (weeks_ago, weeks_ago))
    prune_builds(kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "recent"]
