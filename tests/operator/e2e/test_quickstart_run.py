"""docs/quickstart.md, run: its commands, read from the doc (tests/docs/quickstart_steps.py), on
the lab (Apache Kafka, Kubernetes' control plane, the lab kubelet running the example consumer
as the Deployment's pods, the operator process), with kubectl against the lab's API server.

What a real cluster needs and the lab does not (images, Strimzi, the chart) is mapped in
quickstart_steps.COMMANDS, each with its reason; everything else runs as written. The output
the doc shows is held to the real output: exact lines, the `kubectl get` columns, and the
rebalance count the doc promises (the same before and after `kubectl rollout restart`).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.docs.quickstart_steps import ROOT, Step, cells, columns, mapping_of, steps
from tests.operator.e2e.support import eventually, kubectl, lab_context, running_lab

from rebalancer.structs.gates import INSTANCE_ID_ANNOTATION
from rebalancer_lab.manifests import gate_rbac
from rebalancer_lab.producer import ensure_topic
from rebalancer_lab.running import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]
NAMESPACE = "orders"
GROUP = "orders"
REPLICAS = 3
# The registry the doc leaves to the user: the project's, whose images the lab runs.
REGISTRY = "ghcr.io/rebalancer-dev"
COUNT = re.compile(r"^(\d+) (\d+)$")
# The columns of a ConsumerGroup line the test can hold to the doc; the others vary by run.
FIXED = ("NAME", "GROUP", "STATE", "MEMBERS", "ROLLOUT", "READY")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # A broker of its own: the quickstart creates topic `orders` with the doc's 12 partitions,
    # and other modules on the session's shared broker create `orders` with 6.
    with running_lab(
        tmp_path_factory.mktemp("lab"), fleet=False, pods=True, own_broker=True
    ) as running:
        yield running


def lab_addresses(lab: Lab) -> dict[str, str]:
    """The cluster addresses of the example files and the lab's."""
    return {
        "my-cluster-kafka-bootstrap.kafka.svc:9092": lab.bootstrap,
        "http://rebalancer.rebalancer.svc:8090/v1/reports": lab.report_url,
        "REGISTRY/": f"{REGISTRY}/",
    }


class Quickstart:
    """The doc's commands on the lab, with what they printed and the counts they read."""

    def __init__(self, lab: Lab, workdir: Path) -> None:
        self.lab = lab
        self.workdir = workdir
        self.gate_accounts: list[dict[str, str]] = []
        self.counts: list[tuple[int, int]] = []
        self.before_restart: set[str] | None = None
        self.tables: list[list[str]] = []
        self.rebalance_events: list[int] = []

    def run(self, command: str) -> str:
        """The output to hold to the doc's, "" for a command the lab skips."""
        mapping = mapping_of(command)
        if mapping.skipped:
            return ""
        handler = getattr(self, mapping.name.replace("-", "_"))
        return str(handler(command))

    def kubectl(self, command: str) -> str:
        argv = shlex.split(command)
        assert argv[0] == "kubectl", command
        return kubectl(self.lab, *argv[1:])

    def install(self, command: str) -> str:
        # The operator already runs; the chart's gate RBAC waits for the fleet's namespace.
        match = mapping_of(command)
        values_file = re.fullmatch(match.pattern, command)
        assert values_file is not None
        values = yaml.safe_load((ROOT / values_file.group("values")).read_text("utf-8"))
        self.gate_accounts = list(values["gate"]["serviceAccounts"])
        return ""

    def apply(self, command: str) -> str:
        verb, _, name = command.split()[1:4]
        documents = self.lab_documents(ROOT / name)
        copy = self.workdir / Path(name).name
        kinds = {d["kind"] for d in documents}
        copy.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
        # Deleting the namespace waits for its pods' graceful stop; the lab does not wait.
        wait = "--timeout=120s" if verb == "apply" or "Namespace" not in kinds else "--wait=false"
        output = kubectl(self.lab, verb, "-f", str(copy), wait)
        if verb == "apply":
            self.apply_gate_rbac(documents)
        return output

    def lab_documents(self, path: Path) -> list[dict[str, Any]]:
        text = path.read_text("utf-8")
        for address, lab_address in lab_addresses(self.lab).items():
            text = text.replace(address, lab_address)
        documents = [d for d in yaml.safe_load_all(text) if d]
        for topic in (d for d in documents if d["kind"] == "KafkaTopic"):
            name, partitions = topic["metadata"]["name"], topic["spec"]["partitions"]
            assert asyncio.run(ensure_topic(self.lab.bootstrap, name, partitions)) == partitions
        return [d for d in documents if d["kind"] != "KafkaTopic"]

    def apply_gate_rbac(self, documents: list[dict[str, Any]]) -> None:
        namespaces = {d["metadata"]["name"] for d in documents if d["kind"] == "Namespace"}
        for account in self.gate_accounts:
            if account["namespace"] in namespaces:
                self.lab.apply(gate_rbac(account["namespace"], account["name"]))

    def rollout_status(self, command: str) -> str:
        return self.kubectl(f"{command} --timeout=120s")

    def restart(self, command: str) -> str:
        self.before_restart = {pod["metadata"]["name"] for pod in self.live_pods()}
        self.rebalance_events.append(self.rebalance_events_now())
        return self.kubectl(command)

    def rebalance_events_now(self) -> int:
        """Lines of reason Rebalance the doc's events command lists now."""
        out = kubectl(
            self.lab,
            "-n",
            NAMESPACE,
            "get",
            "events",
            f"--field-selector=involvedObject.name={GROUP}",
        )
        header, *rows = out.strip().splitlines() or [""]
        return sum(1 for row in rows if cells(header, row).get("REASON") == "Rebalance")

    def count(self, command: str) -> str:
        output = self.kubectl(command)
        match = COUNT.match(output.strip())
        assert match, f"{command} printed {output!r}, not 'GENERATION REBALANCES'"
        self.counts.append((int(match.group(1)), int(match.group(2))))
        return output

    def events(self, command: str) -> str:
        output = self.kubectl(command)
        self.rebalance_events.append(self.rebalance_events_now())
        return output

    def watch(self, command: str) -> str:
        """The same get without -w, until the rollout the doc waits for has Completed: the
        gate's first one (every pod in an identity slot), or the restart's (no old pod left)."""
        once = command.removesuffix(" -w")
        output: str = eventually(
            lambda: self.settled(once),
            150,
            f"{once}: ROLLOUT Completed, the group Stable with {REPLICAS} members",
            every=2,
            context=lab_context(self.lab, GROUP),
        )
        self.tables.append(output.strip().splitlines())
        return output

    def settled(self, command: str) -> str | None:
        output = self.kubectl(command)
        header, *rows = output.strip().splitlines()
        if len(rows) != 1:
            return None
        found = cells(header, rows[0])
        done = {"STATE": "Stable", "MEMBERS": str(REPLICAS), "ROLLOUT": "Completed"}
        if any(found.get(key) != value for key, value in done.items()):
            return None
        pods = self.live_pods()
        slots = sorted(slot_of(pod) or "" for pod in pods)
        if slots != [f"orders-consumer-{k}" for k in range(REPLICAS)]:
            return None
        names = {pod["metadata"]["name"] for pod in pods}
        return output if not names & (self.before_restart or set()) else None

    def live_pods(self) -> list[dict[str, Any]]:
        out = kubectl(self.lab, "-n", NAMESPACE, "get", "pods", "-o", "json")
        items = json.loads(out[: out.rindex("}") + 1])["items"]
        return [pod for pod in items if not pod["metadata"].get("deletionTimestamp")]


