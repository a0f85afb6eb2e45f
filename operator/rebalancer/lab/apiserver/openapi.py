"""OpenAPI v3 documents, enough for kubectl to validate on the server and explain CRs.

kubectl 1.32 decides between server-side field validation and client-side schema validation
by looking, in /openapi/v3's group-version document, for a PATCH operation tagged with the
object's group-version-kind that accepts a `fieldValidation` query parameter. We publish
exactly that for every resource, so `kubectl apply/create/replace` validate on the server
(with `fieldValidation=Strict`) and never need /openapi/v2. Strategic merge patch is
deliberately not listed, so kubectl builds those patches from its compiled-in types instead
of looking for patch metadata in schemas we do not have.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .resources import Registry, ResourceType

Body = dict[str, Any]

_QUERY = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")
_OBJECT_META = {
    "description": "ObjectMeta is metadata that all persisted resources must have.",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer", "format": "int64"},
        "creationTimestamp": {"type": "string", "format": "date-time"},
        "deletionTimestamp": {"type": "string", "format": "date-time"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
    },
}
_META_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(rtype: ResourceType) -> str:
    if not rtype.group:
        return f"io.k8s.api.core.{rtype.version}.{rtype.kind}"
    reverse = ".".join(reversed(rtype.group.split(".")))
    return f"{reverse}.{rtype.version}.{rtype.kind}"


def _schema(rtype: ResourceType) -> Body:
    gvk = [{"group": rtype.group, "version": rtype.version, "kind": rtype.kind}]
    if rtype.schema:
        schema = copy.deepcopy(rtype.schema)
        props = schema.setdefault("properties", {})
        props["metadata"] = {"$ref": f"#/components/schemas/{_META_REF}"}
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
    else:
        schema = {
            "description": f"{rtype.kind} (schema not published by the emulator)",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    schema["x-kubernetes-group-version-kind"] = gvk
    return schema


def _operation(rtype: ResourceType, action: str, verb: str, body: bool) -> Body:
    ref = {"$ref": f"#/components/schemas/{schema_name(rtype)}"}
    op: Body = {
        "operationId": f"{verb}{rtype.kind}",
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
            for name in _QUERY
        ],
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ref}}}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": rtype.group,
            "version": rtype.version,
            "kind": rtype.kind,
        },
    }
    if body:
        types = (
            [
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]
            if action == "patch"
            else ["application/json", "application/yaml"]
        )
        op["requestBody"] = {
            "content": {
                t: {"schema": ref if action != "patch" else {"type": "object"}} for t in types
            },
            "required": True,
        }
    return op


def group_version_document(registry: Registry, group: str, version: str) -> Body | None:
    rtypes = registry.in_version(group, version)
    if not rtypes:
        return None
    paths: Body = {}
    schemas: Body = {_META_REF: _OBJECT_META}
    for rtype in rtypes:
        schemas[schema_name(rtype)] = _schema(rtype)
        base = rtype.base_path("{namespace}")
        params = [
            {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
        ]
        params = params if rtype.namespaced else []
        named = [
            *params,
            {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
        ]
        paths[base] = {
            "get": _operation(rtype, "list", "list", False),
            "post": _operation(rtype, "post", "create", True),
            "parameters": params,
        }
        paths[f"{base}/{{name}}"] = {
            "get": _operation(rtype, "get", "read", False),
            "put": _operation(rtype, "put", "replace", True),
            "patch": _operation(rtype, "patch", "patch", True),
            "delete": _operation(rtype, "delete", "delete", False),
            "parameters": named,
        }
        if rtype.status:
            paths[f"{base}/{{name}}/status"] = {
                "get": _operation(rtype, "get", "read", False),
                "put": _operation(rtype, "put", "replace", True),
                "patch": _operation(rtype, "patch", "patch", True),
                "parameters": named,
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _hash(doc: bytes) -> str:
    return hashlib.sha512(doc).hexdigest().upper()


class OpenAPICache:
    """Documents rebuilt only when the registry changes; hashes let kubectl cache them."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._revision = -1
        self._documents: dict[str, bytes] = {}

    def _refresh(self) -> None:
        if self._revision == self.registry.revision:
            return
        self._documents = {}
        for group, versions in self.registry.groups():
            for version in versions:
                doc = group_version_document(self.registry, group, version)
                if doc is not None:
                    self._documents[gv_path(group, version)] = json.dumps(
                        doc, sort_keys=True
                    ).encode()
        self._revision = self.registry.revision

    def root(self) -> Body:
        self._refresh()
        return {
            "paths": {
                path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(doc)}"}
                for path, doc in self._documents.items()
            }
        }

    def document(self, path: str) -> bytes | None:
        self._refresh()
        return self._documents.get(path.strip("/"))
