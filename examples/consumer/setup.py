"""The example consumer's version is the operator's (operator/rebalancer/__init__.py)."""

import re
from pathlib import Path

from setuptools import setup

_HERE = Path(__file__).resolve().parent
_INIT = _HERE.parents[1] / "operator" / "rebalancer" / "__init__.py"


def _version() -> str:
    """From the operator's package beside it in a checkout; from PKG-INFO in an sdist, which
    carries the example alone."""
    if _INIT.is_file():
        found = re.search(r'^__version__ = "([^"]+)"', _INIT.read_text("utf-8"), re.MULTILINE)
    else:
        pkg_info = _HERE / "PKG-INFO"
        text = pkg_info.read_text("utf-8") if pkg_info.is_file() else ""
        found = re.search(r"^Version: (\S+)$", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no __version__ in {_INIT} and no PKG-INFO beside {__file__}")
    return found.group(1)


version = _version()

setup(
    version=version,
    install_requires=[
        # The member reporter and the KAFKA_* settings readers, at the operator's version.
        f"rebalancer=={version}",
        "confluent-kafka",
    ],
)
