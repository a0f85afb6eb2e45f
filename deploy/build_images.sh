#!/usr/bin/env bash
# Build the operator, agent (gate and sidecar), learning and example consumer (examples/consumer)
# images as OCI archives with buildah, without a daemon:
# chroot isolation and vfs storage, which need neither a container engine nor user namespaces.
#
#   deploy/build_images.sh [--local-base] [OUT_DIR]      (default OUT_DIR: dist/images)
#
# The Dockerfiles start from python:3.11-slim-bookworm pinned by digest, pulled from its registry.
# --local-base builds a stand-in base instead, where no container registry can be reached: a
# Debian bookworm root (debootstrap, python3 and its venv module, no documentation) imported as
# localhost/rebalancer-base:bookworm and passed as BASE. Needs root, buildah (and debootstrap
# with --local-base): apt-get install buildah debootstrap.
set -euo pipefail

LOCAL_BASE=0
if [[ "${1:-}" == "--local-base" ]]; then
  LOCAL_BASE=1
  shift
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$(mkdir -p "${1:-$ROOT/dist/images}" && cd "${1:-$ROOT/dist/images}" && pwd)"
WORK="${REBALANCER_IMAGE_WORK:-/tmp/rebalancer-images}"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/operator/rebalancer/__init__.py")"
BUILDAH=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
mkdir -p "$WORK"

# pip in the build's RUN steps trusts the machine's CA bundle (a proxy's CA, where one inspects
# TLS) and uses its pip settings (a mirror); both are mounted for the build only, beside the
# image's own files, and never committed into a layer.
CA_BUNDLE="${REBALANCER_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
{
  if [[ -f /etc/pip.conf ]]; then grep -v -E '^\s*(cert|find-links)\s*=' /etc/pip.conf; else echo '[global]'; fi
} >"$WORK/pip.conf"
if ! grep -q '^\[global\]' "$WORK/pip.conf"; then sed -i '1i [global]' "$WORK/pip.conf"; fi
MOUNTS=(-v "$WORK/pip.conf:/etc/pip.conf:ro")
if [[ -f "$CA_BUNDLE" ]]; then
  sed -i '/^\[global\]/a cert = /run/build-ca.crt' "$WORK/pip.conf"
  MOUNTS+=(-v "$CA_BUNDLE:/run/build-ca.crt:ro")
fi

