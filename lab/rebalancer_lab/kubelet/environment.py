"""What a container's process gets: its command line, environment and mounted files.

Images are not run; the lab runs the container's `command` + `args` on this machine:

- an `argv[0]` named `python`, `python3` or `python3.N` (any directory) is the lab's Python
  (the project's venv), and `rebalancer` is `python -m rebalancer`; anything else is looked up
  on PATH. A container without `command` uses its image's entrypoint from the `images` map
  (by default the project's image runs `python -m rebalancer`).
- the environment is a few of the lab's own variables (PATH, HOME, LANG, TMPDIR, PYTHONPATH,
  VIRTUAL_ENV), then `HOSTNAME` (the pod's name, as container runtimes set it), `KUBECONFIG`
  (the lab's API: a pod's way in, where a cluster would mount a service account),
  `REBALANCER_LAB_ROOT` and `PYTHONUNBUFFERED=1`, then the container's `envFrom` and `env`,
  with `$(VAR)` references expanded as kube does.
- volumes live under the pod's directory: `<pod dir>/volumes/<volume>` (ConfigMap, Secret,
  downward API and projected volumes are written there as files when the pod starts;
  emptyDir is an empty directory; a persistentVolumeClaim is `<state>/claims/<ns>/<claim>`
  and outlives the pod; hostPath is the host's path). Each container has a root,
  `REBALANCER_LAB_ROOT` = `<pod dir>/rootfs/<container>`, in which every `volumeMounts`
  entry is a symlink at its `mountPath` (to the volume, or its `subPath`).
- paths rule: in the command, args and env values, a mount path that starts a word (at the
  start, after whitespace, `=`, `:` or `,`) and ends one (at the end, before `/`, whitespace,
  `:` or `,`) becomes `$REBALANCER_LAB_ROOT` + that path, so `--config=/etc/app/app.yaml`
  reads the mounted file. A program that builds paths itself should prefix them with
  `REBALANCER_LAB_ROOT`.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..kube.requesting import Api, resource_path

Body = dict[str, Any]

# The project's images (Dockerfile, agent.Dockerfile, learning.Dockerfile) all run `rebalancer`;
# the example consumer's (examples/consumer/Dockerfile) runs `rebalancer-example-consumer`.
DEFAULT_IMAGES: Mapping[str, Sequence[str]] = {
    "ghcr.io/rebalancer-dev/rebalancer": ("python", "-m", "rebalancer"),
    "ghcr.io/rebalancer-dev/rebalancer-agent": ("python", "-m", "rebalancer"),
    "ghcr.io/rebalancer-dev/rebalancer-learning": ("python", "-m", "rebalancer"),
    "ghcr.io/rebalancer-dev/rebalancer-example-consumer": (
        "python",
        "-m",
        "rebalancer_example_consumer",
    ),
}
INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "PYTHONPATH", "VIRTUAL_ENV")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class ConfigMissing(Exception):
    """A referenced ConfigMap, Secret or key is missing: kube's CreateContainerConfigError."""


@dataclass(frozen=True)
class PodDirectory:
    root: Path

    def volume(self, name: str) -> Path:
        return self.root / "volumes" / name

    def rootfs(self, container: str) -> Path:
        return self.root / "rootfs" / container


# The downward API ---------------------------------------------------------------------------


def field_value(pod: Body, path: str) -> str:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    match = _FIELD.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
        "status.podIPs": ",".join(ip.get("ip", "") for ip in status.get("podIPs") or ()),
        "status.hostIPs": ",".join(ip.get("ip", "") for ip in status.get("hostIPs") or ()),
    }
    if path not in simple:
        raise ConfigMissing(f"unsupported fieldRef fieldPath {path!r}")
    return str(simple[path] or "")


