"""Decoding of the protobuf bodies kubectl's typed commands send (`kubectl create configmap`).

kubectl's generated clients (create configmap/secret/namespace/serviceaccount/deployment/
service, run) POST `application/vnd.kubernetes.protobuf` and never fall back to JSON. This
decodes kube's envelope and the messages those commands produce, from field numbers taken
from k8s.io/api's generated.proto. Fields outside these tables are skipped (logged), so an
unusual typed request may lose fields: `kubectl create -f` and `apply` send JSON and are exact.
"""

from __future__ import annotations

import base64
import logging
import struct
from datetime import UTC, datetime
from typing import Any

from . import errors

Body = dict[str, Any]
logger = logging.getLogger(__name__)

MAGIC = b"k8s\x00"

# message -> field number -> (json name, kind). Kinds: str, int, bool, bytes, a message name,
# "map:<value kind>", a "[]" suffix for repeated fields, "skip" for fields kube ignores on
# create (status). Go writes zero values of plain fields and JSON omits them, so zeros are
# dropped, except for kinds marked "*" (Go pointers: an explicit replicas=0 must survive).
Schema = dict[int, tuple[str, str]]
MESSAGES: dict[str, Schema] = {
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "bytes"), 3: ("contentEncoding", "str"),
                4: ("contentType", "str")},
    "TypeMeta": {1: ("apiVersion", "str"), 2: ("kind", "str")},
    "ObjectMeta": {
        1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"),
        4: ("selfLink", "str"), 5: ("uid", "str"), 6: ("resourceVersion", "str"),
        7: ("generation", "int"), 8: ("creationTimestamp", "Time"),
        11: ("labels", "map:str"), 12: ("annotations", "map:str"),
        13: ("ownerReferences", "OwnerReference[]"), 14: ("finalizers", "str[]"),
    },
    "OwnerReference": {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"),
                       5: ("apiVersion", "str"), 6: ("controller", "bool*"),
                       7: ("blockOwnerDeletion", "bool*")},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:str"),
                  3: ("binaryData", "map:bytes"), 4: ("immutable", "bool*")},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:bytes"), 3: ("type", "str"),
               4: ("stringData", "map:str"), 5: ("immutable", "bool*")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec"),
                  3: ("status", "skip")},
    "NamespaceSpec": {1: ("finalizers", "str[]")},
    "ServiceAccount": {1: ("metadata", "ObjectMeta"), 2: ("secrets", "ObjectReference[]"),
                       3: ("imagePullSecrets", "LocalObjectReference[]"),
                       4: ("automountServiceAccountToken", "bool*")},
    "ObjectReference": {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"),
                        4: ("uid", "str"), 5: ("apiVersion", "str"),
                        6: ("resourceVersion", "str"), 7: ("fieldPath", "str")},
    "LocalObjectReference": {1: ("name", "str")},
    "Service": {1: ("metadata", "ObjectMeta"), 2: ("spec", "ServiceSpec"), 3: ("status", "skip")},
    "ServiceSpec": {1: ("ports", "ServicePort[]"), 2: ("selector", "map:str"),
                    3: ("clusterIP", "str"), 4: ("type", "str"), 5: ("externalIPs", "str[]"),
                    7: ("sessionAffinity", "str"), 8: ("loadBalancerIP", "str"),
                    10: ("externalName", "str"), 11: ("externalTrafficPolicy", "str"),
                    12: ("healthCheckNodePort", "int"), 13: ("publishNotReadyAddresses", "bool")},
    "ServicePort": {1: ("name", "str"), 2: ("protocol", "str"), 3: ("port", "int"),
                    4: ("targetPort", "IntOrString"), 5: ("nodePort", "int")},
    "IntOrString": {1: ("type", "int"), 2: ("intVal", "int"), 3: ("strVal", "str")},
    "Deployment": {1: ("metadata", "ObjectMeta"), 2: ("spec", "DeploymentSpec"),
                   3: ("status", "skip")},
    "DeploymentSpec": {1: ("replicas", "int*"), 2: ("selector", "LabelSelector"),
                       3: ("template", "PodTemplateSpec"), 4: ("strategy", "DeploymentStrategy"),
                       5: ("minReadySeconds", "int"), 6: ("revisionHistoryLimit", "int*"),
                       7: ("paused", "bool"), 9: ("progressDeadlineSeconds", "int*")},
    "DeploymentStrategy": {1: ("type", "str")},
    "LabelSelector": {1: ("matchLabels", "map:str"),
                      2: ("matchExpressions", "LabelSelectorRequirement[]")},
    "LabelSelectorRequirement": {1: ("key", "str"), 2: ("operator", "str"), 3: ("values", "str[]")},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "Pod": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec"), 3: ("status", "skip")},
    "PodSpec": {2: ("containers", "Container[]"), 3: ("restartPolicy", "str"),
                4: ("terminationGracePeriodSeconds", "int*"), 6: ("dnsPolicy", "str"),
                7: ("nodeSelector", "map:str"), 8: ("serviceAccountName", "str"),
                9: ("serviceAccount", "str"), 10: ("nodeName", "str"),
                11: ("hostNetwork", "bool"), 12: ("hostPID", "bool"), 13: ("hostIPC", "bool"),
                16: ("hostname", "str"), 17: ("subdomain", "str"),
                24: ("priorityClassName", "str"),
                15: ("imagePullSecrets", "LocalObjectReference[]"),
                19: ("schedulerName", "str"), 20: ("initContainers", "Container[]")},
    "Container": {1: ("name", "str"), 2: ("image", "str"), 3: ("command", "str[]"),
                  4: ("args", "str[]"), 5: ("workingDir", "str"), 6: ("ports", "ContainerPort[]"),
                  7: ("env", "EnvVar[]"), 8: ("resources", "ResourceRequirements"),
                  13: ("terminationMessagePath", "str"), 14: ("imagePullPolicy", "str"),
                  16: ("stdin", "bool"), 17: ("stdinOnce", "bool"), 18: ("tty", "bool"),
                  20: ("terminationMessagePolicy", "str")},
    "ContainerPort": {1: ("name", "str"), 2: ("hostPort", "int"), 3: ("containerPort", "int"),
                      4: ("protocol", "str"), 5: ("hostIP", "str")},
    "EnvVar": {1: ("name", "str"), 2: ("value", "str")},
    "ResourceRequirements": {1: ("limits", "map:Quantity"), 2: ("requests", "map:Quantity")},
    "Quantity": {1: ("string", "str")},
    "Time": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta"),
                                2: ("spec", "SelfSubjectAccessReviewSpec"), 3: ("status", "skip")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "ResourceAttributes": {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"),
                           4: ("version", "str"), 5: ("resource", "str"),
                           6: ("subresource", "str"), 7: ("name", "str"),
                           8: ("fieldSelector", "skip"), 9: ("labelSelector", "skip")},
    "NonResourceAttributes": {1: ("path", "str"), 2: ("verb", "str")},
    "SelfSubjectReview": {1: ("metadata", "ObjectMeta"), 2: ("status", "skip")},
    "SelfSubjectRulesReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "RulesReviewSpec"),
                               3: ("status", "skip")},
    "RulesReviewSpec": {1: ("namespace", "str")},
}  # fmt: skip

