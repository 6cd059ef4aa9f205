# FloKit: `make up` runs the service, `make test` passes the tests. Both set everything up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The machines here set PYTHONDONTWRITEBYTECODE: no process would keep what it compiles, so every
# Python process started (gunicorn, flokit, Dagster's code servers and run workers, each pytest worker
# rewriting the test modules' asserts) would compile the same modules again. Every command below
# writes bytecode as Python does by default (__pycache__ is ignored by git); the install compiles
# nothing up front (the first import does, once: 11 s instead of 48 s; docs/testing.md).
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help up test suite test-fast faults cluster-test lint bench venv clean
# pytest-xdist workers for `make test`: 3 on the 2-core machines this runs on, whose process-level
# tests mostly wait (two workers kept the cores 64 % busy, four overloaded them: docs/testing.md).
WORKERS ?= 3

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-9s %s\n", $$1, $$2}'

# uv (Astral's installer, from PyPI) installs the same versions as pip in a quarter of the time
# (25 s against 98 s here: it downloads and unpacks in parallel); docs/testing.md.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## Create the virtual environment and install FloKit with its dev tools

up: $(STAMP) ## Migrate, bootstrap a demo workspace when empty, run API :8000 + Dagster UI :3000 + daemon
	$(BIN)/flokit up

lint: $(STAMP) ## ruff (lint and format), the import-linter contracts between the rooms, mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Lint runs beside the suite (half a minute saved: the suite's first minute leaves a core free);
# either failing fails `make test`.
test: $(STAMP) ## Lint and the whole suite on 3 pytest-xdist workers (WORKERS=n): SQLite, a private PostgreSQL cluster, Redis, an S3 server (SeaweedFS), nginx, chromium
	$(MAKE) --no-print-directory -j2 lint suite

# The tests marked `deployment` start a deployment of several "hosts" (about ten processes): beside
# the parallel suite's servers and browsers they overloaded two cores (run 25), so they run after
# it, one at a time, on the same servers.
suite: $(STAMP) ## The whole suite without lint (what `make test` runs beside lint): the parallel part, then the deployments alone
	FLOKIT_TEST_REQUIRE_POSTGRES=1 FLOKIT_TEST_REQUIRE_REDIS=1 FLOKIT_TEST_REQUIRE_S3=1 scripts/with-nginx.sh scripts/with-chromium.sh scripts/with-postgres.sh scripts/with-redis.sh scripts/with-s3.sh \
		sh -c '$(BIN)/pytest -n $(WORKERS) --dist loadscope --durations=30 -m "not deployment" && $(BIN)/pytest -m deployment --durations=10'

test-fast: $(STAMP) ## The edit-test loop: lint, then the unit rooms (transforms, warehouse) on SQLite, no processes
	$(MAKE) lint
	$(BIN)/pytest -n $(WORKERS) --dist loadscope -m "not postgres and not e2e and not fault" tests/transforms tests/warehouse

faults: $(STAMP) ## The whole fault suite, long scenarios included (see docs/reliability.md)
	FLOKIT_TEST_REQUIRE_POSTGRES=1 scripts/with-postgres.sh $(BIN)/pytest tests/faults --run-slow -v

cluster-test: $(STAMP) ## FloKit on several "hosts" sharing no disk: PostgreSQL, Redis, SeaweedFS, nginx; the five scenarios of issue 33, about 7.5 min (docs/deploy.md)
	FLOKIT_TEST_REQUIRE_POSTGRES=1 FLOKIT_TEST_REQUIRE_REDIS=1 FLOKIT_TEST_REQUIRE_S3=1 scripts/with-nginx.sh scripts/with-cluster.sh $(BIN)/pytest tests/cluster --run-slow -v

bench: $(STAMP) ## Benchmarks (figures printed; see docs/benchmarks.md)
	scripts/with-cluster.sh $(BIN)/python -m tests.bench

clean: ## Remove the environment, local data and test artefacts (browser screenshots)
	rm -rf $(VENV) data test-artifacts
