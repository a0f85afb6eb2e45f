# Every target installs what it needs into .venv from this repository's own files.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install system-deps kafka controlplane streams-app lab test lint unit e2e bench clean chart-package images crd release actionlint

# The operator's package, the example consumer's (examples/consumer) and the lab's (lab/: its own
# distribution, so that the operator's wheel carries none of it), all editable.
$(STAMP): pyproject.toml lab/pyproject.toml lab/setup.py examples/consumer/pyproject.toml examples/consumer/setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]' -e ./examples/consumer -e ./lab
	touch $(STAMP)

install: $(STAMP)

# Java and Maven run and fetch the lab's Apache Kafka; promtool checks the metrics and alert
# rules. They come from the machine's package manager when missing (promtool best effort: the
# tests that need it say so).
system-deps:
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven >/dev/null; }
	@command -v promtool >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
		(apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null) || \
		echo "promtool not installed: its checks will be skipped"; }

# Apache Kafka's jars, fetched from Maven Central once into ~/.cache/rebalancer/kafka.
kafka: $(STAMP) system-deps
	$(BIN)/python -u -c "from rebalancer_lab.kafka_jars import ensure_kafka_jars; ensure_kafka_jars(progress=print)"

# The Kubernetes control plane (kube-apiserver, controller manager, scheduler, etcd) built from
# lab/controlplane/ with Go once per source change into ~/.cache/rebalancer/controlplane; a cold
# build takes minutes (figures in lab/controlplane/README.md), a cached one nothing.
controlplane: $(STAMP)
	$(BIN)/python -u -m rebalancer_lab.controlplane

# The example Kafka Streams application (examples/streams-app: a stateful topology, RocksDB and a
# changelog), built with Maven once per source change into ~/.cache/rebalancer/streams-app;
# Maven's downloads stay in ~/.m2, so a warm machine pays nothing.
streams-app: $(STAMP) system-deps
	$(BIN)/python -u -m rebalancer_lab.streams_example

lab: kafka controlplane
	$(BIN)/rebalancer lab

# The whole ConsumerGroup CRD, rendered from the typed model in operator/rebalancer/structs/
# (consumer_group_resource.py) into crds/, the chart's copy and deploy/rebalancer.yaml
# (deploy/crd_gen.py; a test fails when a committed file differs).
crd: $(STAMP)
	$(BIN)/python deploy/crd_gen.py

lint: $(STAMP)
	$(BIN)/ruff check operator lab examples tests bench deploy charts
	$(BIN)/ruff format --check operator lab examples tests bench deploy charts
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q tests/structs tests/planning tests/simulation

e2e: kafka controlplane
	$(BIN)/pytest -q tests/lab/controlplane tests/operator/e2e

# Tests that run real brokers and processes on a shared 2-core machine can lose a race to load;
# one rerun keeps CI honest (the rerun is reported as R, with the traceback of the attempt
# that failed) without hiding a real failure.
# The end-to-end tests mostly wait on brokers and controllers (the CPU is three-quarters idle in
# one stream), so TEST_WORKERS streams run side by side, a test module per worker at a time,
# each with labs, brokers and control planes of its own (tests/conftest.py).
TEST_WORKERS ?= 2
test: system-deps kafka controlplane streams-app lint actionlint
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --reruns 1 --reruns-delay 2 --rerun-show-tracebacks --durations=30 tests

# The chart as a package plus a chart repository index (helm lint, package, repo index) in
# CHART_DIST; CHART_REPO_URL, when set, is the address the index's entries point at.
CHART_DIST ?= dist/charts
CHART_REPO_URL ?=
chart-package: $(STAMP)
	$(BIN)/python deploy/package_chart.py $(CHART_DIST) $(if $(CHART_REPO_URL),--url $(CHART_REPO_URL))

# The operator and learning images as OCI archives in dist/images, built by buildah without a
# daemon (deploy/build_images.sh; docs/images.md). IMAGE_FLAGS=--local-base where no container
# registry can be reached.
IMAGE_FLAGS ?=
images:
	deploy/build_images.sh $(IMAGE_FLAGS) dist/images

# A release's artifacts in dist/ (deploy/release.py; docs/release.md): the packaged chart and its
# OCI form, the Python sdists and wheels, the image archives (when buildah is installed; the step
# says so and is skipped otherwise, RELEASE_FLAGS=--require-images makes it fail), SHA256SUMS.
RELEASE_FLAGS ?=
release: $(STAMP)
	$(BIN)/python deploy/release.py $(RELEASE_FLAGS) $(if $(IMAGE_FLAGS),--image-flags='$(IMAGE_FLAGS)')

# actionlint checks .github/workflows (tests/deploy/packaging/test_release_workflow.py): built
# from the Go module proxy with the machine's Go into the venv's bin, once per version.
ACTIONLINT_VERSION := v1.7.12
$(BIN)/actionlint-$(ACTIONLINT_VERSION): $(STAMP)
	GOBIN=$(abspath $(BIN)) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	touch $@
actionlint: $(BIN)/actionlint-$(ACTIONLINT_VERSION)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache dist
