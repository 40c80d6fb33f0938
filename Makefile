# `make demo` (the main job end to end), `make test` (the test suite; it starts the services), `make ui`
# (Airflow's UI on the demo's home: api-server, scheduler, dag-processor and triggerer; Ctrl-C stops them),
# `make services` (install and start PostgreSQL and Redis for the tests) and `make jars` (fetch every
# Spark artifact from Maven Central into the jar cache, for images and offline workers); `make connect` runs a
# local Spark Connect server for the Connect engine (docs/spark-connect.md; Ctrl-C stops it).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test ui install lint clean services jars connect

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml plugins/paimon/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "uv>=0.8"
	# --compile-bytecode: every Airflow process (task, CLI, dag-processor) starts ~2 s faster
	# when site-packages already holds .pyc files, as a pip-installed deployment does.
	# With the Paimon format plugin: a distribution of its own, written only against the public factory
	# API (it depends on airflow-provider-tablemgmt, satisfied by the editable package beside it).
	# The test and lint tools are pyproject.toml's `dev` dependency group (PEP 735), not a published extra.
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python -e ".[embedded]" --group dev -e plugins/paimon
	touch $@

demo: install
	bash scripts/demo.sh

test: install
	bash scripts/test.sh

services:
	bash scripts/services.sh

jars: install
	$(BIN)/tablemgmt jars fetch --all

ui: install
	bash scripts/ui.sh

connect: install
	bash scripts/connect.sh

lint: install
	$(BIN)/ruff check airflow_tablemgmt tests dags scripts benchmarks
	$(BIN)/ruff format --check airflow_tablemgmt tests dags scripts benchmarks
	$(BIN)/lint-imports  # the layering contract: docs/adr/0001-layers.md
	$(BIN)/python -m mypy  # [tool.mypy] in pyproject.toml: 0 errors

clean:
	rm -rf $(VENV) .demo
