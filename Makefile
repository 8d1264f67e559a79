# Kadence developer entry points. The dev stack (a real Kafka broker + Redis) is started by
# scripts/devstack.py around the command and stopped afterwards; see docs/dev-stack.md.
#   make test PYTEST_ARGS='-k timers -x'     extra pytest arguments
#   make unit                                unit tests only, no broker
#   make chaos CHAOS_SEEDS=5                 the soak campaign (scripts/chaos.py): chaos suite per seed, CPU-starved
PYTHON      ?= python3
VENV        := .venv
DEVSTACK    := $(PYTHON) scripts/devstack.py
PYTEST_ARGS ?=
BENCH_ARGS  ?=

.PHONY: venv jars test dev bench unit chaos clean

venv:
	scripts/bootstrap.sh

jars:
	@$(DEVSTACK) jars >/dev/null

test: venv jars
	$(DEVSTACK) run -- $(VENV)/bin/python -m pytest -q --durations=15 tests $(PYTEST_ARGS)

dev: venv jars
	$(DEVSTACK) run -- $(VENV)/bin/kadence dev

bench: venv jars
	$(DEVSTACK) run -- $(VENV)/bin/python -m bench $(BENCH_ARGS)

chaos: venv jars
	$(DEVSTACK) run -- $(VENV)/bin/python scripts/chaos.py

unit: venv
	$(VENV)/bin/python -m pytest -q tests/unit $(PYTEST_ARGS)

# Build and test leftovers only: .venv and the jar cache (~/.cache/kadence) are kept.
clean:
	rm -rf .pytest_cache build dist
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
