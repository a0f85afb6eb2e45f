# The agent image: the join gate (`rebalancer gate`, an init container of each consumer pod) and
# the enforcement sidecar (`rebalancer sidecar`). They need only aiohttp, aiokafka, confluent-kafka
# and prometheus-client (an import-linter contract keeps them so), not the operator's Kubernetes
# client or kopf, so every consumer node pulls a much smaller image. Runs as uid 65532.
#
# The base is pinned by digest, as in ./Dockerfile (how to move it is said there).
ARG BASE=docker.io/library/python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
# The package without its dependencies, then the agents' four at the versions the package pins
# (read from its metadata, so pyproject.toml stays the one list). pip then reports the operator's
# dependencies as not installed: they are left out on purpose.
RUN python3 -m venv /opt/rebalancer \
 && /opt/rebalancer/bin/pip install --no-cache-dir --no-compile --no-deps . \
 && /opt/rebalancer/bin/python -c "import re; from importlib.metadata import requires; \
print('\n'.join(r for r in requires('rebalancer') if 'extra' not in r \
and re.match(r'(aiohttp|aiokafka|confluent-kafka|prometheus-client)\b', r)))" > /tmp/agent.txt \
 && /opt/rebalancer/bin/pip install --no-cache-dir --no-compile --requirement /tmp/agent.txt \
 && /opt/rebalancer/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
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
CMD ["gate", "--help"]
