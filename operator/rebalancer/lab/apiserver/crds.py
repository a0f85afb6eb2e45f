"""CustomResourceDefinitions: admission checks, defaulting, status, and served resource types."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from . import cel, errors, schemas
from .errors import FieldError
from .resources import Column, ResourceType, ScalePaths, version_priority
from .selectors import path_getter

Body = dict[str, Any]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def apply_defaults(crd: Body) -> None:
    spec = crd.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    names = spec.setdefault("names", {})
    if isinstance(names, dict) and names.get("kind"):
        names.setdefault("singular", str(names["kind"]).lower())
        names.setdefault("listKind", f"{names['kind']}List")
    spec.setdefault("conversion", {"strategy": "None"})
    for version in spec.get("versions") or ():
        if isinstance(version, dict):
            version.setdefault("served", True)
            version.setdefault("storage", False)


def validate(crd: Body) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [errors.required("spec")]
    name = crd.get("metadata", {}).get("name", "")
    group = spec.get("group") or ""
    names: Body = spec["names"] if isinstance(spec.get("names"), dict) else {}
    plural = names.get("plural") or ""
    if not group:
        errs.append(errors.required("spec.group"))
    elif "." not in group:
        errs.append(errors.invalid("spec.group", group, "should be a domain with at least one dot"))
    if not plural:
        errs.append(errors.required("spec.names.plural"))
    if not names.get("kind"):
        errs.append(errors.required("spec.names.kind"))
    if plural and group and name != f"{plural}.{group}":
        errs.append(
            errors.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')
        )
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        errs.append(
            FieldError(
                "FieldValueNotSupported" if scope else "FieldValueRequired",
                "spec.scope",
                scope or "",
                'supported values: "Cluster", "Namespaced"' if scope else "",
            )
        )
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        errs.append(
            errors.invalid(
                "spec.versions",
                versions or [],
                "must have exactly one version marked as storage version",
            )
        )
        return errs
    if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        stored = [v.get("name") for v in versions if isinstance(v, dict) and v.get("storage")]
        errs.append(
            errors.invalid(
                "spec.versions",
                json.dumps(stored),
                "must have exactly one version marked as storage version",
            )
        )
    for i, version in enumerate(versions):
        where = f"spec.versions[{i}]"
        if not isinstance(version, dict) or not version.get("name"):
            errs.append(errors.required(f"{where}.name"))
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        errs += schemas.check_structural(schema, f"{where}.schema.openAPIV3Schema")
        for path, expression in cel.rules_in(schema, f"{where}.schema.openAPIV3Schema"):
            problem = cel.compile_error(expression)
            if problem:
                errs.append(errors.invalid(path, expression, f"compilation failed: {problem}"))
        for j, column in enumerate(version.get("additionalPrinterColumns") or ()):
            if not column.get("name") or not column.get("jsonPath"):
                errs.append(errors.required(f"{where}.additionalPrinterColumns[{j}].jsonPath"))
    return errs


def establish(crd: Body, old: Body | None) -> None:
    """Accept the names and mark the CRD Established at once; there is no controller lag."""
    spec = crd.get("spec", {})
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    previous = (old or {}).get("status", {}).get("storedVersions") or []
    stored = list(previous) + ([storage] if storage not in previous else [])
    status = crd.setdefault("status", {})
    transition = ((old or {}).get("status", {}).get("conditions") or [{}])[0].get(
        "lastTransitionTime"
    ) or crd.get("metadata", {}).get("creationTimestamp")
    status["acceptedNames"] = dict(spec.get("names", {}))
    status["storedVersions"] = stored
    status["conditions"] = [
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
         "message": "no conflicts found", "lastTransitionTime": transition},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
         "message": "the initial names have been accepted", "lastTransitionTime": transition},
    ]  # fmt: skip


def _set_api_version(api_version: str) -> Callable[[Body], Body]:
    def convert(obj: Body) -> Body:
        if obj.get("apiVersion") == api_version:
            return obj
        return {**obj, "apiVersion": api_version}

    return convert


def _column(spec: Body) -> Column:
    return Column(
        name=str(spec.get("name")),
        type=str(spec.get("type", "string")),
        description=str(spec.get("description", "")),
        priority=int(spec.get("priority", 0)),
        format=str(spec.get("format", "")),
        json_path=str(spec.get("jsonPath", "")),
    )


def resource_types(crd: Body) -> list[ResourceType]:
    spec = crd["spec"]
    group, names = spec["group"], spec["names"]
    served = [v for v in spec["versions"] if v.get("served")]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    preferred = min((v["name"] for v in served), key=version_priority, default="")
    result = []
    for version in served:
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        selectable = {
            str(f["jsonPath"]).lstrip("."): path_getter(str(f["jsonPath"]).lstrip("."))
            for f in version.get("selectableFields") or ()
            if f.get("jsonPath")
        }
        result.append(
            ResourceType(
                group=group,
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                singular=names.get("singular", ""),
                namespaced=spec.get("scope") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subresources,
                scale=ScalePaths(
                    scale["specReplicasPath"],
                    scale["statusReplicasPath"],
                    scale.get("labelSelectorPath"),
                )
                if isinstance(scale, dict)
                else None,
                generation=True,
                custom=True,
                columns=tuple(_column(c) for c in version.get("additionalPrinterColumns") or ()),
                field_labels=selectable,
                schema=(version.get("schema") or {}).get("openAPIV3Schema") or {},
                preferred=version["name"] == preferred,
                crd_name=crd["metadata"]["name"],
                decode=_set_api_version(f"{group}/{storage}"),
                encode=_set_api_version(f"{group}/{version['name']}"),
            )
        )
    return result
