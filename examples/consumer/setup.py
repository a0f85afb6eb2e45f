"""The example consumer's version is the operator's (operator/rebalancer/__init__.py)."""

import re
from pathlib import Path

from setuptools import setup

_INIT = Path(__file__).resolve().parents[2] / "operator" / "rebalancer" / "__init__.py"
_VERSION = re.search(r'^__version__ = "([^"]+)"', _INIT.read_text("utf-8"), re.MULTILINE)
if _VERSION is None:
    raise SystemExit(f"no __version__ in {_INIT}")
version = _VERSION.group(1)

setup(
    version=version,
    install_requires=[
        # The member reporter and the KAFKA_* settings readers, at the operator's version.
        f"rebalancer=={version}",
        "confluent-kafka",
    ],
)
