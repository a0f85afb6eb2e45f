"""A fleet of kafkajs consumers (tests/clients/kafka/kafkajs): an application that is not
librdkafka.

kafkajs is installed from the project's package.json and package-lock.json with `npm ci`, once
per lock-file change, into tests/clients/kafka/kafkajs/node_modules (npm's cache under
~/.cache/rebalancer/npm), so a fresh machine's CI installs it from the project's files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

KAFKAJS_DIR = Path(__file__).resolve().parent / "kafkajs"
NPM_CACHE = Path.home() / ".cache" / "rebalancer" / "npm"


def ensure_kafkajs() -> Path:
    """Install the locked kafkajs when the lock file changed; returns the consumer script."""
    lock = KAFKAJS_DIR / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    stamp = KAFKAJS_DIR / "node_modules" / ".rebalancer-lock"
    if not (stamp.exists() and stamp.read_text() == digest):
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            raise RuntimeError("node and npm are needed for the kafkajs fleet (Node 14 or later)")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--cache", str(NPM_CACHE)],
            cwd=KAFKAJS_DIR,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        stamp.write_text(digest)
    return KAFKAJS_DIR / "consumer.js"


class KafkajsConsumer:
    """`node consumer.js`: one kafkajs member whose stdout is a JSON line per event."""

    def __init__(
        self, name: str, bootstrap: str, group_id: str, topic: str, log_dir: Path, **env: str
    ) -> None:
        self.name = name
        self.log = log_dir / f"{name}.jsonl"
        script = ensure_kafkajs()
        environment = {
            **os.environ,
            "SESSION_TIMEOUT_MS": "10000",
            "HEARTBEAT_INTERVAL_MS": "1000",
            **env,
        }
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                ["node", str(script), bootstrap, group_id, topic, name],
                cwd=KAFKAJS_DIR,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        events = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (kind is None or event.get("event") == kind):
                events.append(event)
        return events

    def assignments(self) -> list[dict[str, Any]]:
        """Every assignment: generation, partitions (topic, partition) and when."""
        return [
            {
                "generation": event["generation"],
                "at": event["at"],
                "partitions": {
                    (topic, partition)
                    for topic, partitions in (event.get("assignment") or {}).items()
                    for partition in partitions
                },
            }
            for event in self.events("assigned")
        ]

    def keys(self) -> set[str]:
        return {str(event["key"]) for event in self.events("message")}

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
