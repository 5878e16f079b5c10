# verstore: `make run` runs the main job (a streaming as-of join on local Spark), `make test` runs
# every test. Both set up what they need on a fresh machine: system packages, a .venv, Python
# dependencies, the extension. Spark needs Java 17 on the PATH (or JAVA_HOME).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# The lowest versions pyproject.toml declares, in a venv of their own (make test-min).
VENV_MIN ?= .venv-min
PY_MIN := $(VENV_MIN)/bin/python
# The PySpark lines between .venv-min's (the floor, 3.5) and .venv's (the newest), one version
# each (docs/spark.md, Spark lines): each installed alone under $(LINES)/<version>, put first on
# .venv-min's path (make test-lines).
SPARK_LINES ?= 4.0.5 4.1.4 4.2.1
LINES := .spark-lines
# PyFlink, the Spark benchmark's peer (benches/flink_asof.py), in a venv of its own: it pins a
# pyarrow and pandas of its own. The newest 2.x that installs on Python 3.11 (make flink-env).
VENV_FLINK ?= .venv-flink
PY_FLINK := $(VENV_FLINK)/bin/python
FLINK_VERSION ?= 2.3.0
export VERSTORE_FLINK_PYTHON ?= $(abspath $(PY_FLINK))
# One optimized build for Rust tests, the extension and benches, outside the clone so that every
# checkout on the machine shares the (slow) RocksDB C++ build.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/verstore/target
# The compilers and linker of that build on x86_64 Linux, by name (.cargo/config.toml).
export PATH := $(abspath scripts/zig):$(PATH)
PYTEST_FLAGS ?=
# Steps of make test and make setup say how long they took ("[test-core 95 s]").
TIMED = TIMEFORMAT='[$@ %0R s]'; time
# Flags for the main job, e.g. make run ARGS="--symbols 10000 --rows-per-batch 50000"
ARGS ?=

.PHONY: help run run-restaurant java-check test setup system-deps compile develop build-release wheel rust-test py-test test-min test-lines test-fast bench lint clean flink-env \
  $(TEST_LANES) test-min-run

help:
	@echo "make run    - the main job: streaming as-of join on local Spark (examples/spark_asof_pipeline.py)"
	@echo "make run-restaurant - the restaurant bills and vote tally (examples/restaurant.py)"
	@echo "make test   - every test, independent suites side by side: Rust tests, pytest (Spark tests on classic"
	@echo "              and Spark Connect sessions), a benchmark smoke run, make test-min, make test-lines"
	@echo "make test-min - pytest on the lowest pyarrow, pyspark and pandas pyproject.toml declares"
	@echo "make test-lines - each helper end to end on every PySpark line between (SPARK_LINES)"
	@echo "make wheel  - dist/verstore-*.whl, manylinux_2_28 (README, building the wheel)"
	@echo "make bench  - benchmarks (numbers from the release build)"
	@echo "make flink-env - PyFlink in $(VENV_FLINK), the Spark benchmark's peer (make bench and make test make it)"
	@echo "make lint   - rustfmt, clippy, ruff, mypy, stubtest"

run: develop java-check
	$(TIMED) $(PY) examples/spark_asof_pipeline.py $(ARGS)

run-restaurant: develop
	$(PY) examples/restaurant.py

java-check:
	@if [ -z "$${JAVA_HOME:-}" ] && ! command -v java >/dev/null 2>&1; then \
	  echo "installing a Java runtime for Spark"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq openjdk-17-jre-headless; \
	fi

# Independent suites run side by side (make -j), each in its own processes: no two share a Spark
# session, a port (servers bind free loopback ports), a local-cluster work directory or a store.
# The longest lanes come first: make starts lanes in this order as slots free up. Each lane's
# output is printed whole when it ends; a failed lane does not stop the others (-k), make test
# fails at the end. TEST_JOBS=1 runs them one after the other.
TEST_JOBS ?= 4
LINE_LANES := $(addprefix test-line-,$(SPARK_LINES))
TEST_LANES := test-spark-jobs test-spark test-core test-connect test-min-lane $(LINE_LANES) \
  test-rust test-sims test-bench
