"""Write the values table of charts/rebalancer/README.md from the comments of values.yaml.

values.yaml is the one place a value is described: a `# --` comment documents the key below it
(and everything nested under it); a plain comment above a mapping titles its section. Run
`.venv/bin/python deploy/chart_readme.py` after changing values.yaml, or `--check` to fail when
the README is out of date (tests/deploy/chart does the same).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "rebalancer"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"
START = "<!-- values:start (deploy/chart_readme.py writes this table from values.yaml) -->"
END = "<!-- values:end -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")


@dataclass(frozen=True)
class Row:
    path: str
    default: Any
    description: str


@dataclass(frozen=True)
class Section:
    path: str
    title: str


def _lookup(values: Any, path: str) -> Any:
    node = values
    for part in path.split("."):
        node = node[part]
    return node


def parse(text: str) -> tuple[list[Row], dict[str, Section]]:
    """Every key documented with `# --`, in file order, and the sections' titles by path."""
    values = yaml.safe_load(text)
    rows: list[Row] = []
    sections: dict[str, Section] = {}
    stack: list[tuple[int, str]] = []
    documented: list[str] | None = None
    plain: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            documented, plain = None, []
            continue
        if stripped.startswith("# --"):
            documented, plain = [stripped[4:].strip()], []
            continue
        if stripped.startswith("#"):
            body = stripped[1:].strip()
            if documented is not None:
                documented.append(body)
            else:
                plain.append(body)
            continue
        match = _KEY.match(line)
        if match is None:  # a list item or a continued value, not a key
            continue
        indent = len(match.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group("key")))
        path = ".".join(key for _, key in stack)
        if documented is not None:
            rows.append(Row(path, _lookup(values, path), " ".join(documented)))
        elif plain:
            sections[path] = Section(path, " ".join(plain))
        documented, plain = None, []
    return rows, sections


def leaves(values: Any, prefix: str = "") -> Iterator[str]:
    """Every value's key path; a mapping's keys are walked, anything else is one value."""
    if isinstance(values, dict) and values:
        for key, child in values.items():
            yield from leaves(child, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix


def undocumented(text: str) -> list[str]:
    """Value paths that no `# --` comment covers, on the key itself or on a mapping above it."""
    rows, _ = parse(text)
    covered = {row.path for row in rows}
    missing = []
    for path in leaves(yaml.safe_load(text)):
        parts = path.split(".")
        if not any(".".join(parts[:n]) in covered for n in range(1, len(parts) + 1)):
            missing.append(path)
    return missing


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _prose(text: str) -> str:
    # <fullname> and the like would be read as HTML tags by Markdown renderers.
    return _cell(text).replace("<", "&lt;").replace(">", "&gt;")


def table(text: str) -> str:
    """One row per documented key in file order, each section's title on a row above its keys."""
    rows, sections = parse(text)
    lines = [START, "", "| Key | Default | Description |", "|---|---|---|"]
    titled: set[str] = set()
    for row in rows:
        parts = row.path.split(".")
        for n in range(1, len(parts)):
            prefix = ".".join(parts[:n])
            if prefix in sections and prefix not in titled:
                titled.add(prefix)
                lines.append(f"| `{prefix}` | | {_prose(sections[prefix].title)} |")
        default = json.dumps(row.default)
        lines.append(f"| `{row.path}` | `{_cell(default)}` | {_prose(row.description)} |")
    lines += ["", END]
    return "\n".join(lines)


def render(readme: str, values_text: str) -> str:
    """`readme` with the text between the markers replaced by a fresh table."""
    before, start, rest = readme.partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise ValueError(f"{README} lacks the markers {START!r} and {END!r}")
    return before + table(values_text) + after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the README is stale")
    args = parser.parse_args(argv)
    values_text = VALUES.read_text(encoding="utf-8")
    missing = undocumented(values_text)
    if missing:
        print(f"values without a '# --' comment: {', '.join(missing)}", file=sys.stderr)
        return 1
    current = README.read_text(encoding="utf-8")
    fresh = render(current, values_text)
    if args.check:
        if fresh != current:
            print(f"{README} is out of date: run deploy/chart_readme.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
