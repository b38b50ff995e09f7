# Everyday tasks. `make up` and `make test` are the README's quick start; .ci/run runs `make test` too.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: help install up test lint fmt clean

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Hades needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@

install: $(VENV)/.installed  ## create .venv and install Hades with its test tools

up: install  ## start Hades (API, scheduler, Docker executor) on an embedded nats-server
	$(BIN)/hades up

test: install  ## the whole suite: lint, types, then every test (Docker tests need a running engine)
	$(BIN)/ruff check hades tests bench
	$(BIN)/ruff format --check hades tests bench
	$(BIN)/mypy hades
	$(BIN)/python -m pytest -q

fmt: install  ## format and auto-fix
	$(BIN)/ruff format hades tests bench
	$(BIN)/ruff check --fix hades tests bench

.PHONY: bench
bench: install  ## every benchmark with its same-run baseline (under 10 min on 2 cores): table on stdout and in bench/RESULTS.md
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:  ## remove the venv and local data
	rm -rf $(VENV) .hades .pytest_cache .mypy_cache .ruff_cache