BUILD_ARGS=()
if [[ $LOCAL_BASE == 1 ]]; then
  base_root="$WORK/base-root"
  if [[ ! -x "$base_root/usr/bin/python3" ]]; then
    rm -rf "$base_root"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$base_root" http://deb.debian.org/debian
    # As Debian's slim images: no documentation, now or from later apt-get installs.
    rm -rf "$base_root"/var/cache/apt/archives/*.deb "$base_root"/var/lib/apt/lists/* \
      "$base_root"/usr/share/{doc,man,locale,info}/*
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/locale/*' \
      'path-exclude /usr/share/info/*' >"$base_root/etc/dpkg/dpkg.cfg.d/excludes"
  fi
  ctr="$("${BUILDAH[@]}" from scratch)"
  "${BUILDAH[@]}" copy --quiet "$ctr" "$base_root/" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" localhost/rebalancer-base:bookworm >/dev/null
  BUILD_ARGS=(--build-arg BASE=localhost/rebalancer-base:bookworm)
fi

# Only what the images need goes into the build context.
context="$WORK/context"
rm -rf "$context" && mkdir -p "$context"
cp -r "$ROOT/pyproject.toml" "$ROOT/README.md" "$ROOT/operator" "$context/"
mkdir -p "$context/examples" && cp -r "$ROOT/examples/consumer" "$context/examples/"
find "$context" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +

build() {  # role dockerfile
  local role=$1 dockerfile=$2 image="localhost/rebalancer-$1:$VERSION"
  local archive="$OUT/rebalancer-$role-$VERSION.oci.tar"
  local started=$SECONDS
  "${BUILDAH[@]}" bud --quiet --isolation chroot --layers=false "${MOUNTS[@]}" \
    "${BUILD_ARGS[@]}" -f "$ROOT/$dockerfile" -t "$image" "$context" >/dev/null
  rm -f "$archive"
  "${BUILDAH[@]}" push --quiet "$image" "oci-archive:$archive:rebalancer-$role:$VERSION"
  local size
  size="$("${BUILDAH[@]}" images --format '{{.Size}}' "$image")"
  printf '%s: %s unpacked, %s MB as an OCI archive (%s), built in %d s\n' "$role" "$size" \
    "$(($(stat -c %s "$archive") / 1000000))" "$archive" $((SECONDS - started))
}

run_in() {  # image command...
  local image=$1 ctr
  shift
  ctr="$("${BUILDAH[@]}" from --quiet "$image")"
  "${BUILDAH[@]}" run --isolation chroot "$ctr" -- "$@"
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
}

build operator Dockerfile
for command in operator gate sidecar; do
  run_in "localhost/rebalancer-operator:$VERSION" rebalancer "$command" --help | head -n 1
done
run_in "localhost/rebalancer-operator:$VERSION" id
# Every module of the base install imports in the image (kubernetes.aio is not there), and the
# operator's history writer works without a Parquet library.
run_in "localhost/rebalancer-operator:$VERSION" python -c '
import asyncio, importlib, pkgutil, rebalancer
extra = ("rebalancer.learning", "rebalancer.commands.learn", "rebalancer.__main__")
names = [m.name for m in pkgutil.walk_packages(rebalancer.__path__, "rebalancer.")
         if not any(m.name == e or m.name.startswith(e + ".") for e in extra)]
for name in names:
    importlib.import_module(name)
from rebalancer.clients.recording import HistoryRecorder, history_files
from rebalancer.structs.history import RecordType, member_event
event = member_event(RecordType.POD_START, namespace="shop", name="orders", group_id="g",
                     cluster="k:9092", member="p-0", at=1.7e9, members=1)
asyncio.run(HistoryRecorder("/tmp/history").record([event]))
print(len(names), "modules import; history written:", len(history_files("/tmp/history")[1]), "file")
'
build agent agent.Dockerfile
for command in gate sidecar; do
  run_in "localhost/rebalancer-agent:$VERSION" rebalancer "$command" --help | head -n 1
done
build learning learning.Dockerfile
run_in "localhost/rebalancer-learning:$VERSION" sh -c \
  'java -version 2>&1 | head -n 1 && python -c "import pyspark; print(\"pyspark\", pyspark.__version__)"'
# A real Spark run in the image, as its user: five days of one fleet's generated history.
run_in "localhost/rebalancer-learning:$VERSION" python -c '
import subprocess, sys
from rebalancer.learning.history_table import write_table
from rebalancer.learning.fleets import Fleet, fleet_history
fleet = Fleet(cluster="kafka:9092", namespace="shop", name="orders", members=5, partitions=12,
              latency_median_ms=6000.0, latency_sigma=0.4, processing_ms=30000.0, static=True,
              rollouts_per_day=3.0, crash_per_day=1.0, leave_per_day=1.0,
              downtime_median_ms=15000.0)
write_table("/tmp/history", fleet_history(fleet, days=5, seed=1))
done = subprocess.run(["rebalancer", "learn", "--history", "/tmp/history", "--output", "/tmp/out",
                       "--master", "local[2]", "--driver-memory", "1g", "--samples", "50"],
                      capture_output=True, text=True, env={"SPARK_LOCAL_IP": "127.0.0.1",
                      "PATH": "/opt/rebalancer/bin:/usr/bin:/bin", "HOME": "/tmp"})
print("learn:", "recommendations written" if done.returncode == 0 else done.stderr[-2000:])
sys.exit(done.returncode)
'
build example-consumer examples/consumer/Dockerfile
# Its settings are checked before it connects: no bootstrap address is a clear error (exit 2).
run_in "localhost/rebalancer-example-consumer:$VERSION" rebalancer-example-consumer --help | head -n 1
run_in "localhost/rebalancer-example-consumer:$VERSION" sh -c \
  'rebalancer-example-consumer; test $? -eq 2 && echo "without settings: exit 2, as expected"'
