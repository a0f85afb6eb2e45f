"""The whole ConsumerGroup resource as a typed model, and the CRD that is rendered from it.

`ConsumerGroupResource` is the root of openAPIV3Schema: the spec (consumer_group_spec.py, its
rollout block in rollout_spec.py) and the status (consumer_group_status.py). `crd_document()`
wraps its structural schema in the CustomResourceDefinition, with the names and the printer
columns below; deploy/crd_gen.py (`make crd`) writes it to crds/, the chart and
deploy/rebalancer.yaml. No line of the CRD is written by hand.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

from pydantic import Field, WithJsonSchema

from rebalancer.structs.consumer_group import GROUP, KIND, PLURAL, VERSION
from rebalancer.structs.consumer_group_spec import ResourceSpec
from rebalancer.structs.consumer_group_status import ResourceStatus
from rebalancer.structs.spec_models import SpecModel, Str
from rebalancer.structs.structural_schemas import structural_schema

CRD_NAME = f"{PLURAL}.{GROUP}"
SHORT_NAMES = ("cg", "cgs")
CATEGORIES = ("rebalancer",)


class ConsumerGroupResource(SpecModel):
    """ConsumerGroup declares a Kafka consumer group that Rebalancer observes and keeps calm:
    which Kafka cluster it lives on, which workload runs its consumers, and the policy that
    decides how rebalances are tuned, staggered and enforced."""

    api_version: Annotated[
        Str | None, Field(description=f"APIVersion of this object, {GROUP}/{VERSION}.")
    ] = None
    kind: Annotated[Str | None, Field(description=f"Kind of this object, {KIND}.")] = None
    # The API server's own ObjectMeta: a CRD may not describe it further.
    metadata: Annotated[dict[str, Any] | None, WithJsonSchema({"type": "object"})] = None
    spec: ResourceSpec
    status: ResourceStatus | None = None


class PrinterColumn(NamedTuple):
    """One column of `kubectl get consumergroups` (-o wide shows priority 1)."""

    name: str
    type: str
    json_path: str
    description: str | None = None
    priority: int = 0

    def rendered(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.description is not None:
            column["description"] = self.description
        column["jsonPath"] = self.json_path
        if self.priority:
            column["priority"] = self.priority
        return column


READY = '.status.conditions[?(@.type=="Ready")]'
PRINTER_COLUMNS = (
    PrinterColumn("Group", "string", ".spec.groupId", "Kafka consumer group id."),
    PrinterColumn(
        "State",
        "string",
        ".status.group.state",
        "Group state as last observed (Stable, PreparingRebalance, ...).",
    ),
    PrinterColumn(
        "Protocol",
        "string",
        ".status.group.protocol",
        "Group protocol as last observed (classic, or consumer for KIP-848).",
        priority=1,
    ),
    PrinterColumn(
        "Members", "integer", ".status.group.members", "Members in the group as last observed."
    ),
    PrinterColumn(
        "Generation", "integer", ".status.group.generation", "Group generation as last observed."
    ),
    PrinterColumn(
        "Rebalances",
        "integer",
        ".status.group.rebalances",
        "Rebalances recorded since the resource was created.",
        priority=1,
    ),
    PrinterColumn(
        "Rollout",
        "string",
        ".status.rollout.phase",
        "Phase of the rollout (Idle, BatchOpening, BatchJoining, Completed, Failed, ...).",
    ),
    PrinterColumn(
        "Batch", "integer", ".status.rollout.batch", "The rollout's current batch.", priority=1
    ),
    PrinterColumn(
        "Batches", "integer", ".status.rollout.batches", "Batches in the rollout.", priority=1
    ),
    PrinterColumn(
        "Plan",
        "string",
        ".status.rollout.plan",
        "The arrival plan of the last cold start or scale-up (OnArrival or Gather).",
        priority=1,
    ),
    PrinterColumn(
        "Ready", "string", f"{READY}.status", "Whether the group is observed and settled."
    ),
    PrinterColumn(
        "Reason", "string", f"{READY}.reason", "Reason of the Ready condition.", priority=1
    ),
    PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
)


def crd_document() -> dict[str, Any]:
    """The ConsumerGroup CustomResourceDefinition, in the order its YAML is written."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {
                "app.kubernetes.io/name": "rebalancer",
                "app.kubernetes.io/component": "crd",
            },
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": list(SHORT_NAMES),
                "categories": list(CATEGORIES),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [column.rendered() for column in PRINTER_COLUMNS],
                    "schema": {"openAPIV3Schema": structural_schema(ConsumerGroupResource)},
                }
            ],
        },
    }
