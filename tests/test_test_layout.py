"""The test tree's own rule: pytest imports test modules by their base name (rootdir-relative
packages are not used), so two test files of one name in different folders stop the whole run at
collection. This finds such a pair in the unit tests' seconds rather than at the end of CI."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[0]


def test_no_two_test_modules_share_a_name() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        found[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in found.items() if len(paths) > 1}
    assert not shared, f"rename one of each: {shared}"
