"""`rebalancer learn`'s early checks of --master, --history and --output (no Spark started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rebalancer.learning.locations import (
    location_problem,
    master_problem,
    read_by_spark,
    scheme_of,
)

REBALANCER = Path(sys.executable).parent / "rebalancer"


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[2]",
        "local[*]",
        "local[*,3]",
        "local-cluster[2,1,1024]",
        "spark://127.0.0.1:7077",
        "spark://a:7077,b:7077",
        "k8s://https://api.example:443",
        "yarn",
    ],
)
def test_spark_masters_are_accepted(master: str) -> None:
    assert master_problem(master) is None


@pytest.mark.parametrize(
    ("master", "hint"),
    [
        ("spark://spark-master", "needs its port"),
        ("local[0]", "local[4]"),
        ("mesos://x:5050", "spark://HOST:PORT"),
        ("", "local[N]"),
    ],
)
def test_bad_masters_name_the_flag_and_the_forms(master: str, hint: str) -> None:
    problem = master_problem(master)
    assert problem is not None
    assert problem.startswith(f"--master {master!r}")
    assert hint in problem


def test_object_store_histories_go_to_spark_and_local_ones_do_not() -> None:
    assert read_by_spark("s3a://bucket/history")
    assert read_by_spark("hdfs://namenode:8020/history")
    assert read_by_spark("gs://bucket/history")
    assert not read_by_spark("/var/lib/rebalancer/history")
    assert not read_by_spark("file:///var/lib/rebalancer/history")
    assert not read_by_spark("memory://history")
    assert scheme_of("/plain/path") == "file"
    assert scheme_of("S3A://bucket/x") == "s3a"


def test_locations_python_cannot_open_say_what_to_install() -> None:
    # Spark reads s3a:// itself, so the history is fine without s3fs; the output is written by
    # Python, which needs s3fs for it.
    assert location_problem("--history", "s3a://bucket/history", spark_reads=True) is None
    output = location_problem("--output", "s3a://bucket/out", spark_reads=False)
    assert output is not None and output.startswith("--output 's3a://bucket/out'")
    assert "s3fs" in output
    unknown = location_problem("--history", "nosuch://x/y", spark_reads=True)
    assert unknown is not None and "s3a://" in unknown
    assert location_problem("--history", " ", spark_reads=True) is not None
    assert location_problem("--output", "/tmp/recommendations", spark_reads=False) is None


def test_the_command_refuses_bad_input_before_starting_spark(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(REBALANCER), "learn", "--history", str(tmp_path), "--output", str(tmp_path / "o"),
         "--master", "spark://spark-master"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--master 'spark://spark-master'" in result.stderr
    assert "spark://HOST:7077" in result.stderr
    assert "Spark" not in result.stdout