def expand(text: str, env: Mapping[str, str]) -> str:
    """kube's $(VAR) expansion: known names are replaced, `$$` escapes, the rest is kept."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    out.append(env[name] if name in env else text[i : end + 1])
                    i = end + 1
                    continue
        out.append(char)
        i += 1
    return "".join(out)


# ConfigMaps and Secrets ---------------------------------------------------------------------


class Sources:
    """ConfigMaps and Secrets of one namespace, fetched once per container start."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self._cache: dict[tuple[str, str], Body | None] = {}

    def _get(self, plural: str, name: str) -> Body | None:
        key = (plural, name)
        if key not in self._cache:
            self._cache[key] = self.api.get(resource_path("v1", plural, self.namespace, name))
        return self._cache[key]

    def data(self, kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
        """A ConfigMap's or Secret's keys as bytes; None if optional and missing."""
        plural = "configmaps" if kind == "ConfigMap" else "secrets"
        obj = self._get(plural, name)
        if obj is None:
            if optional:
                return None
            raise ConfigMissing(f'{kind.lower()} "{name}" not found')
        values: dict[str, bytes] = {}
        if kind == "ConfigMap":
            for key, value in (obj.get("data") or {}).items():
                values[key] = str(value).encode()
            for key, value in (obj.get("binaryData") or {}).items():
                values[key] = base64.b64decode(value)
        else:
            for key, value in (obj.get("data") or {}).items():
                values[key] = base64.b64decode(value)
        return values

    def key(self, kind: str, ref: Body) -> str | None:
        name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
        optional = bool(ref.get("optional"))
        values = self.data(kind, name, optional)
        if values is None:
            return None
        if key not in values:
            if optional:
                return None
            raise ConfigMissing(f"couldn't find key {key} in {kind} {self.namespace}/{name}")
        return values[key].decode(errors="replace")


def container_env(api: Api, pod: Body, container: Body) -> dict[str, str]:
    """The container's own variables: envFrom, then env in order, as the kubelet builds them."""
    sources = Sources(api, str(pod["metadata"].get("namespace") or "default"))
    env: dict[str, str] = {}
    for source in container.get("envFrom") or ():
        prefix = str(source.get("prefix") or "")
        for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(field)
            if ref is None:
                continue
            values = sources.data(kind, str(ref.get("name")), bool(ref.get("optional")))
            for key, raw in (values or {}).items():
                env[prefix + key] = raw.decode(errors="replace")
    for variable in container.get("env") or ():
        name = str(variable.get("name"))
        if "value" in variable:
            env[name] = expand(str(variable.get("value") or ""), env)
            continue
        source = variable.get("valueFrom") or {}
        value: str | None
        if "fieldRef" in source:
            value = field_value(pod, str(source["fieldRef"].get("fieldPath")))
        elif "resourceFieldRef" in source:
            value = _resource_field(container, source["resourceFieldRef"])
        elif "configMapKeyRef" in source:
            value = sources.key("ConfigMap", source["configMapKeyRef"])
        elif "secretKeyRef" in source:
            value = sources.key("Secret", source["secretKeyRef"])
        else:
            value = ""
        if value is not None:
            env[name] = value
    return env


def _resource_field(container: Body, ref: Body) -> str:
    """limits.* and requests.* as written in the spec, without divisor arithmetic; an unset
    CPU limit is the machine's CPU count, as kube falls back to the node's allocatable."""
    section, _, name = str(ref.get("resource", "")).partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    if value is not None:
        return str(value)
    if section == "limits" and name == "cpu":
        return str(os.cpu_count() or 1)
    return "0"


# Volumes and mounts -------------------------------------------------------------------------


def prepare_volumes(api: Api, pod: Body, directory: PodDirectory, claims: Path) -> dict[str, Path]:
    """Materialize the pod's volumes; returns each volume's directory (or file host path)."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    sources = Sources(api, namespace)
    paths: dict[str, Path] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        name = str(volume.get("name"))
        target = directory.volume(name)
        if "hostPath" in volume:
            host = Path(str(volume["hostPath"].get("path")))
            if volume["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                host.mkdir(parents=True, exist_ok=True)
            paths[name] = host
            continue
        if "persistentVolumeClaim" in volume:
            claim = claims / namespace / str(volume["persistentVolumeClaim"].get("claimName"))
            claim.mkdir(parents=True, exist_ok=True)
            paths[name] = claim
            continue
        if target.exists() and "emptyDir" in volume:
            paths[name] = target  # kept across container restarts, as emptyDir is
            continue
        files = _volume_files(pod, volume, sources)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True, exist_ok=True)
        for relative, (content, mode) in files.items():
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(mode)
        paths[name] = target
    return paths


def refresh_downward_volumes(pod: Body, directory: PodDirectory) -> None:
    """Rewrite downward API files after the pod's labels or annotations changed.

    A kubelet does this on its next sync (within a minute or so); the lab does it at once.
    Each file is replaced atomically, so a reader sees the old or the new content.
    """
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if "downwardAPI" not in volume:
            continue
        target = directory.volume(str(volume.get("name")))
        if not target.is_dir():
            continue
        for relative, (content, mode) in _downward_files(pod, volume["downwardAPI"]).items():
            path = target / relative
            fresh = path.with_name(f".{path.name}.new")
            fresh.write_bytes(content)
            fresh.chmod(mode)
            fresh.replace(path)


def _volume_files(pod: Body, volume: Body, sources: Sources) -> dict[str, tuple[bytes, int]]:
    if "configMap" in volume or "secret" in volume:
        return _object_files(volume, sources)
    if "downwardAPI" in volume:
        return _downward_files(pod, volume["downwardAPI"])
    if "projected" in volume:
        files: dict[str, tuple[bytes, int]] = {}
        mode = int(volume["projected"].get("defaultMode") or 0o644)
        for source in volume["projected"].get("sources") or ():
            if "configMap" in source:
                files.update(
                    _object_files(
                        {"configMap": {"defaultMode": mode, **source["configMap"]}}, sources
                    )
                )
            elif "secret" in source:
                files.update(
                    _object_files({"secret": {"defaultMode": mode, **source["secret"]}}, sources)
                )
            elif "downwardAPI" in source:
                files.update(_downward_files(pod, source["downwardAPI"]))
        return files
    return {}  # emptyDir and anything the lab does not emulate: an empty directory


def _object_files(volume: Body, sources: Sources) -> dict[str, tuple[bytes, int]]:
    if "configMap" in volume:
        spec, kind, name = volume["configMap"], "ConfigMap", volume["configMap"].get("name")
    else:
        spec, kind, name = volume["secret"], "Secret", volume["secret"].get("secretName")
        name = name or spec.get("name")
    mode = int(spec.get("defaultMode") or 0o644)
    values = sources.data(kind, str(name), bool(spec.get("optional")))
    if values is None:
        return {}
    items = spec.get("items")
    if not items:
        return {key: (value, mode) for key, value in values.items()}
    files: dict[str, tuple[bytes, int]] = {}
    for item in items:
        key = str(item.get("key"))
        if key not in values:
            if spec.get("optional"):
                continue
            raise ConfigMissing(f"configmap/secret {name} has no key {key}")
        files[str(item.get("path") or key)] = (values[key], int(item.get("mode") or mode))
    return files


def _downward_files(pod: Body, spec: Body) -> dict[str, tuple[bytes, int]]:
    mode = int(spec.get("defaultMode") or 0o644)
    files: dict[str, tuple[bytes, int]] = {}
    for item in spec.get("items") or ():
        if "fieldRef" in item:
            value = field_value(pod, str(item["fieldRef"].get("fieldPath")))
        else:
            value = ""
        files[str(item.get("path"))] = (value.encode(), int(item.get("mode") or mode))
    return files


def mount(container: Body, volumes: Mapping[str, Path], rootfs: Path) -> list[str]:
    """Link each volumeMount into the container's root; returns the mount paths."""
    if rootfs.exists():
        shutil.rmtree(rootfs)
    rootfs.mkdir(parents=True)
    mounted: list[str] = []
    for entry in container.get("volumeMounts") or ():
        name = str(entry.get("name"))
        if name not in volumes:
            raise ConfigMissing(f"volume {name!r} mounted by container is not in the pod spec")
        source = volumes[name]
        sub = str(entry.get("subPath") or "")
        if sub:
            source = source / sub
            if not source.exists():
                source.mkdir(parents=True)
        mount_path = str(entry.get("mountPath") or "").rstrip("/") or "/"
        link = rootfs / mount_path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source)
        mounted.append(mount_path)
    return mounted


