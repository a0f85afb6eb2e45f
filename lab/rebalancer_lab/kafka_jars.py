"""Apache Kafka's jars for the lab: fetched once with Maven into a cache, reused after that.

Kafka publishes its broker as Maven artifacts; `data/kafka/pom.xml` lists the broker, the tools
and a log4j2 binding, and `mvn dependency:copy-dependencies` copies them with every dependency
into one folder, which is the broker's class path. The folder is
`$XDG_CACHE_HOME/rebalancer/kafka/<version>/` (`~/.cache` by default); Maven's own `~/.m2` keeps the
downloads as well, so even a wiped cache refills without the network.

The fetch runs once per machine and version (about 5-7 s and 70 MB from Maven Central; a cache hit
is a file check), under a file lock so that test processes started together fetch once, into a
staging folder renamed into place with its marker last, so that an interrupted fetch is redone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

KAFKA_VERSION = "4.4.0"
# Written last: a folder without it is a fetch that did not finish, and is fetched again.
_COMPLETE = ".complete"
_PROGRESS_EVERY_S = 5.0
# Maven's advice after any failure, the same every time: left out of the error message.
_MAVEN_BOILERPLATE = re.compile(
    r"full stack trace|-X switch|re-run Maven|For more information about the errors|\[Help \d+\]|"
    r"^\[ERROR\]\s*$|^\[INFO\] -+$|Total time:|Finished at:"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

Progress = Callable[[str], None]


class KafkaSetupError(RuntimeError):
    """Java or Maven is missing, or the fetch failed; the message says what to do."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rebalancer" / "kafka"


def data_file(name: str) -> Path:
    """A file of `lab/rebalancer_lab/data/kafka/` (the pom, the broker's logging config)."""
    return Path(str(resources.files("rebalancer_lab").joinpath("data", "kafka", name)))


def java_binary() -> str:
    found = shutil.which("java")
    if found is None:
        raise KafkaSetupError(
            "java is not installed: the lab's Kafka broker needs Java 17 or newer "
            "(apt-get install -y openjdk-17-jre-headless)"
        )
    return found


def ensure_kafka_jars(
    version: str = KAFKA_VERSION, cache_dir: Path | None = None, progress: Progress | None = print
) -> list[Path]:
    """The class path of Apache Kafka `version`, fetched first if this machine has none yet.

    `progress` gets a line when a fetch starts, every few seconds while it runs (elapsed time and
    megabytes downloaded) and when it ends; None keeps it quiet. A cache hit says nothing."""
    folder = (cache_dir or cache_root()) / version
    if not (folder / _COMPLETE).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with _locked(folder.parent / f"{version}.lock"):
            # Another process may have fetched it while this one waited for the lock.
            if not (folder / _COMPLETE).exists():
                _fetch(version, folder, progress or _quiet)
    return sorted(folder.glob("*.jar"))


def class_path(version: str = KAFKA_VERSION, progress: Progress | None = None) -> str:
    return os.pathsep.join(str(jar) for jar in ensure_kafka_jars(version, progress=progress))


def _quiet(_: str) -> None:
    pass


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch(version: str, folder: Path, progress: Progress) -> None:
    maven = shutil.which("mvn")
    if maven is None:
        raise KafkaSetupError(
            "mvn is not installed: the lab fetches Apache Kafka from Maven Central with it "
            "(apt-get install -y maven openjdk-17-jre-headless)"
        )
    java_binary()
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [
        maven,
        "--batch-mode",
        "--no-transfer-progress",
        # A download that failed before is cached as failed in ~/.m2; retry it now.
        "--update-snapshots",
        "-Dstyle.color=never",
        "-f",
        str(data_file("pom.xml")),
        f"-Dkafka.version={version}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    progress(f"fetching Apache Kafka {version} from Maven Central into {folder} (once)")
    started = time.monotonic()
    done = threading.Event()
    repository = _maven_repository()
    reporter = threading.Thread(
        target=_report,
        args=(repository, _megabytes(repository), started, done, progress),
        daemon=True,
    )
    reporter.start()
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        done.set()
        reporter.join()
    if result.returncode != 0:
        tail = _maven_said(result.stdout + result.stderr)
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaSetupError(
            f"fetching Apache Kafka {version} with Maven failed (exit {result.returncode}); "
            f"is Maven Central reachable? mvn said:\n{tail}"
        )
    (staging / _COMPLETE).write_text(version)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    progress(
        f"Apache Kafka {version}: {len(list(folder.glob('*.jar')))} jars, "
        f"{_megabytes(folder):.0f} MB in {time.monotonic() - started:.0f} s"
    )


def _report(
    repository: Path, before: float, started: float, done: threading.Event, progress: Progress
) -> None:
    while not done.wait(_PROGRESS_EVERY_S):
        progress(
            f"  ... {time.monotonic() - started:.0f} s, "
            f"{max(_megabytes(repository) - before, 0):.0f} MB downloaded"
        )


def _maven_repository() -> Path:
    """Where Maven downloads to: -Dmaven.repo.local in MAVEN_OPTS, or ~/.m2/repository."""
    for option in shlex.split(os.environ.get("MAVEN_OPTS", "")):
        if option.startswith("-Dmaven.repo.local="):
            return Path(option.split("=", 1)[1]).expanduser()
    return Path.home() / ".m2" / "repository"


def _maven_said(output: str, lines: int = 12) -> str:
    """Maven's last meaningful lines: its errors and the transfer failures that caused them."""
    kept = [
        line
        for line in _ANSI.sub("", output).splitlines()
        if line.strip() and not _MAVEN_BOILERPLATE.search(line)
    ]
    return "\n".join(kept[-lines:])


def _megabytes(folder: Path) -> float:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6
