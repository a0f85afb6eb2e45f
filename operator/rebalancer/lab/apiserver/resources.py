"""Resource types the emulator serves, and the registry that discovery and routing read.

One `ResourceType` is one group/version/plural endpoint. Several endpoints may share one
storage (CRD versions, core and events.k8s.io events); each converts between its own
representation and the stored one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Body = dict[str, Any]
Codec = Callable[[Body], Body]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class Column:
    """A printer column: kube's TableColumnDefinition plus how to compute its cell."""

    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""
    json_path: str | None = None
    getter: Callable[[Body], Any] | None = None


@dataclass(frozen=True)
class ScalePaths:
    """Where a /scale subresource reads and writes replicas (CRD `subresources.scale`)."""

    spec_replicas: str
    status_replicas: str
    label_selector: str | None = None


def _identity(obj: Body) -> Body:
    return obj


@dataclass(frozen=True, eq=False)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    singular: str = ""
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    status: bool = False
    scale: ScalePaths | None = None
    generation: bool = False
    # DELETE answers with the object rather than a Status (kube's ReturnDeletedObject).
    returns_deleted: bool = False
    custom: bool = False
    columns: tuple[Column, ...] = ()
    field_labels: Mapping[str, Callable[[Body], Any]] = field(default_factory=dict)
    schema: Body | None = None
    storage: str = ""
    preferred: bool = True
    crd_name: str = ""
    # How this endpoint's objects map to the stored ones; identity for single-version types.
    # Selectors and `prepare` see the stored form, printer columns the served one.
    decode: Codec = _identity
    encode: Codec = _identity
    # Type-specific normalisation of a stored-form object being created (True) or replaced
    # (False): secrets' stringData, a few defaults.
    prepare: Callable[[Body, bool], None] | None = None
    # Create-only review kinds (access reviews) answer at once and store nothing.
    review: Callable[[Body], Body] | None = None

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        if not self.storage:
            object.__setattr__(self, "storage", f"{self.group}/{self.plural}")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def base_path(self, namespace: str | None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key giving kube's version order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > others."""
    match = _VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), version)


class Registry:
    """The served resource types, indexed for routing, discovery and storage fan-out."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        # Bumped on every change so discovery and OpenAPI documents can be cached by it.
        self.revision = 0

    def add(self, rtype: ResourceType) -> None:
        self._types[(rtype.group, rtype.version, rtype.plural)] = rtype
        self.revision += 1

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        gone = [t for t in self._types.values() if t.crd_name == crd_name]
        for rtype in gone:
            del self._types[(rtype.group, rtype.version, rtype.plural)]
        self.revision += 1
        return gone

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def sharing(self, storage: str) -> list[ResourceType]:
        return [t for t in self._types.values() if t.storage == storage]

    def groups(self) -> list[tuple[str, list[str]]]:
        """Groups in registration order (core first), each with versions by kube priority."""
        found: dict[str, set[str]] = {}
        for rtype in self._types.values():
            found.setdefault(rtype.group, set()).add(rtype.version)
        return [(g, sorted(vs, key=version_priority)) for g, vs in found.items()]

    def versions(self, group: str) -> list[str]:
        for name, versions in self.groups():
            if name == group:
                return versions
        return []

    def in_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self._types.values() if t.group == group and t.version == version]
