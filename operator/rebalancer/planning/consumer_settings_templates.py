"""Consumer settings in the forms consumers read: a ConfigMap, env vars and a pod-template patch.

The ConfigMap holds `consumer.properties`; the pod template mounts it and sets one variable per
property (by the policy's naming convention), the variable that points at the file, and, for
static members, `group.instance.id` from the pod's own name (downward API). The template also
carries a hash of all of it, so any settings change, even one only the file shows, is a
template change: the workload gets a new revision, which the rollout planner staggers instead
of every pod restarting at once. The mounted file of a running pod may change under it; the
consumers read it at start only, so the template revision is what decides which pods run what.

The patch is a JSON patch guarded by the workload's resourceVersion, and records the variables
the operator owns in an annotation, so a later patch removes exactly those and never a
variable the user set.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rebalancer.planning.consumer_settings import ResolvedSettings, env_variable
from rebalancer.structs.consumer_settings_policy import SettingsPolicy
from rebalancer.structs.problems import FieldProblem
from rebalancer.structs.specs import WorkloadKind

SETTINGS_HASH_ANNOTATION = "rebalancer.dev/settings-hash"
SETTINGS_ENV_ANNOTATION = "rebalancer.dev/settings-env"
# Lets the consumer say which settings revision it started with.
SETTINGS_HASH_VARIABLE = "REBALANCER_SETTINGS_HASH"
CONSUMER_GROUP_LABEL = "rebalancer.dev/consumergroup"
VOLUME = "rebalancer-settings"
PROPERTIES_FILE = "consumer.properties"
_MAX_NAME = 253
_SUFFIX = "-consumer-settings"

Body = dict[str, Any]


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None = None
    field_path: str | None = None  # downward API, instead of a value

    def manifest(self) -> Body:
        if self.field_path is not None:
            # apiVersion as the API server defaults it: what is read back then equals what was
            # written, and a second reconcile finds nothing to change.
            field = {"apiVersion": "v1", "fieldPath": self.field_path}
            return {"name": self.name, "valueFrom": {"fieldRef": field}}
        return {"name": self.name, "value": self.value or ""}


@dataclass(frozen=True)
class RenderedSettings:
    configmap: str
    properties_text: str
    env: tuple[EnvVar, ...]
    mount_path: str
    config_file_variable: str  # "" when none is set
    hash: str

    @property
    def file_path(self) -> str:
        return f"{self.mount_path}/{PROPERTIES_FILE}"


@dataclass(frozen=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str

    def manifest(self) -> Body:
        # No blockOwnerDeletion: it needs delete rights on the owner's finalizers, and nothing
        # has to wait for this ConfigMap to go.
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
        }


@dataclass(frozen=True)
class TemplatePatch:
    ops: tuple[Body, ...] = ()
    notes: tuple[str, ...] = ()
    problem: FieldProblem | None = None

    @property
    def changes(self) -> bool:
        return bool(self.ops)


def configmap_name(consumer_group: str) -> str:
    name = consumer_group + _SUFFIX
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(consumer_group.encode()).hexdigest()[:8]
    return f"{consumer_group[: _MAX_NAME - len(_SUFFIX) - 9]}-{digest}{_SUFFIX}"


def render_properties_text(properties: Sequence[tuple[str, str]], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key}={value}" for key, value in properties]
    return "\n".join(lines) + "\n"


def _escape_env(value: str) -> str:
    # Kubernetes expands $(NAME) in env values; $$ is its escape for a literal $.
    return value.replace("$(", "$$(")


def render_settings(
    consumer_group: str, policy: SettingsPolicy, resolved: ResolvedSettings
) -> RenderedSettings:
    name = configmap_name(consumer_group)
    header = (
        f"Written by Rebalancer for ConsumerGroup {consumer_group}; edits are overwritten.\n"
        f"Group protocol: {resolved.protocol.value}. Change spec.policy.settings instead."
    )
    text = render_properties_text(resolved.properties, header)
    env: list[EnvVar] = []
    prefix = policy.env.effective_prefix
    if prefix is not None:
        env += [
            EnvVar(env_variable(key, prefix), _escape_env(value))
            for key, value in resolved.properties
        ]
        if resolved.static_membership:
            env.append(
                EnvVar(
                    env_variable("group.instance.id", prefix),
                    field_path=resolved.instance_id_field,
                )
            )
    file_path = f"{policy.mount_path}/{PROPERTIES_FILE}"
    if policy.env.config_file_variable:
        env.append(EnvVar(policy.env.config_file_variable, file_path))
    digest = hashlib.sha256(
        json.dumps(
            {
                "file": text,
                "env": [var.manifest() for var in env],
                "mount": policy.mount_path,
                "configmap": name,
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:16]
    env.append(EnvVar(SETTINGS_HASH_VARIABLE, digest))
    return RenderedSettings(
        configmap=name,
        properties_text=text,
        env=tuple(env),
        mount_path=policy.mount_path,
        config_file_variable=policy.env.config_file_variable,
        hash=digest,
    )


def render_configmap(
    rendered: RenderedSettings, namespace: str, consumer_group: str, owner: OwnerRef | None
) -> Body:
    metadata: Body = {
        "name": rendered.configmap,
        "namespace": namespace,
        "labels": {
            "app.kubernetes.io/managed-by": "rebalancer",
            CONSUMER_GROUP_LABEL: consumer_group[:63],
        },
        "annotations": {SETTINGS_HASH_ANNOTATION: rendered.hash},
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner.manifest()]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {PROPERTIES_FILE: rendered.properties_text},
    }


def pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def find_container(template_spec: Mapping[str, Any], name: str | None) -> int | None:
    containers = template_spec.get("containers") or []
    if name is None:
        return 0 if containers else None
    for index, container in enumerate(containers):
        if container.get("name") == name:
            return index
    return None


def template_hash(workload: Mapping[str, Any]) -> str | None:
    """The settings hash the workload's pod template carries now."""
    annotations = (((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "annotations"
    ) or {}
    value = annotations.get(SETTINGS_HASH_ANNOTATION)
    return str(value) if value is not None else None


def container_env(workload: Mapping[str, Any], container: str | None, variable: str) -> str | None:
    """A plain env value of the consumer container (None if absent or from a reference)."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    index = find_container(spec, container)
    if index is None:
        return None
    for entry in spec["containers"][index].get("env") or []:
        if entry.get("name") == variable and "value" in entry:
            return str(entry["value"])
    return None


def _merged_env(
    current: Sequence[Body], rendered: RenderedSettings | None, owned: set[str]
) -> tuple[list[Body], list[str], list[str]]:
    """The container's env with ours in it, the names we own now, and notes."""
    notes: list[str] = []
    ours = {var.name: var.manifest() for var in (rendered.env if rendered else ())}
    variable = rendered.config_file_variable if rendered else ""
    user_names = {str(entry.get("name")) for entry in current} - owned
    if variable and variable in user_names:
        # The consumer may read its own base configuration from there; taking the variable
        # over would leave it without. The settings still arrive through the other variables.
        del ours[variable]
        notes.append(
            f"the container sets {variable} itself, so the settings file is mounted at "
            f"{rendered.file_path if rendered else ''} but not pointed to"
        )
    merged: list[Body] = []
    placed: set[str] = set()
    for entry in current:
        name = str(entry.get("name"))
        if name in ours:
            if name not in placed:
                merged.append(ours[name])
                placed.add(name)
        elif name not in owned:
            merged.append(entry)
    merged += [manifest for name, manifest in ours.items() if name not in placed]
    return merged, list(ours), notes


def _list_op(path: str, old: Sequence[Body] | None, new: list[Body]) -> list[Body]:
    if list(old or []) == new:
        return []
    if not new:
        return [{"op": "remove", "path": path}] if old is not None else []
    return [{"op": "add", "path": path, "value": new}]


def _annotation_ops(template: Mapping[str, Any], wanted: Mapping[str, str | None]) -> list[Body]:
    metadata = template.get("metadata")
    annotations = (metadata or {}).get("annotations")
    present = {key: value for key, value in wanted.items() if value is not None}
    if metadata is None:
        if not present:
            return []
        return [{"op": "add", "path": "/spec/template/metadata", "value": {"annotations": present}}]
    if annotations is None:
        if not present:
            return []
        return [{"op": "add", "path": "/spec/template/metadata/annotations", "value": present}]
    ops: list[Body] = []
    for key, value in wanted.items():
        path = f"/spec/template/metadata/annotations/{pointer(key)}"
        if value is None and key in annotations:
            ops.append({"op": "remove", "path": path})
        elif value is not None and annotations.get(key) != value:
            ops.append({"op": "add", "path": path, "value": value})
    return ops


def park_ops(workload: Mapping[str, Any]) -> list[Body]:
    """Hold a StatefulSet's pods at their revision until the planner releases them."""
    spec = workload.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("updateStrategy")
    if strategy is None:
        value = {"type": "RollingUpdate", "rollingUpdate": {"partition": replicas}}
        return [{"op": "add", "path": "/spec/updateStrategy", "value": value}]
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return []  # OnDelete: pods change only when the planner deletes them
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        return [
            {
                "op": "add",
                "path": "/spec/updateStrategy/rollingUpdate",
                "value": {"partition": replicas},
            }
        ]
    if int(rolling.get("partition") or 0) >= replicas:
        return []
    return [
        {"op": "add", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": replicas}
    ]


def render_template_patch(
    workload: Mapping[str, Any],
    rendered: RenderedSettings | None,
    *,
    kind: WorkloadKind,
    container: str | None = None,
    park: bool = False,
) -> TemplatePatch:
    """JSON-patch operations that put `rendered` into the workload's pod template.

    `rendered` None takes out everything a previous patch put in. `park` (StatefulSets whose
    rollouts the planner staggers) raises the update partition to the replica count in the
    same patch, so the controller cannot start replacing pods before the planner has planned
    the rollout; the planner parks it there itself whenever it is idle.
    """
    template = (workload.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    index = find_container(spec, container)
    if index is None:
        where = f"container {container!r}" if container else "a container"
        return TemplatePatch(
            problem=FieldProblem(
                "spec.workload.container",
                f"names {where} the pod template does not have",
                "name one of the template's containers, or omit it for the first",
            )
        )
    consumer = spec["containers"][index]
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    owned = {
        name for name in str(annotations.get(SETTINGS_ENV_ANNOTATION) or "").split(",") if name
    }
    env, names, notes = _merged_env(consumer.get("env") or [], rendered, owned)
    mounts, volumes, clash = _mounts_and_volumes(consumer, spec, rendered)
    if clash is not None:
        return TemplatePatch(problem=clash)
    base = f"/spec/template/spec/containers/{index}"
    ops = _list_op(f"{base}/env", consumer.get("env"), env)
    ops += _list_op(f"{base}/volumeMounts", consumer.get("volumeMounts"), mounts)
    ops += _list_op("/spec/template/spec/volumes", spec.get("volumes"), volumes)
    ops += _annotation_ops(
        template,
        {
            SETTINGS_HASH_ANNOTATION: rendered.hash if rendered else None,
            SETTINGS_ENV_ANNOTATION: ",".join(sorted(names)) if names else None,
        },
    )
    if not ops:
        return TemplatePatch(notes=tuple(notes))
    if park and kind is WorkloadKind.STATEFULSET:
        ops += park_ops(workload)
    version = (workload.get("metadata") or {}).get("resourceVersion")
    if version:
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": version})
    return TemplatePatch(ops=tuple(ops), notes=tuple(notes))


def _mounts_and_volumes(
    consumer: Mapping[str, Any], spec: Mapping[str, Any], rendered: RenderedSettings | None
) -> tuple[list[Body], list[Body], FieldProblem | None]:
    """The container's volume mounts and the pod's volumes with the settings' ConfigMap volume
    put in (or taken out for `rendered` None), and a mount path another volume holds."""
    mounts = [m for m in consumer.get("volumeMounts") or [] if m.get("name") != VOLUME]
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != VOLUME]
    if rendered is not None:
        clash = next((m for m in mounts if m.get("mountPath") == rendered.mount_path), None)
        if clash is not None:
            problem = FieldProblem(
                "spec.policy.settings.mountPath",
                f"({rendered.mount_path}) is where the container already mounts volume "
                f"{clash.get('name')!r}",
                "choose another mountPath",
            )
            return mounts, volumes, problem
        mount = {"name": VOLUME, "mountPath": rendered.mount_path, "readOnly": True}
        mounts = _replace_or_append(consumer.get("volumeMounts") or [], mount)
        # optional: a ConsumerGroup deleted (and its ConfigMap collected with it) must not
        # keep the consumers' pods from starting; the env vars still carry the settings.
        # defaultMode as the API server would default it, so a re-read template compares equal.
        source = {"name": rendered.configmap, "optional": True, "defaultMode": 0o644}
        volume = {"name": VOLUME, "configMap": source}
        volumes = _replace_or_append(spec.get("volumes") or [], volume)
    return mounts, volumes, None


def _replace_or_append(items: Sequence[Body], item: Body) -> list[Body]:
    result = [copy.deepcopy(existing) for existing in items]
    for position, existing in enumerate(result):
        if existing.get("name") == item["name"]:
            result[position] = item
            return result
    result.append(item)
    return result
