"""The lab's version is the operator's, written once in operator/rebalancer/__init__.py."""

import re
from pathlib import Path

from setuptools import setup

_INIT = Path(__file__).resolve().parent.parent / "operator" / "rebalancer" / "__init__.py"
_VERSION = re.search(r'^__version__ = "([^"]+)"', _INIT.read_text("utf-8"), re.MULTILINE)
if _VERSION is None:
    raise SystemExit(f"no __version__ in {_INIT}")
version = _VERSION.group(1)

setup(
    version=version,
    install_requires=[
        # The operator it starts, at the same version.
        f"rebalancer=={version}",
        # The example consumer application its fleet runs (examples/consumer).
        f"rebalancer-example-consumer=={version}",
        # Manifests and the live terminal view.
        "pyyaml>=6.0",
        "rich>=13",
    ],
)
