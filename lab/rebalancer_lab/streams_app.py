"""A real Kafka Streams application for the lab and the tests, at the broker's Kafka version.

`data/streams/UppercaseApp.java` is run by the JDK's source launcher (no Maven build) on the
broker's class path (kafka-clients, slf4j, log4j) plus the kafka-streams jar, fetched once with
Maven into the broker's cache without its dependencies: the topology is stateless, so RocksDB
(the one dependency the broker's class path lacks, 60 MB) is never loaded. With
`group_protocol="streams"` its group is a KIP-1071 streams group; with "classic" it is a classic
group of protocol type consumer whose members use StreamsPartitionAssignor.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from rebalancer_lab.kafka_jars import (
    KAFKA_VERSION,
    KafkaSetupError,
    _locked,
    _maven_said,
    cache_root,
    class_path,
    java_binary,
)

SOURCE = Path(__file__).resolve().parent / "data" / "streams" / "UppercaseApp.java"
RUNNING = "-> RUNNING"


def streams_jar(version: str = KAFKA_VERSION) -> Path:
    """kafka-streams-<version>.jar, fetched once (about 2.4 MB) into the broker's cache."""
    folder = cache_root() / f"{version}-streams"
    jar = folder / f"kafka-streams-{version}.jar"
    if jar.exists():
        return jar
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.parent / f"{version}-streams.lock"):
        if not jar.exists():
            _fetch_streams_jar(version, folder)
    return jar


def _fetch_streams_jar(version: str, folder: Path) -> None:
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaSetupError("mvn is not installed: the lab fetches kafka-streams with it")
    staging = Path(tempfile.mkdtemp(prefix="kafka-streams-", dir=folder.parent))
    command = [
        maven,
        "--batch-mode",
        "--no-transfer-progress",
        "-Dstyle.color=never",
        "dependency:copy",
        f"-Dartifact=org.apache.kafka:kafka-streams:{version}",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaSetupError(
            f"fetching kafka-streams {version} with Maven failed (exit {result.returncode}); "
            f"mvn said:\n{_maven_said(result.stdout + result.stderr)}"
        )
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


class StreamsApp:
    """One instance of the application: a JVM with one stream thread, logging to `log_path`."""

    def __init__(
        self,
        bootstrap: str,
        application_id: str,
        input_topic: str,
        output_topic: str,
        folder: Path,
        group_protocol: str = "streams",
    ) -> None:
        self.application_id = application_id
        self.folder = folder
        self.log_path = folder / "app.log"
        self._arguments = [
            bootstrap,
            application_id,
            input_topic,
            output_topic,
            str(folder / "state"),
            group_protocol,
        ]
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> Self:
        self.folder.mkdir(parents=True, exist_ok=True)
        classpath = os.pathsep.join([class_path(), str(streams_jar())])
        self._log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            [java_binary(), "-Xmx256m", "-cp", classpath, str(SOURCE), *self._arguments],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def states(self) -> list[str]:
        """The state changes it printed so far ("CREATED -> REBALANCING", ...)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [line[len("STATE ") :] for line in text.splitlines() if line.startswith("STATE ")]

    def wait_running(self, timeout: float = 90.0) -> None:
        """Until it first reports RUNNING; RuntimeError quoting its log when it did not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(state.endswith(RUNNING) for state in self.states()):
                return
            if self._process is not None and self._process.poll() is not None:
                break
            time.sleep(0.2)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{self.application_id} did not reach RUNNING; its log ends:\n{tail}")

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM (it closes and leaves its group), then SIGKILL after `grace` seconds."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
