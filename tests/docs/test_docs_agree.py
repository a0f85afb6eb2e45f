"""The docs name only what exists: every ConsumerGroup field path they write is in the CRD's
schema, every chart value they name is in values.yaml, and the `kubectl get` output they show
has the CRD's columns.

What counts as a name, so that prose is never read as one:

- a field path starts with `spec.` or `status.` (also as `.spec.` in a JSONPath or `/spec/` in a
  JSON pointer) and its first field is one of the ConsumerGroup's (`spec.policy...`,
  `status.rollout...`); `spec.replicas` or `spec.updateStrategy...` are a workload's, and
  OTHER_KINDS lists the paths of other kinds that start like a ConsumerGroup's;
- a chart value is written in backticks as a dotted path (`gate.serviceAccounts`, also
  `prometheusRule.enabled=true`) whose first key is one of values.yaml's, or after `--set`;
  a backticked name of a file in the repository (`learning.Dockerfile`) is a file;
- a `kubectl get consumergroups` header is a line of a fenced block that starts with NAME and
  holds GROUP and GENERATION, unless it follows a `$ kubectl rebalancer` command (the plugin's
  own table).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer.planning.recommendation_policies import policy_patch
from rebalancer.planning.recommendations import CurrentSettings, LearningAction, LearningDecision
from rebalancer.structs.specs import parse_spec

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "consumergroups.rebalancer.dev.yaml"
VALUES = ROOT / "charts" / "rebalancer" / "values.yaml"

# Field paths of other kinds that begin with a ConsumerGroup field's name, and whose they are.
OTHER_KINDS = {
    ("spec", "kafka", "config"): "a Strimzi Kafka resource's broker configuration",
}

# spec.policy.rollout.maxBatchSize, .spec.groupId, spec.subscription.topics[0]
DOTTED = re.compile(
    r"(?<![\w/-])\.?(?P<root>spec|status)(?P<rest>(?:\.[A-Za-z_]\w*(?:\[[^\]]*\])?)+)"
)
# /spec/policy/settings/sessionTimeoutMs (Argo CD's jsonPointers, Flux's patches)
POINTER = re.compile(r"(?<![\w.-])/(?P<root>spec|status)(?P<rest>(?:/[\w.~-]+)+)")
# `gate.serviceAccounts`, `prometheusRule.enabled=true`
BACKTICKED_VALUE = re.compile(r"`(?P<path>[A-Za-z][\w-]*(?:\.[\w-]+)+)(?:=[^`]*)?`")
# helm ... --set image.repository=REGISTRY/rebalancer
SET_FLAG = re.compile(r"--set(?:-string|-json|-file|-literal)?[ =](?P<path>[A-Za-z][\w.-]*)=")
FENCE = re.compile(r"^\s*```")


def documents() -> list[Path]:
    """The user's docs: the READMEs, the release notes and docs/."""
    found = [ROOT / "README.md", ROOT / "charts" / "rebalancer" / "README.md"]
    found += [ROOT / "examples" / "README.md"]
    found += [ROOT / name for name in ("CHANGELOG.md", "UPGRADING.md") if (ROOT / name).exists()]
    return found + sorted((ROOT / "docs").glob("*.md"))


def lines(path: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)


@functools.cache
def crd_version() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    (version,) = (v for v in crd["spec"]["versions"] if v.get("storage"))
    return dict(version)


def schema() -> dict[str, Any]:
    return dict(crd_version()["schema"]["openAPIV3Schema"])


def in_schema(node: dict[str, Any], fields: list[str]) -> bool:
    for name in fields:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True  # a free-form object: any key below it is its content
        if node.get("type") == "array":
            node = node["items"]
        if "properties" not in node and isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]  # a map: the key is data, not a field
            continue
        properties = node.get("properties") or {}
        if name not in properties:
            return False
        node = properties[name]
    return True


def field_paths(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, as written, [root, field, ...]) for each ConsumerGroup field path in `path`."""
    top = {part: set(schema()["properties"][part]["properties"]) for part in ("spec", "status")}
    for number, line in lines(path):
        for match in DOTTED.finditer(line):
            rest = [re.sub(r"\[.*\]$", "", name) for name in match["rest"].strip(".").split(".")]
            if rest[0] in top[match["root"]]:
                yield number, match.group(0), [match["root"], *rest]
        for match in POINTER.finditer(line):
            rest = [p.replace("~1", "/").replace("~0", "~") for p in match["rest"][1:].split("/")]
            if rest[0] in top[match["root"]]:
                yield number, match.group(0), [match["root"], *rest]


def of_another_kind(fields: list[str]) -> bool:
    return any(tuple(fields[: len(prefix)]) == prefix for prefix in OTHER_KINDS)


@functools.cache
def values() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text(encoding="utf-8")))


def value_paths(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted path) for each chart value named in `path`."""
    top = set(values())
    for number, line in lines(path):
        for match in SET_FLAG.finditer(line):
            yield number, match["path"]
        for match in BACKTICKED_VALUE.finditer(line):
            name = match["path"]
            if name.split(".")[0] in top and not (ROOT / name).exists():
                yield number, name


