# Every target installs what it needs into .venv from this repository's own files.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lab test lint unit e2e bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/rebalancer lab

lint: $(STAMP)
	$(BIN)/ruff check operator tests bench
	$(BIN)/ruff format --check operator tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

e2e: $(STAMP)
	$(BIN)/pytest -q tests/apiserver tests/e2e

test: lint
	$(BIN)/pytest -q -p no:cacheprovider tests

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
