# Two commands set up a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: setup demo test test-all lint bench clean

# The editable install leaves bytecode to the first run, which a machine with
# PYTHONDONTWRITEBYTECODE never writes: it is compiled once here, as a regular install does.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/python -m compileall -q simulator
	touch $(STAMP)

# ruff, mypy and import-linter at the versions CI checks with (only `make lint` needs them)
$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/clustersim run scenarios/quickstart.yaml -o results/quickstart

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# lint, format, types and the import contract (what CI checks before the tests)
lint: $(DEV_STAMP)
	$(BIN)/ruff check simulator tests benchmarks
	$(BIN)/ruff format --check simulator tests benchmarks
	$(BIN)/mypy simulator
	$(BIN)/lint-imports --no-cache

test-all: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# refit the committed profiles topologies/calibration/*.yaml from topologies/calibration/samples/
.PHONY: profiles
profiles: $(STAMP)
	$(BIN)/python -m simulator.calibration.build

clean:
	rm -rf $(VENV) results .pytest_cache .hypothesis .mypy_cache .ruff_cache .import_linter_cache .grimp_cache
