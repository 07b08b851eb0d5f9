# fleetd — the two commands of the quick start are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint fmt bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fleetd demo

# The pure cores' own tests must reach every branch of fleetd/health, fleetd/resilience and the
# human-leg policy, fleetd/notify/core/policy.py (see [tool.coverage] in pyproject.toml). Only
# that run is traced: tracing the whole suite slows it by about half.
PURE_TESTS := tests/unit/health tests/unit/resilience tests/unit/notify/test_notify_policy.py
test: $(STAMP)
	$(BIN)/python -m pytest -q $(PURE_TESTS) --cov
	$(BIN)/python -m pytest -q $(addprefix --ignore=,$(PURE_TESTS))

lint: $(STAMP)
	$(BIN)/ruff check fleetd tests benchmarks
	$(BIN)/ruff format --check fleetd tests benchmarks
	$(BIN)/mypy
	MYPYPATH=benchmarks $(BIN)/mypy --strict --explicit-package-bases benchmarks/*.py benchmarks/support/*.py
	$(BIN)/lint-imports --no-logo  # the import contracts in pyproject.toml: layers, no circles, pure cores

fmt: $(STAMP)
	$(BIN)/ruff format fleetd tests benchmarks
	$(BIN)/ruff check --fix fleetd tests benchmarks

bench: $(STAMP)  # every benchmark runs; fails at the end if any missed its target
	@missed=""; for b in benchmarks/*.py; do \
		echo "== $$b"; $(BIN)/python $$b || missed="$$missed $$b"; \
	done; \
	if [ -n "$$missed" ]; then echo "targets missed:$$missed"; exit 1; fi; \
	echo "every benchmark met its target"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage .import_linter_cache .grimp_cache
