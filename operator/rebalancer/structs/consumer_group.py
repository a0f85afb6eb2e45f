"""One ConsumerGroup object as the operator reads it: who it is, its spec parsed once, its status.

Every handler and reconciler reads a ConsumerGroup through `read_consumer_group`: the spec's
defaults and validation messages are those of the spec model (`structs/consumer_group_spec.py`,
read by `structs/specs.parse_spec`), never a second reader of raw fields. Only an invalid spec
is looked at raw, through `declared_group_id` and `written_status`, so that its status and
metrics can say what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rebalancer.structs.gates import DEFAULT_BYPASS_SECONDS
from rebalancer.structs.specs import ConsumerGroupSpec, parse_spec

GROUP, VERSION, PLURAL, KIND = "rebalancer.dev", "v1alpha1", "consumergroups", "ConsumerGroup"
# kopf's finalizer on every ConsumerGroup: its daemons and its delete handler end before it goes.
FINALIZER = f"{GROUP}/observer"


@dataclass(frozen=True)
class ConsumerGroup:
    namespace: str
    name: str
    # metadata.generation: which spec status.observedGeneration speaks of.
    generation: int | None
    spec: ConsumerGroupSpec
    # As last written by the operator; each reconciler reads its own part (status_part).
    status: Mapping[str, Any]

    @property
    def group_id(self) -> str:
        return self.spec.group_id

    def status_part(self, key: str) -> Mapping[str, Any]:
        """`status.<key>` as written, empty when absent or not an object."""
        part = self.status.get(key)
        return part if isinstance(part, Mapping) else {}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def written_status(body: Mapping[str, Any]) -> dict[str, Any]:
    """The object's status as written (a copy), whatever its spec."""
    return dict(_mapping(body.get("status")))


def declared_group_id(body: Mapping[str, Any]) -> str:
    """`spec.groupId` as written, "" when missing: the label of an invalid spec's series."""
    value = _mapping(body.get("spec")).get("groupId")
    return value if isinstance(value, str) else ""


def read_consumer_group(
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    bypass_default: int = DEFAULT_BYPASS_SECONDS,
) -> ConsumerGroup:
    """The object as typed data, or SpecInvalid naming every field to fix.

    `namespace` stands for a missing metadata.namespace (kopf passes it beside the body);
    `bypass_default` for an unset bypassGateAfterSeconds (the operator's
    --gate-bypass-after-seconds)."""
    metadata = _mapping(body.get("metadata"))
    generation = metadata.get("generation")
    return ConsumerGroup(
        namespace=str(metadata.get("namespace") or namespace or "default"),
        name=str(metadata.get("name") or ""),
        generation=generation if isinstance(generation, int) else None,
        spec=parse_spec(body.get("spec"), bypass_default=bypass_default),
        status=written_status(body),
    )