def slot_of(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(INSTANCE_ID_ANNOTATION)


def check_output(step: Step, outputs: list[str]) -> list[str]:
    """The doc's output block against what the step's commands printed: a `kubectl get` table
    by its columns (the last get of the step), a count by its shape, other lines exactly, from
    the commands that are neither (a table the doc does not show is not held to its lines).
    Returns what differs, so that one run shows every difference."""
    expected = step.expected.strip().splitlines()
    if not expected or not any(outputs):
        return []  # nothing shown, or only skipped commands (their output is the cluster's)
    kinds = [mapping_of(command).name for command in step.commands]
    tables = [out for kind, out in zip(kinds, outputs, strict=True) if kind == "watch"]
    if expected[0].startswith("NAME "):
        return check_table(expected, tables[-1].strip().splitlines())
    printed = [
        line
        for kind, out in zip(kinds, outputs, strict=True)
        if kind != "watch"
        for line in out.strip().splitlines()
        # kubectl rollout status prints progress until the pods are up, as the doc says.
        if not line.startswith("Waiting for ")
    ]
    if COUNT.match(expected[0]):
        shaped = [bool(COUNT.match(line)) for line in printed] == [True]
        return [] if shaped else [f"{step.commands}: {printed} is not 'GENERATION REBALANCES'"]
    # The lab has no Strimzi: no KafkaTopic is applied (quickstart_steps.COMMANDS).
    shown = [line for line in expected if not line.startswith("kafkatopic.")]
    return [] if printed == shown else [f"{step.commands}: printed {printed}, shown {shown}"]


def check_table(expected: list[str], printed: list[str]) -> list[str]:
    shown_header, shown_row = expected
    header, row = printed[0], printed[-1]
    if columns(header) != columns(shown_header):
        return [f"columns {columns(header)}, shown {columns(shown_header)}"]
    real, shown = cells(header, row), cells(shown_header, shown_row)
    real_fixed, shown_fixed = ({k: line[k] for k in FIXED} for line in (real, shown))
    return [] if real_fixed == shown_fixed else [f"line {real_fixed}, shown {shown_fixed}"]


def test_the_quickstart_runs_and_a_restart_costs_no_rebalance(lab: Lab, tmp_path: Path) -> None:
    quickstart = Quickstart(lab, tmp_path)
    differences = []
    for step in steps():
        outputs = [quickstart.run(command) for command in step.commands]
        differences += check_output(step, outputs)
    assert not differences, "docs/quickstart.md shows other output:\n" + "\n".join(differences)
    # Step 5 and step 7: the generation and the rebalance count, the same after the restart.
    before, after = quickstart.counts
    assert after == before, f"the restart cost rebalances: before {before}, after {after}"
    # "no `Rebalance` among the new ones" (step 7's events).
    at_restart, at_end = quickstart.rebalance_events
    assert at_end == at_restart, quickstart.rebalance_events
    # `-o wide` shows where a rollout is, as the doc says.
    wide = columns(quickstart.tables[-1][0])
    assert {"BATCH", "BATCHES"} <= set(wide), wide
