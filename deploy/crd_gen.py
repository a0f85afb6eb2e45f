"""Write the CRD's generated parts from the typed spec model (`make crd`).

The model in operator/rebalancer/structs/ is the one definition of a block of the
ConsumerGroup spec; this renders each block's structural schema
(rebalancer.structs.structural_schemas) as YAML and writes it in place of that block's subtree in
crds/consumergroups.rebalancer.dev.yaml, the chart's copy of it (byte for byte:
tests/deploy/chart/test_chart.py compares them) and deploy/rebalancer.yaml (which carries the CRD
verbatim, as deploy/render.py renders it from the chart). The rest of the CRD is still written by
hand; a subtree moves here once its model exists (GENERATED).

Run `.venv/bin/python deploy/crd_gen.py` after changing a model, or `--check` to fail when a
committed file is out of date (tests/deploy/test_crd_generated.py does the same).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
# The checkout's own model, not an installed copy of the package.
sys.path.insert(0, str(ROOT / "operator"))

from pydantic import BaseModel  # noqa: E402

from rebalancer.structs.rollout_spec import RolloutSpec  # noqa: E402
from rebalancer.structs.structural_schemas import structural_schema  # noqa: E402

CRD = ROOT / "crds" / "consumergroups.rebalancer.dev.yaml"
CHART_CRD = ROOT / "charts" / "rebalancer" / "crds" / CRD.name
MANIFESTS = ROOT / "deploy" / "rebalancer.yaml"
# The subtrees of openAPIV3Schema that are generated, each from its model.
GENERATED: tuple[tuple[tuple[str, ...], type[BaseModel]], ...] = (
    (("spec", "policy", "rollout"), RolloutSpec),
)
# Long descriptions are folded (>-) at this line width, the one the hand-written CRD used.
WIDTH = 116
# CEL reads best quoted: rules are full of characters YAML would otherwise interpret.
QUOTED_KEYS = {"rule", "message"}


def render_node(key: str, node: Any, indent: int) -> list[str]:
    """`key: node` as YAML lines at `indent`, in the hand-written CRD's style."""
    pad = " " * indent
    if isinstance(node, dict) and node:
        lines = [f"{pad}{key}:"]
        for child_key, child in node.items():
            lines += render_node(child_key, child, indent + 2)
        return lines
    if isinstance(node, list) and node and all(isinstance(item, dict) for item in node):
        lines = [f"{pad}{key}:"]
        for item in node:
            item_lines: list[str] = []
            for child_key, child in item.items():
                item_lines += render_node(child_key, child, indent + 4)
            first = item_lines[0]
            lines.append(f"{pad}  - {first[indent + 4 :]}")
            lines += item_lines[1:]
        return lines
    if key == "description" and isinstance(node, str):
        return _description(node, indent)
    return [f"{pad}{key}: {_scalar(node, quoted=key in QUOTED_KEYS)}"]


def _description(text: str, indent: int) -> list[str]:
    pad = " " * indent
    plain = f"{pad}description: {text}"
    if len(plain) <= WIDTH and _reads_back(f"description: {text}", text):
        return [plain]
    wrapped = textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=pad + "  ",
        subsequent_indent=pad + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    folded = [f"{pad}description: >-", *wrapped]
    if _reads_back("\n".join(line[indent:] for line in folded), text):
        return folded
    return [f"{pad}description: {json.dumps(text)}"]


def _scalar(value: Any, quoted: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict | list):
        # Flow style, as the CRD writes enums and empty defaults: ["a", "b"], {}.
        return json.dumps(value, separators=(", ", ": "))
    text = str(value)
    if not quoted and _reads_back(f"x: {text}", text, key="x"):
        return text
    return json.dumps(text)


def _reads_back(line: str, text: str, key: str = "description") -> bool:
    try:
        loaded = yaml.safe_load(line)
    except yaml.YAMLError:
        return False
    return isinstance(loaded, dict) and loaded.get(key) == text


def subtree_span(lines: Sequence[str], path: Sequence[str]) -> tuple[int, int, int]:
    """Where the schema of `path` is in the CRD's lines: first line, end, and its indent."""
    start = next(i for i, line in enumerate(lines) if line.strip() == "openAPIV3Schema:")
    keys = [step for name in path for step in ("properties", name)]
    indent = _indent(lines[start])
    end = _block_end(lines, start, indent)
    for key in keys:
        child = _child_indent(lines, start, end)
        found = [
            i
            for i in range(start + 1, end)
            if _indent(lines[i]) == child and lines[i].strip() == f"{key}:"
        ]
        if len(found) != 1:
            raise LookupError(f"{'.'.join(path)}: {key} found {len(found)} times in {CRD.name}")
        start, indent = found[0], child
        end = _block_end(lines, start, indent)
    return start, end, indent


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _child_indent(lines: Sequence[str], start: int, end: int) -> int:
    return min(_indent(line) for line in lines[start + 1 : end] if line.strip())


def _block_end(lines: Sequence[str], start: int, indent: int) -> int:
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while not lines[end - 1].strip():
        end -= 1
    return end


def generate(text: str) -> str:
    """The CRD's text with every generated subtree rendered anew from its model."""
    lines = text.splitlines()
    for path, model in GENERATED:
        start, end, indent = subtree_span(lines, path)
        lines[start:end] = render_node(path[-1], structural_schema(model), indent)
    return "\n".join(lines) + "\n"


def outputs(current_crd: str, manifests: str) -> dict[Path, str]:
    """Every file the generated CRD is written to, with its new content."""
    crd = generate(current_crd)
    if manifests.count(current_crd) != 1:
        raise LookupError(
            f"{MANIFESTS.relative_to(ROOT)} does not carry {CRD.relative_to(ROOT)} verbatim; "
            "run deploy/render.py first"
        )
    return {CRD: crd, CHART_CRD: crd, MANIFESTS: manifests.replace(current_crd, crd)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    written = outputs(CRD.read_text(encoding="utf-8"), MANIFESTS.read_text(encoding="utf-8"))
    stale = [path for path, text in written.items() if path.read_text(encoding="utf-8") != text]
    for path in stale:
        name = path.relative_to(ROOT)
        if args.check:
            print(f"{name} is out of date; run make crd")
        else:
            path.write_text(written[path], encoding="utf-8")
            print(f"wrote {name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
