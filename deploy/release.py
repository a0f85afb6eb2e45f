"""Build a release's artifacts into dist/ (`make release`; docs/release.md).

- dist/charts/: the packaged chart (`helm lint --strict`, `helm package`, a repository
  index.yaml: deploy/package_chart.py) and its OCI form, rebalancer-<version>.oci.tar
  (deploy/chart_oci.py);
- dist/python/: sdist and wheel of the operator's package (`rebalancer`) and of the example
  consumer (`rebalancer-example-consumer`), built by `python -m build` from copies of the tree;
- dist/images/: the four images as OCI archives (deploy/build_images.sh), when buildah is on
  the PATH; without it the step is skipped with a message saying so (--require-images fails);
- dist/SHA256SUMS over all of the above (`cd dist && sha256sum -c SHA256SUMS`).

The version is rebalancer.__version__, the one place it is written.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from chart_oci import write_oci_archive
from package_chart import package
from render import ROOT

IMAGE_ROLES = ("operator", "agent", "learning", "example-consumer")
# What a build context of the two Python distributions holds: the example's setup.py reads the
# version from ../../operator, as in the repository.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "operator", "examples/consumer")


def read_version() -> str:
    namespace: dict[str, object] = {}
    exec((ROOT / "operator" / "rebalancer" / "__init__.py").read_text("utf-8"), namespace)
    return str(namespace["__version__"])


def say(text: str) -> None:
    print(f"release: {text}", flush=True)


def _run(command: Sequence[str | Path], cwd: Path | None = None) -> None:
    shown = " ".join(shlex.quote(str(part)) for part in command)
    done = subprocess.run([str(part) for part in command], cwd=cwd, check=False)
    if done.returncode != 0:
        raise SystemExit(f"release: `{shown}` failed with exit code {done.returncode}")


def build_chart(dist: Path, version: str) -> list[Path]:
    packaged = package(dist / "charts")
    if packaged.name != f"rebalancer-{version}.tgz":
        raise SystemExit(f"release: the chart packaged as {packaged.name}, not version {version}")
    oci = write_oci_archive(packaged, dist / "charts" / f"rebalancer-{version}.oci.tar")
    say(f"chart: {packaged.relative_to(dist)}, {oci.relative_to(dist)} (OCI layout)")
    return [packaged, oci]


def _copy_sources(context: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in SOURCES:
        source, target = ROOT / name, context / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def build_python(dist: Path, version: str) -> list[Path]:
    out = dist / "python"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rebalancer-release-") as scratch:
        context = Path(scratch)
        _copy_sources(context)
        for project in (context, context / "examples" / "consumer"):
            _run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, project])
    wanted = [
        out / f"rebalancer-{version}.tar.gz",
        out / f"rebalancer-{version}-py3-none-any.whl",
        out / f"rebalancer_example_consumer-{version}.tar.gz",
        out / f"rebalancer_example_consumer-{version}-py3-none-any.whl",
    ]
    missing = [path.name for path in wanted if not path.is_file()]
    if missing:
        raise SystemExit(f"release: python -m build did not write {missing} into {out}")
    say("python: " + ", ".join(str(path.relative_to(dist)) for path in wanted))
    return wanted


def build_images(dist: Path, version: str, flags: Sequence[str], required: bool) -> list[Path]:
    if shutil.which("buildah") is None:
        message = (
            "buildah is not on the PATH: the image archives are NOT built and not in SHA256SUMS "
            "(install buildah, e.g. apt-get install buildah, and run make release again; "
            "docs/images.md)"
        )
        if required:
            raise SystemExit(f"release: {message}")
        say(f"images: SKIPPED, {message}")
        return []
    _run([ROOT / "deploy" / "build_images.sh", *flags, dist / "images"])
    archives = [dist / "images" / f"rebalancer-{role}-{version}.oci.tar" for role in IMAGE_ROLES]
    missing = [path.name for path in archives if not path.is_file()]
    if missing:
        raise SystemExit(f"release: deploy/build_images.sh did not write {missing}")
    return archives


def write_checksums(dist: Path, artifacts: Sequence[Path]) -> Path:
    """SHA256SUMS in sha256sum's format, paths relative to dist/."""
    lines = []
    for path in sorted(artifacts):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.relative_to(dist).as_posix()}\n")
    sums = dist / "SHA256SUMS"
    sums.write_text("".join(lines), encoding="utf-8")
    say(f"checksums: {sums.relative_to(dist)} over {len(lines)} files")
    return sums


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="default: dist/")
    parser.add_argument(
        "--image-flags", default="", help="passed to deploy/build_images.sh (--local-base)"
    )
    parser.add_argument(
        "--require-images", action="store_true", help="fail when buildah is missing"
    )
    parser.add_argument("--skip-images", action="store_true", help="build no image archives")
    args = parser.parse_args(argv)
    dist = args.dist.resolve()
    version = read_version()
    say(f"version {version} into {dist}")
    artifacts = build_chart(dist, version) + build_python(dist, version)
    if args.skip_images:
        say("images: skipped (--skip-images)")
    else:
        flags = shlex.split(args.image_flags)
        artifacts += build_images(dist, version, flags, args.require_images)
    write_checksums(dist, artifacts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
