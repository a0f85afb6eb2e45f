"""The lab's Kubernetes control plane binary, built from source once per source and Go version.

`lab/controlplane/` is one Go program, `kube-lab`, that links kube-apiserver, the controller
manager, the scheduler and an embedded etcd from Kubernetes' own Go modules. Nothing is downloaded
but Go modules: the build is `go build` against the Go module proxy. A cold build is expensive
(minutes on two cores, see `lab/controlplane/README.md`), so the binary is kept in
`$XDG_CACHE_HOME/rebalancer/controlplane/<key>/kube-lab` (`~/.cache` by default), where the key
hashes everything the binary depends on: go.mod, go.sum, the Go sources and `go version`. Go's own
module and build caches make a rebuild after a source change take seconds rather than minutes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

Progress = Callable[[str], None]

BINARY_NAME = "kube-lab"
SOURCE_ENV = "REBALANCER_CONTROLPLANE_SRC"
# -buildvcs=false: the binary must not depend on (or fail over) the checkout's git state.
_BUILD_FLAGS = ("-trimpath", "-buildvcs=false")
# Kubernetes stamps its version at link time (hack/lib/version.sh); without it the API server
# says v0.0.0-master and clients that check it (helm's kubeVersion, kubectl's skew warning) balk.
_VERSION_PACKAGE = "k8s.io/component-base/version"
_REQUIREMENT = re.compile(r"^\s*k8s\.io/kubernetes\s+v(\d+)\.(\d+)\.(\d+)\S*\s*$", re.MULTILINE)
# Where Go's own tarball installs it; not always on PATH (e.g. in a non-login shell).
FALLBACK_GO = Path("/usr/local/go/bin/go")
_PROGRESS_EVERY_S = 15.0
_TAIL_LINES = 20


class ControlPlaneBuildError(RuntimeError):
    """Go is missing, the modules could not be downloaded, or the build failed."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rebalancer" / "controlplane"


def source_dir() -> Path:
    """`lab/controlplane/` of this package's checkout, or $REBALANCER_CONTROLPLANE_SRC."""
    configured = os.environ.get(SOURCE_ENV)
    if configured:
        folder = Path(configured)
        if not (folder / "go.mod").is_file():
            raise ControlPlaneBuildError(f"${SOURCE_ENV}={configured} has no go.mod")
        return folder
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "lab" / "controlplane"
        if (candidate / "go.mod").is_file():
            return candidate
    raise ControlPlaneBuildError(
        "lab/controlplane/go.mod was not found above "
        f"{Path(__file__).parent} (an installed package has no Go sources); "
        f"set ${SOURCE_ENV} to a checkout's lab/controlplane"
    )


def go_binary() -> str:
    found = shutil.which("go") or (str(FALLBACK_GO) if FALLBACK_GO.is_file() else None)
    if found is None:
        raise ControlPlaneBuildError(
            "go is not installed: the lab builds its Kubernetes control plane from source "
            "with Go 1.26 or newer (https://go.dev/dl/, or put /usr/local/go/bin on PATH)"
        )
    return found


def kubernetes_version(source: Path) -> tuple[int, int, int]:
    """The k8s.io/kubernetes release go.mod requires."""
    found = _REQUIREMENT.search((source / "go.mod").read_text(encoding="utf-8"))
    if found is None:
        raise ControlPlaneBuildError(f"{source / 'go.mod'} requires no k8s.io/kubernetes release")
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def build_flags(source: Path) -> list[str]:
    major, minor, patch = kubernetes_version(source)
    stamps = {
        "gitVersion": f"v{major}.{minor}.{patch}",
        "gitMajor": str(major),
        "gitMinor": str(minor),
        "gitTreeState": "clean",
    }
    ldflags = " ".join(["-s", "-w", *(f"-X {_VERSION_PACKAGE}.{k}={v}" for k, v in stamps.items())])
    return [*_BUILD_FLAGS, f"-ldflags={ldflags}"]


