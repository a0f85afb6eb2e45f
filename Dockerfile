# The operator image; the join gate (`rebalancer gate`) and the sidecar (`rebalancer sidecar`) run
# from it too. It holds the base install only (no Spark, no lab), in a venv without pip, and runs
# as uid 65532, the user the chart's securityContext names.
#
# The base is pinned by digest so that a rebuild gets the same layers. To move it to a newer
# python:3.11-slim-bookworm, read its digest with
#   skopeo inspect --format '{{.Digest}}' docker://docker.io/library/python:3.11-slim-bookworm
# BASE may name any Debian bookworm image with python3 (3.11) and its venv module.
ARG BASE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
# No byte code: the root filesystem is read-only at run time, and .pyc files would add a third to
# the image. pip and setuptools leave with the build. The Kubernetes client's asyncio twin
# (kubernetes.aio, 41 MB of generated models) is imported by nothing here: kopf has its own
# client, and the operator's calls use the synchronous one (deploy/build_images.sh imports every
# module of the image, and tests/deploy/packaging/test_lean_install.py a venv built the same way).
RUN python3 -m venv /opt/rebalancer \
 && /opt/rebalancer/bin/pip install --no-cache-dir --no-compile . \
 && /opt/rebalancer/bin/pip uninstall --yes --quiet pip setuptools \
 && rm -rf /opt/rebalancer/lib/python3*/site-packages/kubernetes/aio

FROM ${BASE}
# pip of a python base image is not needed to run, so it does not ship.
RUN if python3 -m pip --version >/dev/null 2>&1; then \
      python3 -m pip uninstall --yes --quiet pip setuptools wheel; \
    fi \
 && groupadd --gid 65532 rebalancer \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin -K UID_MAX=65532 rebalancer
COPY --from=build /opt/rebalancer /opt/rebalancer
ENV PATH=/opt/rebalancer/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532
ENTRYPOINT ["rebalancer"]
CMD ["operator"]
