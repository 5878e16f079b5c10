# verstore: `make run` runs the main job (a streaming as-of join on local Spark), `make test` runs
# every test. Both set up what they need on a fresh machine: system packages, a .venv, Python
# dependencies, the extension. Spark needs Java 17 on the PATH (or JAVA_HOME).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# One optimized build for Rust tests, the extension and benches, outside the clone so that every
# checkout on the machine shares the (slow) RocksDB C++ build.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/verstore/target
PYTEST_FLAGS ?=
# Flags for the main job, e.g. make run ARGS="--symbols 10000 --rows-per-batch 50000"
ARGS ?=

.PHONY: help run run-restaurant java-check test setup system-deps develop build-release rust-test py-test test-fast bench lint clean

help:
	@echo "make run    - the main job: streaming as-of join on local Spark (examples/spark_asof_pipeline.py)"
	@echo "make run-restaurant - the restaurant bills and vote tally (examples/restaurant.py)"
	@echo "make test   - Rust tests and pytest (Spark tests included)"
	@echo "make bench  - benchmarks (numbers from the release build)"
	@echo "make lint   - rustfmt, clippy, ruff, mypy, stubtest"

run: develop java-check
	$(PY) examples/spark_asof_pipeline.py $(ARGS)

run-restaurant: develop
	$(PY) examples/restaurant.py

java-check:
	@if [ -z "$${JAVA_HOME:-}" ] && ! command -v java >/dev/null 2>&1; then \
	  echo "installing a Java runtime for Spark"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; \
	fi

test: develop rust-test py-test

test-fast: develop
	$(PY) -m pytest -m 'not spark' -q $(PYTEST_FLAGS)

# --- setup ------------------------------------------------------------------------------------

# bindgen needs libclang to generate RocksDB's bindings.
system-deps:
	@if ! dpkg -s libclang-dev >/dev/null 2>&1; then \
	  echo "installing libclang-dev"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq libclang-dev; \
	fi

$(VENV)/.deps-installed: pyproject.toml
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) scripts/requirements.py > $(VENV)/requirements.txt
	$(PY) -m pip install -q -r $(VENV)/requirements.txt
	@touch $@

setup: system-deps $(VENV)/.deps-installed

develop build-release: setup
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
	  maturin develop --release --quiet

# --- tests ------------------------------------------------------------------------------------

rust-test: system-deps
	cargo test --release --quiet

py-test: develop java-check
	$(PY) -m pytest -q $(PYTEST_FLAGS)
	VERSTORE_BENCH_KEYS=2000 VERSTORE_BENCH_VERSIONS=20000 VERSTORE_BENCH_SCAN_KEYS=20000 $(PY) -m pytest benches -q --benchmark-disable $(PYTEST_FLAGS)

# Every suite, then BENCHMARKS.md's results and plots from their JSON (scripts/bench_report.py).
# The criterion bench runs in the release profile: the bench profile would build RocksDB again.
bench: develop java-check
	mkdir -p .benchmarks
	$(PY) -m pytest benches --benchmark-only --benchmark-sort=name \
	  --benchmark-json=.benchmarks/results.json $(PYTEST_FLAGS)
	cargo bench --profile release --bench core
	$(PY) scripts/bench_report.py --pytest .benchmarks/results.json \
	  --criterion $(CARGO_TARGET_DIR)/criterion --out BENCHMARKS.md --plots docs/benchmarks

lint: develop
	cargo fmt --check
	cargo clippy --release --all-targets --all-features -- -D warnings
	$(PY) -m ruff check python tests benches examples
	$(PY) -m ruff format --check python tests benches examples
	$(PY) -m mypy python/verstore benches
	$(PY) -m mypy.stubtest verstore._core --mypy-config-file pyproject.toml

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .benchmarks
