"""docs/quickstart.md as steps: each ```sh block's commands (a line ending in `\\` continues on
the next) with the output block the doc shows right after it (a fence with no language), so a
test can run the commands and hold their output to the doc's.

How the lab runs each command is tests/operator/e2e/test_quickstart_run.py's table; the unit
test tests/docs/test_quickstart.py checks that the table knows every command the doc gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "quickstart.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Step:
    commands: tuple[str, ...]
    # The output block shown right after the commands, "" when the doc shows none.
    expected: str


def commands_of(block: str) -> tuple[str, ...]:
    """One command a line, continuation lines joined as the shell joins them."""
    joined = re.sub(r"\\\n\s*", "", block)
    return tuple(line.strip() for line in joined.splitlines() if line.strip())


def steps(text: str | None = None) -> list[Step]:
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(text or DOC.read_text("utf-8"))]
    found = []
    for index, (language, body) in enumerate(blocks):
        if language != "sh":
            continue
        following = blocks[index + 1] if index + 1 < len(blocks) else ("-", "")
        expected = following[1] if following[0] == "" else ""
        found.append(Step(commands_of(body), expected))
    return found


def columns(header: str) -> list[str]:
    """A `kubectl get` header's column names: two or more spaces apart ("LAST SEEN" is one)."""
    return re.split(r"\s{2,}", header.strip())


def cells(header: str, row: str) -> dict[str, str]:
    """A `kubectl get` row by its header: each cell starts where its column's name does, so an
    empty cell (a status field not set yet) is "" rather than shifting the cells after it."""
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    ends = [*starts[1:], None]
    return {
        name: row[start:end].strip()
        for name, start, end in zip(columns(header), starts, ends, strict=True)
    }


@dataclass(frozen=True)
class Mapping:
    """A command of the doc and how the lab runs it: as written when `lab` is "", otherwise
    what `lab` says (an equivalent, or why it is skipped)."""

    name: str
    pattern: str
    lab: str
    skipped: bool = False

    def matches(self, command: str) -> bool:
        return re.fullmatch(self.pattern, command) is not None


COMMANDS = (
    Mapping(
        "images",
        r"make images",
        "skipped: the lab runs no images; its kubelet runs an image's entrypoint from this "
        "checkout (rebalancer_lab.kubelet.environment.DEFAULT_IMAGES)",
        skipped=True,
    ),
    Mapping(
        "push",
        r"skopeo copy .*",
        "skipped: nothing to push; REGISTRY is ghcr.io/rebalancer-dev, whose images the lab maps",
        skipped=True,
    ),
    Mapping(
        "install",
        r"helm install rebalancer charts/rebalancer .*-f (?P<values>\S+) .*",
        "the lab's operator process (`rebalancer operator`, started with the lab), and for each "
        "gate.serviceAccounts entry of the values file the Role and RoleBinding the chart gives "
        "it (rebalancer_lab.manifests.gate_rbac), applied once the fleet's namespace exists",
    ),
    Mapping(
        "operator-ready",
        r"kubectl -n rebalancer rollout status deployment/rebalancer",
        "skipped: the lab's operator is a process, not a Deployment",
        skipped=True,
    ),
    Mapping(
        "apply",
        r"kubectl (?:apply|delete) -f deploy/examples/quickstart/\S+\.yaml",
        "run on a copy of the file with the lab's addresses (Kafka, the operator's report "
        "endpoint) and REGISTRY set; the lab has no Strimzi, so a KafkaTopic is created in the "
        "lab's Kafka instead and its line of output is not expected; deleting the namespace does "
        "not wait for its pods' graceful stop (--wait=false)",
    ),
    Mapping("rollout-status", r"kubectl -n \S+ rollout status deployment/\S+", ""),
    Mapping(
        "watch",
        r"kubectl -n \S+ get (?:consumergroups|cg)(?: -o wide)? -w",
        "run without -w, again and again until the state the doc says to wait for (a watch "
        "never ends)",
    ),
    Mapping("count", r"kubectl -n \S+ get cg \S+ -o jsonpath=.*", ""),
    Mapping("restart", r"kubectl -n \S+ rollout restart deployment/\S+", ""),
    Mapping("events", r"kubectl -n \S+ get events --field-selector \S+", ""),
    Mapping(
        "uninstall",
        r"helm uninstall rebalancer .*",
        "skipped: the lab stops its operator when it stops",
        skipped=True,
    ),
)


def mapping_of(command: str) -> Mapping:
    for mapping in COMMANDS:
        if mapping.matches(command):
            return mapping
    raise LookupError(
        f"docs/quickstart.md gives a command the lab cannot run: {command!r}; add it to "
        "tests/docs/quickstart_steps.py COMMANDS (run as written, its lab equivalent, or "
        "skipped with the reason)"
    )
