"""The example Kafka Streams application (`examples/streams-app/`): built, and run as pods.

The example is a stateful topology (a per-key count in a RocksDB store with a changelog topic),
so its instances restore state and can hold standby tasks. It is built with Maven from the
checkout's `examples/streams-app/` (pom.xml and src/) once per source change into
`$XDG_CACHE_HOME/rebalancer/streams-app/<key>/` (`~/.cache` by default): the jar and its
dependencies in `lib/`, run as `java -jar`. Maven's own repository (~/.m2) keeps the downloads,
so a rebuild after a source change costs a compile. `python -m rebalancer_lab.streams_example`
(`make streams-app`) builds it and prints the jar's path.

`streams_statefulset` is the StatefulSet the lab's kubelet runs it in (the container's command is
`java -jar`, run on this machine), and `pod_events` reads the JSON lines its pods printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rebalancer_lab.kafka_jars import KafkaSetupError, _locked, _maven_said, java_binary

Progress = Callable[[str], None]
SOURCE_ENV = "REBALANCER_STREAMS_APP_SRC"
JAR_NAME = "rebalancer-streams-example.jar"
STATE_MOUNT = "/var/lib/kafka-streams"
READY_FILE = f"{STATE_MOUNT}/ready"
STALE_AFTER_S = 7 * 24 * 3600.0
# The lab's JVMs share two cores with everything else: the client compiler only and the serial
# collector halve the start-up's CPU (measured: 4.3 s to a constructed KafkaStreams, 2.3 s with
# these, on a machine at load 20), which a static member's restart budget is spent on.
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rebalancer" / "streams-app"


def source_dir() -> Path:
    """`examples/streams-app/` of this package's checkout, or $REBALANCER_STREAMS_APP_SRC."""
    configured = os.environ.get(SOURCE_ENV)
    if configured:
        folder = Path(configured)
        if not (folder / "pom.xml").is_file():
            raise KafkaSetupError(f"${SOURCE_ENV}={configured} has no pom.xml")
        return folder
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "examples" / "streams-app"
        if (candidate / "pom.xml").is_file():
            return candidate
    raise KafkaSetupError(
        f"examples/streams-app/pom.xml was not found above {Path(__file__).parent} (an installed "
        f"package has no example sources); set ${SOURCE_ENV} to a checkout's examples/streams-app"
    )


def _sources(source: Path) -> list[Path]:
    return [source / "pom.xml", *sorted(p for p in (source / "src").rglob("*") if p.is_file())]