test: develop java-check
	$(MAKE) --no-print-directory -k -j$(TEST_JOBS) --output-sync=target $(TEST_LANES)

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

# The venv and the build tool first (pyproject.toml's build-system requires), so that the
# extension can compile while pip installs everything else.
$(VENV)/.build-tool: pyproject.toml
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) scripts/requirements.py --build > $(VENV)/build-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/build-requirements.txt
	@touch $@

$(VENV)/.deps-installed: pyproject.toml $(VENV)/.build-tool
	$(PY) scripts/requirements.py > $(VENV)/requirements.txt
	$(TIMED) $(PY) -m pip install -q -r $(VENV)/requirements.txt
	@touch $@

setup: system-deps $(VENV)/.deps-installed

MATURIN := VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH maturin

# The extension compiled into python/verstore without touching the venv's packages (the
# first build compiles RocksDB's C++), side by side with pip.
compile: system-deps $(VENV)/.build-tool
	$(TIMED) $(MATURIN) develop --release --quiet --skip-install

# Then installed into the venv: cargo finds the build fresh, nothing compiles twice.
develop build-release:
	$(MAKE) --no-print-directory -j2 compile $(VENV)/.deps-installed
	$(TIMED) $(MATURIN) develop --release --quiet

# The lowest-versions venv: the floors of the runtime dependencies and user extras, pinned
# (scripts/lowest_requirements.py). verstore itself is the extension `maturin develop` built into
# python/verstore, imported by path as .venv does: no second build.
$(VENV_MIN)/.deps-installed: pyproject.toml scripts/lowest_requirements.py
	@[ -x $(PY_MIN) ] || python3 -m venv $(VENV_MIN)
	@echo '*' > $(VENV_MIN)/.gitignore
	$(PY_MIN) -m pip install -q --upgrade pip
	$(PY_MIN) scripts/lowest_requirements.py > $(VENV_MIN)/requirements.txt
	$(PY_MIN) -m pip install -q -r $(VENV_MIN)/requirements.txt
	echo $(abspath python) > "$$($(PY_MIN) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/verstore.pth"
	@touch $@

# PyFlink from PyPI; the stamp names the version, so that changing FLINK_VERSION reinstalls.
$(VENV_FLINK)/.flink-$(FLINK_VERSION):
	@[ -x $(PY_FLINK) ] || python3 -m venv $(VENV_FLINK)
	@echo '*' > $(VENV_FLINK)/.gitignore
	$(PY_FLINK) -m pip install -q --upgrade pip
	$(TIMED) $(PY_FLINK) -m pip install -q "apache-flink==$(FLINK_VERSION)"
	@touch $@
flink-env: $(VENV_FLINK)/.flink-$(FLINK_VERSION)

# A PySpark line alone (pip --target, no dependencies: .venv-min has the rest), put first on
# PYTHONPATH for the tests of the line; Spark's Python workers inherit it. py4j as the line's
# PySpark declares it (4.x: >=0.10.9.7,<0.10.9.10).
$(LINES)/%/.installed: | $(VENV_MIN)/.deps-installed
	rm -rf $(LINES)/$* && mkdir -p $(LINES)
	@echo '*' > $(LINES)/.gitignore
	$(PY_MIN) -m pip install -q --no-deps --target $(LINES)/$* "pyspark==$*" \
	  "py4j>=0.10.9.7,<0.10.9.10"
	@touch $@

# The wheel users install (README, building the wheel): the one build, tagged manylinux_2_28
# (glibc 2.28) on x86_64, and auditwheel's reading of the symbols it needs.
wheel: system-deps $(VENV)/.deps-installed
	rm -rf dist
	$(TIMED) $(MATURIN) build --release --quiet --compatibility manylinux_2_28 --out dist
	$(VENV)/bin/auditwheel show dist/verstore-*.whl

# --- tests ------------------------------------------------------------------------------------