def in_values(keys: list[str]) -> bool:
    node: Any = values()
    for key in keys:
        if isinstance(node, dict) and not node:
            return True  # an empty map by default (labels, annotations): any key is the user's
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def column_headers() -> tuple[list[str], list[str]]:
    """What `kubectl get consumergroups` prints as its header, without and with -o wide."""
    columns = crd_version()["additionalPrinterColumns"]
    narrow = ["NAME"] + [c["name"].upper() for c in columns if not c.get("priority")]
    wide = ["NAME"] + [c["name"].upper() for c in columns]
    return narrow, wide


def printed_headers(path: Path) -> Iterator[tuple[int, list[str]]]:
    fenced = plugin = False
    for number, line in lines(path):
        if FENCE.match(line):
            fenced = not fenced
            plugin = False
            continue
        words = line.split()
        if words[:1] == ["$"]:
            # The kubectl plugin's own table follows `$ kubectl rebalancer ...`
            # (tests/kubectl checks it against the plugin's columns).
            plugin = words[1:3] == ["kubectl", "rebalancer"]
        if (
            fenced
            and not plugin
            and words[:1] in (["NAME"], ["NAMESPACE"])
            and {"GROUP", "GENERATION"} <= set(words)
        ):
            yield number, words


DOCS = documents()
IDS = [str(path.relative_to(ROOT)) for path in DOCS]


@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_every_field_path_named_is_in_the_crd(path: Path) -> None:
    root = schema()["properties"]
    missing = [
        f"{path.name}:{number}: {written}"
        for number, written, fields in field_paths(path)
        if not of_another_kind(fields) and not in_schema(root[fields[0]], fields[1:])
    ]
    assert not missing, "fields the CRD does not have (crds/): " + "; ".join(missing)


@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_every_chart_value_named_is_in_values_yaml(path: Path) -> None:
    missing = [
        f"{path.name}:{number}: {name}"
        for number, name in value_paths(path)
        if not in_values(name.split("."))
    ]
    assert not missing, (
        "chart values that charts/rebalancer/values.yaml does not have (a ConsumerGroup field "
        "is written spec.policy...): " + "; ".join(missing)
    )


@pytest.mark.parametrize("path", DOCS, ids=IDS)
def test_kubectl_get_output_shown_has_the_crds_columns(path: Path) -> None:
    narrow, wide = column_headers()
    for number, words in printed_headers(path):
        shown = words[1:] if words[0] == "NAMESPACE" else words
        assert shown in (narrow, wide), (
            f"{path.name}:{number} shows {' '.join(words)}; the CRD prints {' '.join(narrow)} "
            f"(-o wide: {' '.join(wide)})"
        )


def test_the_readers_find_what_they_look_for() -> None:
    """The patterns above still match the way the docs write names (not vacuously green)."""
    readme = ROOT / "README.md"
    fields = {".".join(f) for _, _, f in field_paths(readme)}
    assert "spec.policy.rollout.maxBatchSize" in fields
    assert {"gate.serviceAccounts", "image.repository"} <= {name for _, name in value_paths(readme)}
    settings = {name for _, name in value_paths(ROOT / "docs" / "settings.md")}
    assert "rbac.strimzi" in settings
    shown = [words for _, words in printed_headers(readme)]
    assert shown == list(column_headers())
    images = {name for _, name in value_paths(ROOT / "docs" / "images.md")}
    assert {"image.repository", "agentImage.repository", "learning.image.repository"} <= images
    assert "learning.Dockerfile" not in images


@pytest.mark.parametrize(
    ("fields", "found"),
    [
        (["policy", "rollout", "maxBatchSize"], True),
        (["policy", "rollout", "consumers", "sessionTimeoutMs"], True),
        (["policy", "rollout", "maxBatchSizes"], False),
        (["policy", "rollout", "initialRebalanceDelayMs"], True),
        (["kafka", "config"], False),
    ],
)
def test_a_path_is_looked_up_field_by_field(fields: list[str], found: bool) -> None:
    assert in_schema(schema()["properties"]["spec"], fields) is found


def leaf_paths(patch: dict[str, Any], prefix: str) -> set[str]:
    found: set[str] = set()
    for key, value in patch.items():
        path = f"{prefix}.{key}"
        found |= leaf_paths(value, path) if isinstance(value, dict) else {path}
    return found


def test_gitops_names_every_field_learning_auto_writes() -> None:
    """docs/gitops.md's table of what `learning.mode: auto` writes on a ConsumerGroup is what
    policy_patch writes with every block turned on (the fields a GitOps tool must leave alone),
    for a classic group and for a streams group, whose delay is its own."""
    policy = {
        "rollout": {"enabled": True},
        "settings": {},
        "brokerDelay": {},
        "groupConfigs": {"streams": {}},
    }
    spec = parse_spec(
        {
            "groupId": "orders",
            "kafka": {"bootstrapServers": ["kafka:9092"]},
            "subscription": {"topics": ["orders"]},
            "workload": {"kind": "StatefulSet", "name": "orders"},
            "policy": policy,
        }
    )
    wanted = CurrentSettings(
        initial_rebalance_delay_ms=1000.0, batch_size=2, session_timeout_ms=1e4
    )
    decision = LearningDecision(LearningAction.APPLY, wanted, "Applying", "applying")
    written = set()
    for own_delay in (False, True):
        written |= leaf_paths(policy_patch(decision, spec, own_delay), "spec.policy")
    text = (ROOT / "docs" / "gitops.md").read_text(encoding="utf-8")
    table = text.split("<!-- learning-fields -->")[1].split("\n\n")[1]
    listed = set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE))
    assert listed == written