def build_key(source: Path) -> str:
    """Hash of the example's pom and sources: a change to any of them means a new build."""
    digest = hashlib.sha256()
    for path in _sources(source):
        digest.update(str(path.relative_to(source)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def example_jar(progress: Progress | None = None) -> Path:
    """The example's jar, built first when its sources changed since the last build."""
    source = source_dir()
    folder = cache_root() / build_key(source)
    jar = folder / JAR_NAME
    if jar.is_file():
        return jar
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.parent / f"{folder.name}.lock"):
        if not jar.is_file():
            _build(source, folder, progress or (lambda _: None))
            prune_builds(folder)
    return jar


def prune_builds(kept: Path, older_than_s: float = STALE_AFTER_S) -> None:
    """Builds of other sources (about 95 MB each) not built or used for `older_than_s`: another
    checkout that still needs one builds it again."""
    now = time.time()
    for other in kept.parent.iterdir():
        if other == kept or not other.is_dir() or other.name.startswith("build-"):
            continue
        jar = other / JAR_NAME
        last = max(other.stat().st_mtime, jar.stat().st_atime if jar.exists() else 0.0)
        if now - last > older_than_s:
            shutil.rmtree(other, ignore_errors=True)


def _build(source: Path, folder: Path, progress: Progress) -> None:
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaSetupError(
            "mvn is not installed: the example Kafka Streams application is built with Maven "
            "(apt-get install -y maven)"
        )
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=folder.parent))
    try:
        shutil.copy2(source / "pom.xml", staging / "pom.xml")
        shutil.copytree(source / "src", staging / "src")
        progress(f"building the example Kafka Streams application from {source} with Maven")
        command = [
            maven,
            "--batch-mode",
            "--no-transfer-progress",
            "-Dstyle.color=never",
            "-DskipTests",
            "package",
        ]
        result = subprocess.run(command, cwd=staging, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise KafkaSetupError(
                f"building {source} with Maven failed (exit {result.returncode}); mvn said:\n"
                f"{_maven_said(result.stdout + result.stderr)}"
            )
        built = staging / "built"
        built.mkdir()
        (staging / "target" / JAR_NAME).rename(built / JAR_NAME)
        (staging / "target" / "lib").rename(built / "lib")
        shutil.rmtree(folder, ignore_errors=True)
        built.rename(folder)
        progress(f"built {folder / JAR_NAME}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def streams_statefulset(
    name: str,
    bootstrap: str,
    input_topic: str,
    replicas: int,
    *,
    group_protocol: str = "classic",
    static: bool = True,
    standby_replicas: int = 0,
    session_timeout_ms: int = 45000,
    commit_interval_ms: int | None = None,
    version: str = "1",
    jar: Path | None = None,
    state_root: Path | None = None,
) -> dict[str, Any]:
    """A StatefulSet `name` of the example (application.id `name`), each pod's state in an
    emptyDir (a replaced pod restores its tasks from their changelogs), Ready while its
    KafkaStreams is RUNNING. With `static`, group.instance.id is the pod's name. APP_VERSION
    changes the template (a rolling update). With `state_root`, each pod's state is in
    `<state_root>/<pod name>` instead, kept across the pod's replacements as a volume claim per
    pod would keep it (the lab's control plane provisions no volumes)."""
    env: list[dict[str, Any]] = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "BOOTSTRAP_SERVERS", "value": bootstrap},
        {"name": "APPLICATION_ID", "value": name},
        {"name": "INPUT_TOPIC", "value": input_topic},
        {"name": "GROUP_PROTOCOL", "value": group_protocol},
        {"name": "NUM_STANDBY_REPLICAS", "value": str(standby_replicas)},
        {"name": "SESSION_TIMEOUT_MS", "value": str(session_timeout_ms)},
        {"name": "STATE_DIR", "value": f"{state_root}/$(POD_NAME)" if state_root else STATE_MOUNT},
        {"name": "READY_FILE", "value": READY_FILE},
        {"name": "APP_VERSION", "value": version},
        # What an injected sidecar would read for where Kafka is.
        {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap},
    ]
    if commit_interval_ms is not None:
        env.append({"name": "COMMIT_INTERVAL_MS", "value": str(commit_interval_ms)})
    if static:
        env.append({"name": "GROUP_INSTANCE_ID", "value": "$(POD_NAME)"})
    container = {
        "name": "streams",
        # The lab's kubelet runs the command on this machine and pulls no image; the example has
        # no image of its own yet, so this names the JRE it needs.
        "image": "eclipse-temurin:17-jre",
        "command": [java_binary(), *JVM_OPTIONS, "-jar", str(jar or example_jar())],
        "env": env,
        "volumeMounts": [{"name": "state", "mountPath": STATE_MOUNT}],
        "readinessProbe": {
            "exec": {"command": ["test", "-f", READY_FILE]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
    }
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 40,
                    "containers": [container],
                    "volumes": [{"name": "state", "emptyDir": {}}],
                },
            },
        },
    }


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON events one log of the example holds, in order (other lines skipped)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        start = line.find('{"event"')
        if start < 0:
            continue
        try:
            event = json.loads(line[start:])
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def pod_events(pod_folder: Path, container: str = "streams") -> list[dict[str, Any]]:
    """Every event a pod's container printed, over its restarts (the lab kubelet's log files
    `<pod folder>/<container>/<n>.log`)."""
    events: list[dict[str, Any]] = []
    logs = (pod_folder / container).glob("*.log")
    for path in sorted(logs, key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        events.extend(read_events(path))
    return events


GENERATION = re.compile(r"Successfully joined group with generation Generation\{generationId=(\d+)")


def joined_generations(pod_folder: Path, container: str = "streams") -> list[int]:
    """The generations a pod's consumer joined, in order, as its coordinator logged them."""
    found: list[int] = []
    logs = (pod_folder / container).glob("*.log")
    for path in sorted(logs, key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        found.extend(int(m.group(1)) for m in GENERATION.finditer(path.read_text(errors="replace")))
    return found


def main() -> int:
    try:
        print(example_jar(progress=print))
    except KafkaSetupError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
