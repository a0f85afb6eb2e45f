"""Package the Helm chart and write a chart repository index beside it.

`make chart-package` runs this into dist/charts: `helm lint --strict`, `helm package` (the chart's
README, values, schema, CRDs and templates in rebalancer-<version>.tgz) and `helm repo index`
(index.yaml over every package in the directory, so older versions stay listed). Serve the
directory as a chart repository, or pass --url with the address it will be served from.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from render import CHART, ROOT, find_helm


def _helm(helm: str, env: dict[str, str], *args: str) -> None:
    done = subprocess.run([helm, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"helm {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def package(destination: Path, url: str | None = None) -> Path:
    """The packaged chart's path; index.yaml is written next to it."""
    helm = find_helm()
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        # A throwaway Helm home: no user configuration or repository leaks into the package.
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        _helm(helm, env, "lint", "--strict", str(CHART))
        before = set(destination.glob("*.tgz"))
        _helm(helm, env, "package", str(CHART), "--destination", str(destination))
        index = ["repo", "index", str(destination)]
        _helm(helm, env, *index, *(["--url", url] if url else []))
    made = set(destination.glob("*.tgz")) - before
    # Packaging the same version again replaces its file: then it is the newest one there.
    [found] = made or [max(destination.glob("*.tgz"), key=lambda path: path.stat().st_mtime)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("destination", nargs="?", type=Path, default=ROOT / "dist" / "charts")
    parser.add_argument("--url", help="address the repository is served from (index.yaml urls)")
    args = parser.parse_args(argv)
    made = package(args.destination.resolve(), args.url)
    print(f"{made}\n{made.parent / 'index.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