# The criterion bench once per benchmark, untimed (`--test`): it builds, and its checks hold.
rust-test: system-deps $(VENV)/.build-tool
	$(TIMED) cargo test --release --quiet
	$(TIMED) VERSTORE_BENCH_KEYS=2000 cargo bench --profile release --bench core --quiet -- --test

# The local-cluster jobs (two executors; one on the shipped wheel): processes of their own that
# need no session of the test process. One lane, because they share Spark's work directory
# (the local_cluster_work fixture).
SPARK_JOB_TESTS := tests/spark/test_local_cluster.py tests/spark/test_wheel.py tests/spark/test_memory_cap.py
# Every pytest test without a Spark session: the store, the checkpoint, Spark's parts (spill,
# kernels) and the checks of the repository itself (layers, documented defaults, examples).
CORE_TESTS := tests/core tests/checkpoint tests/spark/parts \
  tests/test_layers.py tests/test_doc_defaults.py tests/test_examples.py
SIMULATIONS := tests/checkpoint/test_simulation.py tests/checkpoint/test_simulation_harsh.py \
  tests/checkpoint/test_simulation_repartition.py
# The smoke run times nothing, so its JVMs take the tests' settings (tests/spark/conftest.py):
# Spark's, and PyFlink's (JVM_ARGS, which halves a tiny Flink job's 27 s).
BENCH_SMOKE := VERSTORE_BENCH_KEYS=2000 VERSTORE_BENCH_VERSIONS=20000 VERSTORE_BENCH_SCAN_KEYS=20000 \
  VERSTORE_BENCH_LARGE_KEYS=20000 \
  SPARK_SUBMIT_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
  JVM_ARGS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# The lanes of make test; together, pytest's whole suite once on .venv, the Spark cases marked
# `connect` again on a local Spark Connect server (tests/spark/conftest.py), the benches as a
# smoke run, make test-min and make test-lines (the helpers on every other PySpark line).
test-spark-jobs:
	$(TIMED) $(PY) -m pytest -q $(PYTEST_FLAGS) $(SPARK_JOB_TESTS)
test-spark:
	$(TIMED) $(PY) -m pytest -q $(PYTEST_FLAGS) tests/spark --ignore=tests/spark/parts \
	  $(addprefix --ignore=,$(SPARK_JOB_TESTS))
test-connect:
	$(TIMED) VERSTORE_SPARK_CONNECT=1 $(PY) -m pytest -q $(PYTEST_FLAGS) tests/spark -m connect \
	  --ignore=tests/spark/parts
test-sims:
	$(TIMED) $(PY) -m pytest -q $(PYTEST_FLAGS) $(SIMULATIONS)
test-core:
	$(TIMED) $(PY) -m pytest -q $(PYTEST_FLAGS) $(CORE_TESTS) $(addprefix --ignore=,$(SIMULATIONS))
test-rust: rust-test
test-bench: flink-env
	$(TIMED) $(BENCH_SMOKE) $(PY) -m pytest benches -q --benchmark-disable $(PYTEST_FLAGS)
test-min-lane: test-min-run

# One after the other, as make test ran them before the lanes.
py-test: develop java-check
	$(MAKE) --no-print-directory -j1 test-spark-jobs test-spark test-sims test-connect test-core test-bench

# The declared minimums, tested: the non-Spark suite (spill and kernels included) on the lowest
# pyarrow, and Spark smoke tests on the lowest pyspark and pandas. Left out of the suite: the
# checkpoint crash simulations and the protocol's fault, cleanup and hostile-file matrices
# (minutes of process kills and storage faults that exercise the protocol, not the dependencies:
# their calls into pyarrow's filesystems are the ones the other tests of tests/checkpoint make on
# local disk and S3 here; test-core runs them), and one test whose pyarrow oracle sorts with
# per-key null placement, which pyarrow has only from 24.
PROTOCOL_MATRICES := tests/checkpoint/test_failed_commits.py tests/checkpoint/test_cleanup.py \
  tests/checkpoint/test_hostile_files.py tests/core/test_crash.py
