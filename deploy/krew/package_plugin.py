"""Build the krew archive of `kubectl rebalancer` and check its manifest against it.

    python deploy/krew/package_plugin.py [DEST]     (default: dist/krew)

writes DEST/kubectl-rebalancer-v<version>.zip (the launcher `kubectl-rebalancer`, which runs
the plugin from a Python environment that has the rebalancer package) and a copy of
rebalancer.yaml beside it. The archive is byte-for-byte reproducible (stored, fixed times and
modes), so the manifest's sha256 is committed and this script fails, naming the values to
write, when the manifest's version, address or sha256 no longer match what it builds. Upload
the archive to the release named in the manifest's uri, then submit the manifest to a krew
index (or install from it directly: `kubectl krew install --manifest=rebalancer.yaml`).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import sys
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LAUNCHER = HERE / "kubectl-rebalancer"
MANIFEST = HERE / "rebalancer.yaml"
RELEASES = "https://github.com/rebalancer-dev/rebalancer/releases/download"
# Zip's earliest time: the archive does not depend on when or where it was built.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def version() -> str:
    text = (ROOT / "operator" / "rebalancer" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    if found is None:
        raise SystemExit("no __version__ in operator/rebalancer/__init__.py")
    return found.group(1)


def archive_name(release: str) -> str:
    return f"kubectl-rebalancer-v{release}.zip"


def archive_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        info = zipfile.ZipInfo(LAUNCHER.name, date_time=FIXED_TIME)
        info.external_attr = (0o100755 & 0xFFFF) << 16  # a regular file, executable
        info.create_system = 3  # Unix, so that the mode is honoured
        archive.writestr(info, LAUNCHER.read_bytes())
    return buffer.getvalue()


def expected() -> dict[str, str]:
    """What the manifest must say for the archive this tree builds."""
    release = version()
    return {
        "version": f"v{release}",
        "uri": f"{RELEASES}/v{release}/{archive_name(release)}",
        "sha256": hashlib.sha256(archive_bytes()).hexdigest(),
    }


def mismatches(manifest: dict[str, object]) -> list[str]:
    """Each field of the manifest that disagrees with this tree, with the value to write."""
    want = expected()
    spec = manifest.get("spec")
    found: list[str] = []
    if not isinstance(spec, dict):
        return ["spec: missing"]
    if spec.get("version") != want["version"]:
        found.append(f"spec.version: {spec.get('version')!r}, write {want['version']!r}")
    for index, platform in enumerate(spec.get("platforms") or []):
        for key in ("uri", "sha256"):
            if platform.get(key) != want[key]:
                found.append(
                    f"spec.platforms[{index}].{key}: {platform.get(key)!r}, write {want[key]!r}"
                )
    return found


def main(argv: list[str]) -> int:
    destination = Path(argv[0]) if argv else ROOT / "dist" / "krew"
    destination.mkdir(parents=True, exist_ok=True)
    archive = destination / archive_name(version())
    archive.write_bytes(archive_bytes())
    shutil.copyfile(MANIFEST, destination / MANIFEST.name)
    print(f"{archive}  sha256 {expected()['sha256']}")
    wrong = mismatches(yaml.safe_load(MANIFEST.read_text(encoding="utf-8")))
    for line in wrong:
        print(f"deploy/krew/rebalancer.yaml {line}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