def rewrite_paths(text: str, mount_paths: Sequence[str], rootfs: Path) -> str:
    if not mount_paths:
        return text
    # One pass, longest path first: a rewritten path starts with the root, which may itself
    # start with a mount path (a root under /tmp and a volume at /tmp), and must not be
    # rewritten again.
    ordered = sorted(set(mount_paths), key=len, reverse=True)
    pattern = r"(^|(?<=[\s=:,]))(" + "|".join(map(re.escape, ordered)) + r")(?=$|[/\s:,])"
    return re.sub(pattern, lambda match: str(rootfs) + match.group(2), text)


# The command line ---------------------------------------------------------------------------


def command_line(
    container: Body,
    env: Mapping[str, str],
    python: str,
    images: Mapping[str, Sequence[str]] = DEFAULT_IMAGES,
    rewrite: Callable[[str], str] = str,
) -> list[str]:
    """The container's argv; `rewrite` maps paths in the container's own command and args (its
    mounts), never the interpreter the lab runs them with: a project checked out under /tmp
    must not have its Python rewritten into a pod's emptyDir mounted at /tmp."""
    command = [rewrite(expand(str(part), env)) for part in container.get("command") or ()]
    args = [rewrite(expand(str(part), env)) for part in container.get("args") or ()]
    if not command:
        image = str(container.get("image") or "")
        entrypoint = images.get(image) or images.get(_repository(image))
        if entrypoint is None:
            raise ConfigMissing(
                f"the lab runs no images: give container {container.get('name')!r} a command "
                f"(or map image {image!r} to an entrypoint)"
            )
        command = list(entrypoint)
    return [*map_program(command, python), *args]


def map_program(argv: Sequence[str], python: str) -> list[str]:
    if not argv:
        return []
    program = os.path.basename(argv[0])
    if _PYTHON.match(program):
        return [python, *argv[1:]]
    if program == "rebalancer":
        return [python, "-m", "rebalancer", *argv[1:]]
    return list(argv)


def _repository(image: str) -> str:
    without_digest = image.split("@", 1)[0]
    head, _, tail = without_digest.rpartition(":")
    return head if head and "/" not in tail else without_digest


def reads_pod_metadata(container: Mapping[str, Any]) -> bool:
    """Whether the container's environment takes a label or an annotation of its pod, which
    may have been written moments before the container starts (an identity slot written with
    the gate's open)."""
    for variable in container.get("env") or ():
        path = str(((variable.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath"))
        if path.startswith(("metadata.annotations", "metadata.labels")):
            return True
    return False


def base_env(pod: Body, kubeconfig: Path | None, rootfs: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    env["HOSTNAME"] = str(pod["metadata"].get("name"))
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    env["REBALANCER_LAB_ROOT"] = str(rootfs)
    env["PYTHONUNBUFFERED"] = "1"
    return env
