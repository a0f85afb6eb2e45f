"""A Prometheus server scraping the lab's operator, when the machine has one installed."""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path

from rebalancer_lab.processes import ChildProcess

SCRAPE_INTERVAL_SECONDS = 2


def find_prometheus() -> str | None:
    return shutil.which("prometheus")


def scrape_config(targets: list[str]) -> str:
    config = {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s"},
        "scrape_configs": [
            {
                "job_name": "rebalancer",
                "honor_labels": True,
                "static_configs": [{"targets": targets}],
            }
        ],
    }
    # JSON is valid YAML, and needs no YAML writer here.
    return json.dumps(config, indent=2)


def prometheus_process(
    binary: str, state_dir: Path, host: str, port: int, targets: list[str]
) -> ChildProcess:
    folder = state_dir / "prometheus"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(scrape_config(targets), encoding="utf-8")
    return ChildProcess(
        "prometheus",
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={host}:{port}",
            "--storage.tsdb.retention.time=1d",
        ],
        state_dir / "logs" / "prometheus.log",
    )


def query(url: str, promql: str, timeout: float = 5.0) -> list[dict[str, object]]:
    """Instant query; the result vector, or an empty list."""
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(address, timeout=timeout) as response:
        body = json.loads(response.read())
    result = body.get("data", {}).get("result", [])
    return list(result) if isinstance(result, list) else []


def wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"Prometheus at {url} was not ready within {timeout:.0f}s")