_TOP_LEVEL = {
    "ConfigMap", "Secret", "Namespace", "ServiceAccount", "Service", "Deployment", "Pod",
    "SelfSubjectAccessReview", "SelfSubjectReview", "SelfSubjectRulesReview",
}  # fmt: skip


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    fields, pos = [], 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.append((number, wire, value))
    return fields


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: Any) -> Any:
    kind = kind.rstrip("*")
    if kind == "str":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "int":
        return _signed(value) if isinstance(value, int) else struct.unpack("<q", value)[0]
    if kind == "bool":
        return bool(value)
    return decode_message(kind, bytes(value))


def _special(kind: str, obj: Body) -> Any:
    if kind == "IntOrString":
        return obj.get("strVal", "") if obj.get("type") == 1 else obj.get("intVal", 0)
    if kind == "Quantity":
        return obj.get("string", "")
    if kind == "Time":
        seconds = obj.get("seconds", 0)
        return (
            datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else None
        )
    return obj


def _empty(kind: str, value: Any) -> bool:
    return value is None or (not kind.endswith("*") and value in ("", 0, False) and kind != "bytes")


def decode_message(name: str, data: bytes) -> Any:
    schema = MESSAGES[name]
    obj: Body = {}
    for number, _, value in _fields(data):
        if number not in schema:
            logger.warning("protobuf %s field %d is not decoded by the emulator", name, number)
            continue
        key, kind = schema[number]
        if kind == "skip":
            continue
        if kind.startswith("map:"):
            entry = {n: v for n, _, v in _fields(bytes(value))}
            obj.setdefault(key, {})[bytes(entry.get(1, b"")).decode()] = _scalar(
                kind[4:], entry.get(2, b"")
            )
        elif kind.endswith("[]"):
            obj.setdefault(key, []).append(_scalar(kind[:-2], value))
        else:
            item = _scalar(kind, value)
            if not _empty(kind, item):
                obj[key] = item
    return _special(name, obj)


def decode(data: bytes) -> Body:
    """A kube protobuf request body as the equivalent JSON object."""
    if not data.startswith(MAGIC):
        raise errors.bad_request("protobuf body without the k8s envelope")
    try:
        unknown = decode_message("Unknown", data[len(MAGIC) :])
        type_meta = unknown.get("typeMeta", {})
        kind = type_meta.get("kind", "")
        if kind not in _TOP_LEVEL:
            raise errors.unsupported_media_type(["application/json", "application/yaml"])
        raw = base64.b64decode(unknown.get("raw", ""))
        obj: Body = decode_message(kind, raw)
    except (ValueError, KeyError, UnicodeDecodeError, struct.error) as exc:
        raise errors.bad_request(f"unable to decode the protobuf body: {exc}") from exc
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
