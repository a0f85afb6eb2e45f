"""The optional parts of the install a subcommand needs, checked before it imports them.

The base install carries what the operator, the join gate and the sidecar import; `rebalancer
learn` needs the `learning` extra (pyproject.toml); the lab is a distribution of its own. The
requirements of each extra are read from the installed package's metadata, so pyproject.toml stays
the one list.
"""

from __future__ import annotations

import re
from importlib import metadata

DISTRIBUTION = "rebalancer"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def extra_requirements(extra: str, requires: list[str]) -> list[str]:
    """The distribution names a `Requires-Dist` list asks for under `extra`."""
    names = []
    for requirement in requires:
        requirement_part, _, marker = requirement.partition(";")
        if extra not in _EXTRA_MARKER.findall(marker):
            continue
        match = _NAME.match(requirement_part.strip())
        if match is not None:
            names.append(match.group(0))
    return names


def missing_for(extra: str) -> list[str]:
    """The requirements of `extra` that are not installed; none when run from a source tree."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        # Not installed (a source checkout on PYTHONPATH): the imports themselves will tell.
        return []
    missing = []
    for name in extra_requirements(extra, requires):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def missing_extra_message(command: str, extra: str) -> str | None:
    """The error for `rebalancer COMMAND` when its extra is not installed, or None when it is."""
    missing = missing_for(extra)
    if not missing:
        return None
    return (
        f"rebalancer {command}: needs {', '.join(missing)}, which the base install leaves out; "
        f"install the extra with: pip install 'rebalancer[{extra}]'"
    )
