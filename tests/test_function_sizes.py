"""A ceiling on long functions in the operator: a function over LONGEST_LINES lines mixes steps a
reader has to hold at once, so their number may only go down. Lower CEILING when a split brings
the count under it; never raise it."""

from __future__ import annotations

import ast
from pathlib import Path

OPERATOR = Path(__file__).resolve().parents[1] / "operator" / "rebalancer"
LONGEST_LINES = 60
CEILING = 0


def long_functions(root: Path = OPERATOR, limit: int = LONGEST_LINES) -> list[str]:
    """Each function (nested ones too) whose def-to-last-line span is over `limit`, longest
    first, as `lines path:line name`."""
    found: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    where = f"{path.relative_to(root.parents[1])}:{node.lineno}"
                    found.append((lines, f"{lines} {where} {node.name}"))
    return [row for _, row in sorted(found, reverse=True)]


def test_long_functions_stay_under_the_ceiling() -> None:
    found = long_functions()
    assert len(found) <= CEILING, (
        f"{len(found)} functions over {LONGEST_LINES} lines (ceiling {CEILING}); split the new "
        "ones:\n" + "\n".join(found)
    )


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    package = tmp_path / "operator" / "rebalancer"
    package.mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (package / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions(package) == ["62 operator/rebalancer/long.py:1 long"]


if __name__ == "__main__":
    print("\n".join(long_functions()))
