# Kadence developer entry points. The dev stack (a real Kafka broker + Redis) is started by
# scripts/devstack.py around the command and stopped afterwards; see docs/dev-stack.md.
#   make test PYTEST_ARGS='-k timers -x'     extra pytest arguments
#   make unit                                unit tests only, no broker
#   make lint / make format                  ruff check and format --check (part of make test) / apply both
#   make chaos CHAOS_SEEDS=5                 the soak campaign (scripts/chaos.py): chaos suite per seed, CPU-starved
#   make soak SOAK_RUNS=10                   the soak-marked tests (broker outage), ten times in a row
#   make upgrade-deps                        re-resolve requirements.lock to the newest allowed versions, reinstall, test
PYTHON      ?= python3
VENV        := .venv
DEVSTACK    := $(PYTHON) scripts/devstack.py
PYTEST_ARGS ?=
# xdist workers of `make test` (0: the suite in one process, as before; tests/conftest.py keeps each file on one worker)
TEST_WORKERS ?= 2
BENCH_ARGS  ?=
SOAK_RUNS   ?= 1

.PHONY: venv jars test lint format dev bench unit chaos soak upgrade-deps lock clean

venv:
	scripts/bootstrap.sh

# requirements.lock: every package of '.[dev]' (and the build requirements), exact versions and
# hashes, for every platform; `make lock` after changing a bound in pyproject.toml keeps the
# other pins, `make upgrade-deps` takes the newest versions the bounds allow and runs the suite.
# requirements-image.lock: the runtime packages only, at requirements.lock's versions (the Dockerfile).
LOCK_COMPILE = $(VENV)/bin/uv pip compile -q pyproject.toml scripts/build-requirements.in --extra dev \
	--generate-hashes --universal --python-version 3.11 -o requirements.lock
IMAGE_LOCK_COMPILE = $(VENV)/bin/uv pip compile -q pyproject.toml scripts/build-requirements.in -c requirements.lock \
	--generate-hashes --universal --python-version 3.11 -o requirements-image.lock

lock: venv
	$(LOCK_COMPILE)
	$(IMAGE_LOCK_COMPILE)
	scripts/bootstrap.sh

upgrade-deps: venv
	$(LOCK_COMPILE) --upgrade
	$(IMAGE_LOCK_COMPILE)
	scripts/bootstrap.sh
	$(MAKE) test

jars:
	@$(DEVSTACK) jars >/dev/null
	@$(DEVSTACK) registry >/dev/null

test: venv jars lint
	$(DEVSTACK) run -- $(VENV)/bin/python -m pytest -q --durations=40 -n $(TEST_WORKERS) --dist loadgroup \
		-m "not soak and not chaos_cluster" tests $(PYTEST_ARGS)

# the rules and the format in pyproject.toml ([tool.ruff]); `make format` applies both; then mypy
# ([tool.mypy]) over the package as it is installed (scripts/typecheck.py)
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/python scripts/typecheck.py

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# the tests marked soak (the broker-outage acceptance test), SOAK_RUNS times in a row, each with a
# fresh dev stack, printing their recovery times; stops at the first failure
soak: venv jars
	@for i in $$(seq $(SOAK_RUNS)); do echo "soak run $$i of $(SOAK_RUNS)"; \
	  $(DEVSTACK) run -- $(VENV)/bin/python -m pytest -q -s -m soak tests $(PYTEST_ARGS) || exit 1; \
	done

dev: venv jars
	$(DEVSTACK) run -- $(VENV)/bin/kadence dev

# (no schema registry beside the measurements and the soak: nothing in them uses one)
bench: venv jars
	KADENCE_DEV_SCHEMA_REGISTRY=0 $(DEVSTACK) run -- $(VENV)/bin/python -m bench $(BENCH_ARGS)

chaos: venv jars
	KADENCE_DEV_SCHEMA_REGISTRY=0 $(DEVSTACK) run -- $(VENV)/bin/python scripts/chaos.py

unit: venv
	$(VENV)/bin/python -m pytest -q tests/unit $(PYTEST_ARGS)

# Build and test leftovers only: .venv and the jar cache (~/.cache/kadence) are kept.
clean:
	rm -rf .pytest_cache build dist
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
