# pysched developer entry points. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
SOURCES := pysched progress tests perf conftest.py manifests/examples/training
# Build outputs live outside the clone, as hack/build-*.sh keep theirs: a fresh clone type-checks
# in seconds, not a minute.
CACHE_ROOT := $(or $(PYSCHED_CACHE_DIR),$(HOME)/.cache/pysched)
# pytest-xdist workers, each with its own session's control plane. The integration tests mostly
# wait on the control plane (alone they leave the 2 cores about 60% idle): two workers sharing the
# tests by work stealing finish the suite in about 60% of one worker's time.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

.PHONY: install simulate control-plane lint typecheck unit test bench perf clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,learn]'
	touch $@

install: $(VENV)/.installed

simulate: install
	$(BIN)/pysched simulate

# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and (hack/build-jobset.sh,
# build-helm.sh and build-kwok.sh, run by the script) the JobSet controller, helm and KWOK from Go
# modules, cached under ~/.cache/pysched
# (PYSCHED_CACHE_DIR); skipped when the cached build is complete.
control-plane:
	bash hack/build-control-plane.sh

# ruff, then the layering contracts of pyproject.toml's [tool.importlinter] (lint-imports).
lint: install
	$(BIN)/ruff check $(SOURCES)
	$(BIN)/ruff format --check $(SOURCES)
	cd $(CURDIR) && $(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy --cache-dir "$(CACHE_ROOT)/mypy-$$($(BIN)/python -c 'import mypy.version as v; print(v.__version__)')" pysched tests perf progress/pysched_progress manifests/examples/training/train.py

unit: install
	$(PYTEST) -m "not integration"

# Everything: lint, types, then every test (unit, plugin, property and integration).
# pytest runs last so that its summary is the closing line.
test: install control-plane lint typecheck
	PYSCHED_REQUIRE_CONTROL_PLANE=1 $(PYTEST)

bench: install
	$(BIN)/pysched bench --nodes 5000 --pods 20000

# The live standard set: pysched, kube-scheduler and the raw binder, alternating, on fresh dev
# clusters (perf/README.md, "Live"); reports land in perf/results/.
PERF_ROUNDS ?= 3
perf: install control-plane
	for w in basic-1000 basic-5000 constrained-1000 jobs-1000 churn-1000; do \
	  $(BIN)/python -m perf run perf/workloads/$$w.yaml --rounds $(PERF_ROUNDS) --json perf/results/$$w.json || exit 1; \
	done

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache .hypothesis