def build_key(source: Path, go: str) -> str:
    """Hash of what the binary is made of; a change to any of it means a new build."""
    version = _run_quiet([go, "version"], cwd=source)
    digest = hashlib.sha256()
    digest.update(version.encode())
    digest.update(" ".join(build_flags(source)).encode())
    files = [source / "go.mod", source / "go.sum", *sorted(source.glob("*.go"))]
    for path in files:
        if path.name.endswith("_test.go"):
            continue
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def ensure_control_plane(progress: Progress = print) -> Path:
    """Path of the `kube-lab` binary, built first if this source and Go have none yet.

    Parallel callers (pytest-xdist workers, two terminals) wait on one lock; one of them builds.
    """
    source = source_dir()
    go = go_binary()
    folder = cache_root() / build_key(source, go)
    binary = folder / BINARY_NAME
    if binary.is_file():
        return binary
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(folder.parent / f"{folder.name}.lock", progress):
        if not binary.is_file():  # another process may have built it while this one waited
            _build(go, source, binary, progress)
    return binary


@contextlib.contextmanager
def _locked(path: Path, progress: Progress) -> Iterator[None]:
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another process building the control plane ({path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(go: str, source: Path, binary: Path, progress: Progress) -> None:
    started = time.monotonic()
    # GOTOOLCHAIN=local: never let go fetch another toolchain behind the user's back; a too old
    # Go should fail with its own message instead.
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    progress(
        f"building the Kubernetes control plane from {source} into {binary}: once per source "
        "change; a cold build downloads ~500 MB of Go modules and compiles for many minutes"
    )
    _step(
        "downloading Go modules",
        [go, "mod", "download"],
        source,
        env,
        progress,
        failure="downloading the Go modules failed; is the Go module proxy reachable "
        f"(GOPROXY={os.environ.get('GOPROXY', 'https://proxy.golang.org,direct')})?",
    )
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    # -v lists each package as it is compiled: the progress lines count them.
    command = [go, "build", "-v", *build_flags(source), "-o", str(partial), "."]
    _step("compiling", command, source, env, progress, failure="go build failed")
    partial.rename(binary)  # atomic: a binary in place is a complete one
    _prune(binary.parent, progress)
    size = binary.stat().st_size / 1e6
    progress(f"control plane built in {time.monotonic() - started:.0f} s ({size:.0f} MB)")


def _prune(current: Path, progress: Progress, keep: int = 2) -> None:
    """Drop all but the `keep` newest builds (139 MB each); a running binary is unaffected."""
    builds = [
        folder
        for folder in current.parent.iterdir()
        if folder.is_dir() and (folder / BINARY_NAME).is_file()
    ]
    builds.sort(key=lambda folder: (folder / BINARY_NAME).stat().st_mtime, reverse=True)
    for folder in [f for f in builds if f != current][keep - 1 :]:
        shutil.rmtree(folder, ignore_errors=True)
        progress(f"removed an older control plane build: {folder}")


def _step(
    what: str,
    command: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    progress: Progress,
    failure: str,
) -> None:
    """Run one go command, reporting every ~15 s; raise with go's last lines if it fails."""
    started = time.monotonic()
    lines: list[str] = []
    # A build is a batch job of minutes: niced, it leaves the cores to tests and terminals that
    # share the machine, and costs nothing when the machine is idle.
    nice = shutil.which("nice")
    process = subprocess.Popen(
        [nice, "-n", "10", *command] if nice else list(command),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    reader = threading.Thread(target=_collect, args=(process.stdout, lines), daemon=True)
    reader.start()
    try:
        while True:
            try:
                process.wait(timeout=_PROGRESS_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                counted = f", {len(lines)} packages" if what == "compiling" else ""
                progress(f"  ... {what}: {time.monotonic() - started:.0f} s{counted}")
    except BaseException:
        process.kill()  # interrupted (Ctrl-C): leave no go process behind
        process.wait()
        raise
    reader.join(timeout=5)
    if process.returncode != 0:
        tail = "\n".join(lines[-_TAIL_LINES:])
        raise ControlPlaneBuildError(
            f"{failure} (`{' '.join(command)}` in {cwd} exited {process.returncode}); "
            f"go said:\n{tail}"
        )


def _collect(stream: Iterator[str], lines: list[str]) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))


def _run_quiet(command: Sequence[str], cwd: Path) -> str:
    try:
        result = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ControlPlaneBuildError(f"`{' '.join(command)}` failed: {error}") from error
    return result.stdout.strip()
