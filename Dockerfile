# The operator, the gate, the sidecar and the example consumer share this image.
FROM python:3.11-slim
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin rebalancer
WORKDIR /app
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY crds ./crds
COPY deploy/examples ./deploy/examples
RUN pip install --no-cache-dir . && rm -rf /root/.cache
USER 10001
ENTRYPOINT ["rebalancer"]
CMD ["operator"]