MIN_SUITE := -m 'not spark' \
  $(addprefix --ignore=,$(SIMULATIONS) $(PROTOCOL_MATRICES)) \
  --deselect=tests/core/test_columns.py::test_encoding_preserves_pyarrow_order
# Each Spark helper once end to end against its oracle, on every PySpark line (the floor's,
# .venv-min's, and SPARK_LINES'; .venv's newest runs the whole suite): as-of join,
# latest-by-timestamp, table-table join, GroupHistory (applyInPandasWithState), the stateful
# processor (transformWithStateInPandas, 4.0+: the older lines check its error instead),
# read_store and the change feed, map_partitions_with_stores, the progress metrics on Connect,
# and what differs between lines (tests/spark/test_spark_lines.py). Lines with Spark Connect
# (4.0+: 3.5's PySpark ships no Connect server) run the tests marked `connect` among them again
# on Connect. The floor also checks the classic progress metrics (3.5's progress is a dict; 4.0
# on, the newest's classes).
LINE_TESTS := \
  "tests/spark/test_asof_join.py::test_generated_out_of_order_matches_merge_asof_oracle[left-seq-True]" \
  "tests/spark/test_tables.py::test_latest_by_timestamp_matches_reference[changes-False-3-False]" \
  "tests/spark/test_tables.py::test_versioned_table_join_matches_reference[outer-as_of-True]" \
  tests/spark/test_stateful.py::test_group_history_asof_join_matches_merge_asof \
  "tests/spark/test_stateful.py::test_processor_asof_join_matches_merge_asof[False]" \
  tests/spark/test_read_store.py::test_the_newest_state_is_each_keys_latest_version \
  tests/spark/test_read_store.py::test_history_is_every_version_with_its_validity \
  tests/spark/test_read_store.py::test_the_change_feed_replays_into_each_versions_state \
  tests/spark/test_connect.py::test_metrics_are_in_the_progress_and_partition_metrics_says_where \
  tests/spark/test_spark_lines.py

test-min: develop java-check
	$(MAKE) --no-print-directory test-min-run
test-min-run: $(VENV_MIN)/.deps-installed
	$(PY_MIN) -c 'import pandas, pyarrow, pyspark, verstore; print("lowest versions: pyarrow", \
	  pyarrow.__version__, "pyspark", pyspark.__version__, "pandas", pandas.__version__)'
	$(TIMED) $(PY_MIN) -m pytest -q $(PYTEST_FLAGS) $(MIN_SUITE)
	$(TIMED) $(PY_MIN) -m pytest -q $(PYTEST_FLAGS) $(LINE_TESTS) \
	  tests/spark/test_metrics.py::test_each_batch_reports_its_store_metrics

# One PySpark line of SPARK_LINES: its tests on a classic session, then on Spark Connect.
LINE_PY = PYTHONPATH=$(abspath $(LINES)/$*) $(PY_MIN)
test-lines: develop java-check
	$(MAKE) --no-print-directory -k -j$(TEST_JOBS) --output-sync=target $(LINE_LANES)
$(LINE_LANES): test-line-%: $(LINES)/%/.installed
	$(LINE_PY) -c 'import pyspark; assert pyspark.__version__ == "$*", pyspark.__file__'
	$(TIMED) $(LINE_PY) -m pytest -q $(PYTEST_FLAGS) $(LINE_TESTS)
	$(TIMED) VERSTORE_SPARK_CONNECT=1 $(LINE_PY) -m pytest -q $(PYTEST_FLAGS) -m connect $(LINE_TESTS)

# Every suite, then BENCHMARKS.md's results and plots from their JSON (scripts/bench_report.py).
# The criterion bench runs in the release profile: the bench profile would build RocksDB again.
bench: develop java-check flink-env
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
	rm -rf $(VENV) $(VENV_MIN) $(VENV_FLINK) $(LINES) .pytest_cache .hypothesis .benchmarks
