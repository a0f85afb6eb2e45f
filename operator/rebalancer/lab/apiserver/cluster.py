"""The API's semantics, independent of HTTP: what kube-apiserver's registry does per verb.

Create, replace, patch and delete run admission (pruning, defaulting, validation), keep the
system metadata right (uid, resourceVersion, generation, timestamps), honour status
subresources and finalizers, and cascade namespace and CRD deletion the way kube's
controllers would, synchronously.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from . import cel, crds, errors, metadata, patching, schemas, selectors
from .builtins import BUILTINS
from .errors import ApiError, FieldError
from .resources import Registry, ResourceType
from .storage import Store

Body = dict[str, Any]

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_validation: str = "Warn"
    field_manager: str = ""
    force: bool = False


@dataclass
class Outcome:
    obj: Body
    code: int = 200
    warnings: list[str] = field(default_factory=list)


_MISSING: Any = object()


def _path_value(obj: Any, path: str) -> Any:
    """The value at a field-error path like `spec.items[0].name`, or _MISSING."""
    value = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(value, list) or index >= len(value):
                return _MISSING
            value = value[index]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def selector_string(selector: Any) -> str:
    """A LabelSelector object as the string form /scale reports."""
    if isinstance(selector, str):
        return selector
    if not isinstance(selector, dict):
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(str(key))
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms)


class Cluster:
    def __init__(self, *, history_limit: int = 10_000, event_ttl: float = 3600.0) -> None:
        self.registry = Registry()
        for rtype in BUILTINS:
            self.registry.add(rtype)
        self.store = Store(history_limit=history_limit)
        self.event_ttl = event_ttl
        self._events: deque[tuple[float, str, str, str]] = deque()
        # Server-side apply's last applied configuration per object and field manager.
        self._applied: dict[tuple[str, str, str], dict[str, Body]] = {}
        # Looked up once: the write path consults them on every request.
        self.namespaces = self._builtin("", "namespaces")
        self._crd = self._builtin("apiextensions.k8s.io", "customresourcedefinitions")
        for name in NAMESPACES:
            self.create(self.namespaces, None, {"metadata": {"name": name}}, WriteOptions())

    def _builtin(self, group: str, plural: str) -> ResourceType:
        for rtype in self.registry:
            if rtype.group == group and rtype.plural == plural:
                return rtype
        raise LookupError(plural)

    # Reads ------------------------------------------------------------------------------

    def served(self, rtype: ResourceType, stored: Body) -> Body:
        """The stored object as this endpoint presents it (apiVersion, read-time defaults)."""
        obj = rtype.encode(stored)
        if rtype.custom and rtype.schema and obj is not stored:
            obj = copy.deepcopy(obj)
            schemas.apply_defaults(obj, rtype.schema, root=True)
        return obj

    @staticmethod
    def _ns(rtype: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rtype.namespaced else ""

    def existing(self, rtype: ResourceType, namespace: str | None, name: str) -> Body:
        obj = self.store.get(rtype.storage, self._ns(rtype, namespace), name)
        if obj is None:
            raise errors.not_found(rtype.group, rtype.plural, name)
        return obj

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Body:
        return self.served(rtype, self.existing(rtype, namespace, name))

    def field_labels(self, rtype: ResourceType) -> dict[str, Any]:
        return {**selectors.COMMON_FIELDS, **rtype.field_labels}

    def select(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Body]:
        """Stored objects matching the selectors, in etcd key order."""
        labels = selectors.parse_labels(label_selector)
        supported = self.field_labels(rtype)
        fields = selectors.parse_fields(field_selector, supported)
        objs = self.store.objects(rtype.storage, namespace if rtype.namespaced else None)
        return [
            o
            for o in objs
            if selectors.labels_match(labels, o) and selectors.fields_match(fields, o, supported)
        ]

    def list_page(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[Body], Body]:
        objs = self.select(rtype, namespace, label_selector, field_selector)
        meta: Body = {"resourceVersion": str(self.store.rv)}
        if continue_token:
            try:
                after = json.loads(base64.urlsafe_b64decode(continue_token.encode()))["start"]
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request("continue key is not valid: illegal base64 data") from exc
            objs = [o for o in objs if self._key(o) > after]
        if limit and len(objs) > limit:
            last = self._key(objs[limit - 1])
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": self.store.rv, "start": last}).encode()
            ).decode()
            meta["remainingItemCount"] = len(objs) - limit
            objs = objs[:limit]
        return [self.served(rtype, o) for o in objs], meta

    @staticmethod
    def _key(obj: Body) -> str:
        meta = obj.get("metadata", {})
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    # Create -----------------------------------------------------------------------------

    def _check_namespace(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        if not rtype.namespaced:
            return
        if not namespace:
            raise errors.method_not_allowed()
        ns = self.store.get(self.namespaces.storage, "", namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rtype.group,
                rtype.plural,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
            )

    def _check_body(self, rtype: ResourceType, body: Any, namespace: str | None) -> Body:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request is not a {rtype.kind} object")
        obj = copy.deepcopy(body)
        kind = obj.get("kind")
        if kind and kind != rtype.kind:
            raise errors.bad_request(
                f'{kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
            )
        api_version = obj.get("apiVersion")
        if api_version and api_version != rtype.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rtype.api_version})"
            )
        obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if rtype.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            if namespace:
                meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    def create(
        self, rtype: ResourceType, namespace: str | None, body: Any, opts: WriteOptions
    ) -> Outcome:
        obj = self._check_body(rtype, body, namespace)
        if rtype.review is not None:
            return Outcome(rtype.review(obj), 201)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            for _ in range(8):
                meta["name"] = metadata.generate_name(str(meta["generateName"]))
                if self.store.get(rtype.storage, self._ns(rtype, namespace), meta["name"]) is None:
                    break
        name = str(meta.get("name") or "")
        self._check_namespace(rtype, namespace, name)
        if rtype.crd_name and self._crd_terminating(rtype.crd_name):
            raise ApiError(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            )
        stored = rtype.decode(obj)
        meta = stored["metadata"]
        # System fields are the server's: kube's BeforeCreate clears what clients sent.
        for key in ("resourceVersion", "uid", "selfLink", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "managedFields", "generation"):  # fmt: skip
            meta.pop(key, None)
        meta["uid"] = metadata.new_uid()
        meta["creationTimestamp"] = metadata.now()
        if rtype.generation:
            meta["generation"] = 1
        if rtype.status:
            stored.pop("status", None)
        if rtype.prepare is not None:
            rtype.prepare(stored, True)
        if rtype is self._crd_type():
            crds.apply_defaults(stored)
            finalizers = meta.setdefault("finalizers", [])
            if crds.CLEANUP_FINALIZER not in finalizers:
                finalizers.append(crds.CLEANUP_FINALIZER)
        errs: list[FieldError] = []
        if not name:
            errs.append(errors.required("metadata.name", "name or generateName is required"))
        else:
            errs += metadata.validate_name(rtype.kind, name)
        errs += metadata.validate_meta(meta)
        warnings: list[str] = []
        if rtype.custom:
            warnings, custom_errs = self._admit_custom(rtype, stored, None, opts, "create", None)
            errs += custom_errs
        if rtype is self._crd_type():
            errs += crds.validate(stored)
        if errs:
            raise errors.invalid_object(rtype.group, rtype.kind, name, errs)
        if self.store.get(rtype.storage, self._ns(rtype, namespace), name):
            raise errors.already_exists(rtype.group, rtype.plural, name)
        if rtype is self._crd_type():
            crds.establish(stored, None)
        if opts.dry_run:
            return Outcome(self.served(rtype, stored), 201, warnings)
        self.store.put(rtype.storage, self._ns(rtype, namespace), name, stored)
        if rtype is self._crd_type():
            self._register_crd(stored)
        if rtype.storage == "/events":
            self._remember_event(stored)
        return Outcome(self.served(rtype, stored), 201, warnings)

    # Update and patch -------------------------------------------------------------------

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        opts: WriteOptions,
        subresource: str | None = None,
    ) -> Outcome:
        old = self.existing(rtype, namespace, name)
        obj = self._check_body(rtype, body, namespace)
        body_name = obj["metadata"].get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        return self._commit(rtype, old, rtype.decode(obj), opts, subresource, "update", body)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: Any,
        opts: WriteOptions,
        subresource: str | None = None,
    ) -> Outcome:
        if content_type == APPLY_PATCH:
            return self.apply(rtype, namespace, name, body, opts, subresource)
        old = self.existing(rtype, namespace, name)
        # Stored objects are shared with watch history and readers: never patch them in place.
        current = copy.deepcopy(self.served(rtype, old))
        if content_type == MERGE_PATCH:
            patched = patching.merge_patch(current, body)
        elif content_type == JSON_PATCH:
            try:
                patched = patching.json_patch(current, body)
            except patching.PatchFailed as exc:
                raise ApiError(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                    {"causes": [{"reason": "UnexpectedServerResponse", "message": str(exc)}]},
                ) from exc
        elif content_type == STRATEGIC_PATCH and not rtype.custom:
            patched = patching.strategic_merge(current, body)
        else:
            accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
            if not rtype.custom:
                accepted.insert(2, STRATEGIC_PATCH)
            raise errors.unsupported_media_type(accepted)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch must leave an object")
        patched.setdefault("metadata", {})
        if not isinstance(patched["metadata"], dict):
            raise errors.bad_request("metadata must be an object")
        patched["metadata"]["name"] = name
        if rtype.namespaced:
            patched["metadata"]["namespace"] = namespace
        patched["kind"], patched["apiVersion"] = rtype.kind, rtype.api_version
        return self._commit(rtype, old, rtype.decode(patched), opts, subresource, "patch", body)

    def _commit(
        self,
        rtype: ResourceType,
        old: Body,
        new: Body,
        opts: WriteOptions,
        subresource: str | None,
        verb: str,
        request_body: Any,
    ) -> Outcome:
        old_meta = old["metadata"]
        name = old_meta["name"]
        meta = new.setdefault("metadata", {})
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != old_meta.get("resourceVersion"):
            raise errors.conflict(rtype.group, rtype.plural, name, errors.STALE)
        if subresource == "status":
            # Only status changes through /status (kube's status strategies).
            status = new.get("status", _MISSING)
            new = copy.deepcopy(old)
            if status is _MISSING:
                new.pop("status", None)
            else:
                new["status"] = status
            meta = new["metadata"]
        else:
            for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"):  # fmt: skip
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            meta.pop("managedFields", None)
            meta.pop("selfLink", None)
            if rtype.status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if rtype.prepare is not None:
                rtype.prepare(new, False)
        meta.pop("resourceVersion", None)
        errs: list[FieldError] = []
        warnings: list[str] = []
        if subresource is None:
            errs += metadata.validate_meta(meta)
            if old_meta.get("deletionTimestamp"):
                added = [
                    f
                    for f in meta.get("finalizers") or ()
                    if f not in (old_meta.get("finalizers") or ())
                ]
                if added:
                    errs.append(
                        errors.forbidden_field(
                            "metadata.finalizers",
                            "no new finalizers can be added if the object is being deleted, found "
                            f"new finalizers {json.dumps(added)}",
                        )
                    )
        if rtype.custom:
            extra_warnings, custom_errs = self._admit_custom(
                rtype, new, old, opts, verb, request_body
            )
            warnings += extra_warnings
            errs += custom_errs
        if rtype is self._crd_type() and subresource is None:
            crds.apply_defaults(new)
            errs += crds.validate(new)
        if errs:
            raise errors.invalid_object(rtype.group, rtype.kind, name, errs)
        if rtype.generation and "generation" in old_meta:
            ignored = ("metadata", "status") if rtype.status else ("metadata",)
            changed = metadata.without(new, *ignored) != metadata.without(old, *ignored)
            meta["generation"] = old_meta["generation"] + (1 if changed else 0)
        if rtype is self._crd_type():
            crds.establish(new, old)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return Outcome(self.served(rtype, old), 200, warnings)  # no-op writes keep the version
        if opts.dry_run:
            return Outcome(self.served(rtype, new), 200, warnings)
        namespace = old_meta.get("namespace", "")
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and self._empty(rtype, new):
            gone = self._remove(rtype, namespace, name)
            return Outcome(self.served(rtype, gone or new), 200, warnings)
        stored = self.store.put(rtype.storage, namespace, name, new)
        if rtype is self._crd_type():
            self._register_crd(stored)
        return Outcome(self.served(rtype, stored), 200, warnings)

    def _admit_custom(
        self,
        rtype: ResourceType,
        obj: Body,
        old: Body | None,
        opts: WriteOptions,
        verb: str,
        request_body: Any,
    ) -> tuple[list[str], list[FieldError]]:
        """Prune, default and validate a custom resource; returns warnings and field errors."""
        schema = rtype.schema or {}
        unknown: list[str] = []
        schemas.prune(obj, schema, "", unknown, root=True)
        warnings: list[str] = []
        if unknown:
            listed = ", ".join(f'unknown field "{p}"' for p in unknown)
            if opts.field_validation == "Strict":
                if verb == "patch":
                    # kube reports strict errors of patches against the patch itself.
                    cause = errors.invalid(
                        "patch", json.dumps(request_body), f"strict decoding error: {listed}"
                    )
                    raise errors.invalid_object("", "", "", [cause])
                raise errors.bad_request(
                    f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
                    f"{rtype.kind}: strict decoding error: {listed}"
                )
            if opts.field_validation != "Ignore":
                warnings = [f'unknown field "{p}"' for p in unknown]
        schemas.apply_defaults(obj, schema, root=True)
        errs = schemas.validate(obj, schema)
        if any(e.type == "FieldValueTypeInvalid" for e in errs):
            errs.append(FieldError("FieldValueInvalid", "<nil>", None, cel.BLOCKED))
        else:
            errs += cel.check(obj, schema, "", old if old is not None else _MISSING)
        if old is not None:
            # Validation ratcheting (on by default since 1.30): a value the update did not
            # touch cannot fail it, so status writers are not blocked by an older spec.
            errs = [
                e
                for e in errs
                if e.type == "FieldValueRequired"
                or (v := _path_value(obj, e.field)) is _MISSING
                or v != _path_value(old, e.field)
            ]
        return warnings, errs

    # Delete -----------------------------------------------------------------------------

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        options: Any,
        opts: WriteOptions,
    ) -> Outcome:
        old = self.existing(rtype, namespace, name)
        meta = old["metadata"]
        preconditions = (
            (options or {}).get("preconditions") or {} if isinstance(options, dict) else {}
        )
        for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(key)
            if wanted and wanted != meta.get(key):
                raise errors.conflict(
                    rtype.group,
                    rtype.plural,
                    name,
                    f"Precondition failed: {label} in precondition: {wanted}, {label} in object "
                    f"meta: {meta.get(key)}",
                )
        if opts.dry_run:
            return Outcome(self.served(rtype, old), 200)
        return self._delete(rtype, old)

    def _delete(self, rtype: ResourceType, old: Body) -> Outcome:
        meta = old["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        cascades = rtype is self.namespaces or rtype is self._crd_type()
        if meta.get("finalizers") or cascades:
            if not meta.get("deletionTimestamp"):
                marked = copy.deepcopy(old)
                marked["metadata"]["deletionTimestamp"] = metadata.now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                if "generation" in marked["metadata"]:
                    marked["metadata"]["generation"] += 1
                if rtype is self.namespaces:
                    marked.setdefault("status", {})["phase"] = "Terminating"
                old = self.store.put(rtype.storage, namespace, name, marked)
            if rtype is self.namespaces:
                self._empty_namespace(name)
            elif rtype is self._crd_type():
                self._empty_crd(old)
            # Kube answers with the object being deleted even when its controllers finish
            # the job at once, as ours do.
            return Outcome(self.served(rtype, old), 200)
        gone = self._remove(rtype, namespace, name)
        if rtype.returns_deleted and gone is not None:
            return Outcome(self.served(rtype, gone), 200)
        return Outcome(self._success(rtype, old), 200)

    def _success(self, rtype: ResourceType, obj: Body) -> Body:
        details: Body = {"name": obj["metadata"]["name"]}
        if rtype.group:
            details["group"] = rtype.group
        details["kind"] = rtype.plural
        details["uid"] = obj["metadata"].get("uid")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        opts: WriteOptions,
    ) -> Body:
        doomed = self.select(rtype, namespace, label_selector, field_selector)
        items = []
        for obj in doomed:
            items.append(self.served(rtype, obj))
            if not opts.dry_run:
                current = self.store.get(
                    rtype.storage, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
                )
                if current is not None:
                    self._delete(rtype, current)
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": items,
        }

    def _remove(self, rtype: ResourceType, namespace: str, name: str) -> Body | None:
        gone = self.store.remove(rtype.storage, namespace, name)
        if gone is None:
            return None
        self._applied.pop((rtype.storage, namespace, name), None)
        self._collect_dependents(gone)
        if rtype is self._crd_type():
            for served in self.registry.remove_crd(name):
                self.store.drop_storage(served.storage)
        if namespace:
            ns = self.store.get(self.namespaces.storage, "", namespace)
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self._finalize(self.namespaces, ns)
        if rtype.crd_name:
            crd = self.store.get(self._crd_type().storage, "", rtype.crd_name)
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                self._empty_crd(crd)
        return gone

    def _collect_dependents(self, owner: Body) -> None:
        """Kube's garbage collector, synchronously: delete what no live owner holds any more.

        Background propagation only; `foreground` and `orphan` policies are not emulated.
        """
        for storage, namespace, name in self.store.dependents(owner["metadata"].get("uid", "")):
            dependent = self.store.get(storage, namespace, name)
            sharing = self.registry.sharing(storage)
            if dependent is None or not sharing or dependent["metadata"].get("deletionTimestamp"):
                continue
            refs = dependent["metadata"].get("ownerReferences") or []
            if not any(self._owner_alive(ref, namespace) for ref in refs):
                self._delete(sharing[0], dependent)

    def _owner_alive(self, ref: Body, namespace: str) -> bool:
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        for rtype in self.registry:
            if rtype.group == group and rtype.kind == ref.get("kind"):
                found = self.store.get(
                    rtype.storage, namespace if rtype.namespaced else "", str(ref.get("name"))
                )
                return found is not None and found["metadata"].get("uid") == ref.get("uid")
        return False

    def _empty(self, rtype: ResourceType, obj: Body) -> bool:
        if rtype is self.namespaces:
            return self.store.count_in_namespace(obj["metadata"]["name"]) == 0
        if rtype is self._crd_type():
            spec = obj.get("spec", {})
            plural = spec.get("names", {}).get("plural")
            return self.store.count(f"{spec.get('group')}/{plural}") == 0
        return True

    def _finalize(self, rtype: ResourceType, obj: Body) -> None:
        """Remove a terminating container once it is empty and has no other finalizers."""
        if self._empty(rtype, obj) and not obj["metadata"].get("finalizers"):
            self._remove(rtype, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    def _empty_namespace(self, namespace: str) -> None:
        for rtype in {t.storage: t for t in self.registry if t.namespaced}.values():
            for obj in list(self.store.objects(rtype.storage, namespace)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(rtype, obj)
        ns = self.store.get(self.namespaces.storage, "", namespace)
        if ns is not None:
            self._finalize(self.namespaces, ns)

    def _empty_crd(self, crd: Body) -> None:
        served = [t for t in self.registry if t.crd_name == crd["metadata"]["name"]]
        if served:
            rtype = served[0]
            for obj in list(self.store.objects(rtype.storage)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(rtype, obj)
            if self.store.count(rtype.storage):
                return
        finalizers = [
            f for f in crd["metadata"].get("finalizers") or () if f != crds.CLEANUP_FINALIZER
        ]
        if finalizers != crd["metadata"].get("finalizers"):
            cleaned = copy.deepcopy(crd)
            cleaned["metadata"]["finalizers"] = finalizers
            crd = self.store.put(self._crd_type().storage, "", crd["metadata"]["name"], cleaned)
        if not finalizers:
            self._remove(self._crd_type(), "", crd["metadata"]["name"])

    # CRDs -------------------------------------------------------------------------------

    def _crd_type(self) -> ResourceType:
        return self._crd

    def _crd_terminating(self, crd_name: str) -> bool:
        crd = self.store.get(self._crd_type().storage, "", crd_name)
        return bool(crd and crd["metadata"].get("deletionTimestamp"))

    def _register_crd(self, crd: Body) -> None:
        self.registry.remove_crd(crd["metadata"]["name"])
        served = crds.resource_types(crd)
        for rtype in served:
            self.registry.add(rtype)
        # Objects stored before a schema change get the new defaults, as kube applies
        # defaults when reading from etcd; no new resourceVersion, as kube writes none.
        storage_type = next((t for t in served if t.decode({}) == t.encode({})), None)
        if storage_type is not None and storage_type.schema:
            for obj in self.store.objects(storage_type.storage):
                refreshed = copy.deepcopy(obj)
                schemas.apply_defaults(refreshed, storage_type.schema, root=True)
                if refreshed != obj:
                    meta = obj["metadata"]
                    self.store.replace_silently(
                        storage_type.storage, meta.get("namespace", ""), meta["name"], refreshed
                    )

    # Events -----------------------------------------------------------------------------

    def _remember_event(self, event: Body) -> None:
        """Expire events after the TTL (kube's --event-ttl), so posting them cannot grow forever."""
        meta = event["metadata"]
        clock = time.monotonic()
        self._events.append((clock, meta.get("namespace", ""), meta["name"], meta["uid"]))
        rtype = self._builtin("", "events")
        while self._events and self._events[0][0] < clock - self.event_ttl:
            _, namespace, name, uid = self._events.popleft()
            current = self.store.get(rtype.storage, namespace, name)
            if current is not None and current["metadata"].get("uid") == uid:
                self._remove(rtype, namespace, name)

    # Scale ------------------------------------------------------------------------------

    def get_scale(self, rtype: ResourceType, namespace: str | None, name: str) -> Body:
        if rtype.scale is None:
            raise errors.no_such_route()
        obj = self.served(rtype, self.existing(rtype, namespace, name))
        from . import jsonpath

        def first(path: str | None) -> Any:
            found = jsonpath.find(obj, path) if path else []
            return found[0] if found else None

        meta = obj["metadata"]
        status: Body = {"replicas": first(rtype.scale.status_replicas) or 0}
        selector = selector_string(first(rtype.scale.label_selector))
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": first(rtype.scale.spec_replicas) or 0},
            "status": status,
        }

    def update_scale(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        scale: Any,
        opts: WriteOptions,
    ) -> Body:
        if rtype.scale is None or not isinstance(scale, dict):
            raise errors.bad_request("a Scale object is required")
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid_object(
                "autoscaling", "Scale", name,
                [errors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            )  # fmt: skip
        obj = copy.deepcopy(self.get(rtype, namespace, name))
        wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != obj["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype.group, rtype.plural, name, errors.STALE)
        path = [p for p in rtype.scale.spec_replicas.split(".") if p]
        node = obj
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = replicas
        self.update(rtype, namespace, name, obj, opts)
        return self.get_scale(rtype, namespace, name)

    # Server-side apply ------------------------------------------------------------------

    def apply(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        opts: WriteOptions,
        subresource: str | None,
    ) -> Outcome:
        from . import applying

        return applying.apply(self, rtype, namespace, name, body, opts, subresource)
