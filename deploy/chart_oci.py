"""A packaged Helm chart in its OCI form: an OCI image layout, as a tar, holding the chart as
Helm stores it in a registry (HIP-0006: a config of the chart's metadata as JSON and one layer,
the chart's .tgz, with Helm's media types), tagged with the chart's version.

Helm 3.17 writes this form only into a registry (`helm push`); this builds it offline, so a
release carries it and any OCI tool can copy it to a registry. The chart layer is the .tgz byte
for byte and the config the same metadata as `helm push` writes (serialised with sorted keys,
and no creation time, so the same chart gives the same archive):
`skopeo copy oci-archive:rebalancer-0.1.0.oci.tar docker://REGISTRY/charts/rebalancer:0.1.0`,
after which `helm pull oci://REGISTRY/charts/rebalancer --version 0.1.0` gets the chart.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
CHART_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class Blob:
    media_type: str
    content: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()

    def descriptor(self, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": len(self.content),
        }
        if annotations:
            found["annotations"] = annotations
        return found


def _json(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def chart_metadata(packaged: bytes) -> dict[str, Any]:
    """Chart.yaml of a packaged chart (<name>/Chart.yaml inside the .tgz)."""
    with tarfile.open(fileobj=io.BytesIO(packaged), mode="r:gz") as archive:
        names = [n for n in archive.getnames() if n.count("/") == 1 and n.endswith("/Chart.yaml")]
        if len(names) != 1:
            raise ValueError(f"a packaged chart holds one <name>/Chart.yaml, found {names}")
        member = archive.extractfile(names[0])
        if member is None:
            raise ValueError(f"{names[0]} in the package is not a file")
        loaded = yaml.safe_load(member.read())
    if not isinstance(loaded, dict) or not loaded.get("name") or not loaded.get("version"):
        raise ValueError("the packaged Chart.yaml has no name or version")
    return loaded


def manifest_blobs(packaged: bytes) -> tuple[Blob, Blob, Blob]:
    """(config, chart layer, manifest) of the chart's OCI artifact."""
    metadata = chart_metadata(packaged)
    config = Blob(CONFIG_MEDIA_TYPE, _json(metadata))
    layer = Blob(CHART_MEDIA_TYPE, packaged)
    # As helm push: the chart's own annotations, then the OCI ones.
    annotations = {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}
    annotations |= {
        "org.opencontainers.image.title": str(metadata["name"]),
        "org.opencontainers.image.version": str(metadata["version"]),
    }
    if metadata.get("description"):
        annotations["org.opencontainers.image.description"] = str(metadata["description"])
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": config.descriptor(),
        "layers": [layer.descriptor()],
        "annotations": annotations,
    }
    return config, layer, Blob(MANIFEST_MEDIA_TYPE, _json(manifest))


def _add(archive: tarfile.TarFile, name: str, content: bytes) -> None:
    # Fixed owner, mode and time: the same chart gives the same archive, and the same checksum.
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(content), 0o644, 0
    archive.addfile(info, io.BytesIO(content))


def write_oci_archive(packaged_chart: Path, destination: Path) -> Path:
    """Write the chart's OCI layout tar to `destination`, tagged with the chart's version."""
    packaged = packaged_chart.read_bytes()
    config, layer, manifest = manifest_blobs(packaged)
    version = str(chart_metadata(packaged)["version"])
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest.descriptor({REF_NAME: version})],
    }
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(destination, "w", format=tarfile.PAX_FORMAT) as archive:
        _add(archive, "oci-layout", _json({"imageLayoutVersion": "1.0.0"}))
        _add(archive, "index.json", _json(index))
        for blob in (config, layer, manifest):
            _add(archive, f"blobs/sha256/{blob.digest.removeprefix('sha256:')}", blob.content)
    return destination
