# The learning image: `rebalancer learn` (the chart's learning CronJob) with PySpark and a Java 17
# runtime. Spark runs in local mode inside the pod by default, as uid 65532 like the operator.
#
# The base is pinned by digest, as in ./Dockerfile (how to move it is said there).
ARG BASE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN python3 -m venv /opt/rebalancer \
 && /opt/rebalancer/bin/pip install --no-cache-dir --no-compile '.[learning]' \
 && /opt/rebalancer/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
# Java from the base's own Debian release; its version follows the release's security updates,
# which the pinned base digest and a rebuild decide.
# The JRE's post-install links its manual page into /usr/share/man/man1, which slim bases strip.
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && if python3 -m pip --version >/dev/null 2>&1; then \
      python3 -m pip uninstall --yes --quiet pip setuptools wheel; \
    fi \
 && groupadd --gid 65532 rebalancer \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin -K UID_MAX=65532 rebalancer
COPY --from=build /opt/rebalancer /opt/rebalancer
# Spark writes its scratch files and settings under HOME and /tmp (an emptyDir in the chart).
ENV PATH=/opt/rebalancer/bin:$PATH \
    HOME=/tmp \
    PYSPARK_PYTHON=/opt/rebalancer/bin/python \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532
ENTRYPOINT ["rebalancer"]
CMD ["learn", "--help"]
