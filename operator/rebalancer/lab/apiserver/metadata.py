"""Object metadata rules shared by every kind: names, generateName, uids, timestamps."""

from __future__ import annotations

import json
import random
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from . import errors
from .errors import FieldError

Body = dict[str, Any]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# kube's generateName alphabet: no vowels (no words) and no look-alike characters.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

#: Kinds whose names must be DNS-1123 labels rather than subdomains.
LABEL_NAMED = frozenset({"Namespace", "Service"})


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def generate_name(prefix: str) -> str:
    return prefix + "".join(random.choice(_ALPHABET) for _ in range(5))


def validate_name(kind: str, name: str) -> list[FieldError]:
    label = kind in LABEL_NAMED
    limit = 63 if label else 253
    errs: list[FieldError] = []
    if len(name) > limit:
        errs.append(
            errors.invalid("metadata.name", name, f"must be no more than {limit} characters")
        )
    if not (_LABEL if label else _SUBDOMAIN).match(name):
        errs.append(
            errors.invalid("metadata.name", name, LABEL_MESSAGE if label else SUBDOMAIN_MESSAGE)
        )
    return errs


def _qualified_name_errors(path: str, key: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    errs: list[FieldError] = []
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        errs.append(errors.invalid(path, key, "prefix part " + SUBDOMAIN_MESSAGE))
    if not name or len(name) > 63 or not _QUALIFIED.match(name):
        errs.append(
            errors.invalid(
                path,
                key,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                "or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            )
        )
    return errs


def validate_meta(meta: Any) -> list[FieldError]:
    """Labels and annotations: the ObjectMeta checks clients trip over most."""
    if not isinstance(meta, dict):
        return [errors.invalid("metadata", "", "must be an object")]
    errs: list[FieldError] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [errors.invalid("metadata.labels", "", "must be a map of strings")]
    for key, value in labels.items():
        errs += _qualified_name_errors("metadata.labels", key)
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errs.append(
                errors.invalid(
                    "metadata.labels",
                    value,
                    "a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
                    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                )
            )
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, dict):
        for key, value in annotations.items():
            errs += _qualified_name_errors("metadata.annotations", key.lower())
            if not isinstance(value, str):
                errs.append(errors.invalid("metadata.annotations", value, "must be a string"))
        size = sum(len(k) + len(str(v)) for k, v in annotations.items())
        if size > 256 * 1024:
            errs.append(
                errors.FieldError(
                    "FieldValueTooLong",
                    "metadata.annotations",
                    "",
                    "may not be more than 262144 bytes",
                )
            )
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        errs.append(
            errors.invalid("metadata.finalizers", json.dumps(finalizers), "must be strings")
        )
    return errs


def without(obj: Body, *keys: str) -> Body:
    """The object minus some top-level keys, for comparing what a write changed."""
    return {k: v for k, v in obj.items() if k not in keys}
