"""`make release` (deploy/release.py): the packaged chart and its OCI form, the Python sdists and
wheels, SHA256SUMS that `sha256sum -c` accepts, and a clear skip (or failure, when asked) of
the image archives where buildah is missing.

The OCI form is checked here as a layout (digests, media types, the chart inside); it was also
copied into a registry with skopeo and pulled back by `helm pull oci://` (docs/release.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from rebalancer import __version__

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "deploy"))

import chart_oci  # noqa: E402
import release  # noqa: E402


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def blob(files: dict[str, bytes], digest: str) -> bytes:
    content = files[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(content).hexdigest() == digest
    return content


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "release.py"), "--dist", str(out), "--skip-images"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_checksums_cover_every_artifact_and_verify(dist: Path) -> None:
    listed = [line.split("  ", 1)[1] for line in (dist / "SHA256SUMS").read_text().splitlines()]
    assert sorted(listed) == [
        f"charts/rebalancer-{__version__}.oci.tar",
        f"charts/rebalancer-{__version__}.tgz",
        f"python/rebalancer-{__version__}-py3-none-any.whl",
        f"python/rebalancer-{__version__}.tar.gz",
        f"python/rebalancer_example_consumer-{__version__}-py3-none-any.whl",
        f"python/rebalancer_example_consumer-{__version__}.tar.gz",
    ]
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A changed artifact fails the check (put back after: the other tests read it).
    artifact = dist / listed[0]
    original = artifact.read_bytes()
    artifact.write_bytes(original + b"\0")
    try:
        tampered = subprocess.run(
            ["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, check=False
        )
    finally:
        artifact.write_bytes(original)
    assert tampered.returncode != 0


def test_the_chart_oci_form_is_the_packaged_chart_with_helms_media_types(dist: Path) -> None:
    packaged = (dist / "charts" / f"rebalancer-{__version__}.tgz").read_bytes()
    archive = dist / "charts" / f"rebalancer-{__version__}.oci.tar"
    files = members(archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    [entry] = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"][chart_oci.REF_NAME] == __version__
    manifest: dict[str, Any] = json.loads(blob(files, entry["digest"]))
    assert manifest["mediaType"] == entry["mediaType"] == chart_oci.MANIFEST_MEDIA_TYPE
    assert manifest["config"]["mediaType"] == "application/vnd.cncf.helm.config.v1+json"
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
    assert blob(files, layer["digest"]) == packaged
    config = json.loads(blob(files, manifest["config"]["digest"]))
    chart = yaml.safe_load((ROOT / "charts" / "rebalancer" / "Chart.yaml").read_text())
    assert config == chart
    assert config["version"] == config["appVersion"] == __version__
    # The same chart gives the same archive (and checksum).
    again = chart_oci.write_oci_archive(
        dist / "charts" / f"rebalancer-{__version__}.tgz", dist / "again.tar"
    )
    assert again.read_bytes() == archive.read_bytes()


def test_a_package_without_chart_yaml_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("rebalancer/values.yaml")
        tar.addfile(info, io.BytesIO(b""))
    (tmp_path / "bad.tgz").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match=r"Chart\.yaml"):
        chart_oci.write_oci_archive(tmp_path / "bad.tgz", tmp_path / "bad.oci.tar")


def test_the_wheels_carry_the_version_and_the_example_needs_the_operator(dist: Path) -> None:
    wheel = dist / "python" / f"rebalancer_example_consumer-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    assert "rebalancer_example_consumer/app.py" in names
    assert not any(n.startswith(("rebalancer/", "rebalancer_lab/")) for n in names)
    assert f"Requires-Dist: rebalancer=={__version__}" in text
    with tarfile.open(dist / "python" / f"rebalancer-{__version__}.tar.gz") as sdist:
        assert f"rebalancer-{__version__}/LICENSE" in sdist.getnames()


def test_without_buildah_the_images_are_skipped_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no buildah
    assert release.build_images(tmp_path, __version__, [], required=False) == []
    said = capsys.readouterr().out
    assert "images: SKIPPED" in said and "buildah is not on the PATH" in said
    with pytest.raises(SystemExit, match="buildah is not on the PATH"):
        release.build_images(tmp_path, __version__, [], required=True)
