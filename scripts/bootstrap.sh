#!/usr/bin/env bash
# Prepare the Python environment on a fresh machine (idempotent and fast when nothing changed):
#   1. system packages for the dev stack (java, maven, redis-server), via apt-get when root;
#   2. .venv, created with python3 if missing;
#   3. the exact versions of requirements.lock (hashes checked), then the project itself (editable,
#      no dependencies, no build isolation: nothing unpinned is fetched), then anything installed
#      that the lock does not name is removed; only when pyproject.toml or the lock is newer than
#      .venv/.installed. `make upgrade-deps` refreshes the lock;
#   4. the AsyncAPI parser that checks docs/asyncapi.yaml (tools/asyncapi, `npm ci` from its
#      package-lock.json, install scripts off), only when the lock is newer than its stamp.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
STAMP=.venv/.installed

say() { echo "bootstrap: $*" >&2; }

# 1. The broker and Redis are only needed by `make test/dev/bench`; a missing package is reported
#    here but does not block the venv (devstack.py fails with the same message when it matters).
if ! "$PYTHON" scripts/devstack.py deps; then
    say "warning: dev stack prerequisites missing (see above); unit tests still work"
fi

# 2. Debian's python3 needs python3-venv for `-m venv` (ensurepip).
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            say "installing python3-venv"
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -q python3-venv >/dev/null \
                || { apt-get update -q >/dev/null \
                     && apt-get install -y -q python3-venv >/dev/null; }
        else
            say "error: $PYTHON cannot create virtualenvs; install python3-venv"; exit 1
        fi
    fi
    say "creating .venv"
    "$PYTHON" -m venv .venv
fi

# 3. The lock, then the project, skipped while the stamp is newer than pyproject.toml and the lock.
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ] || [ requirements.lock -nt "$STAMP" ]; then
    PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
    say "pip install --require-hashes -r requirements.lock (this can take a minute)"
    "${PIP[@]}" --require-hashes -r requirements.lock
    "${PIP[@]}" --no-deps --no-build-isolation -e .
    .venv/bin/python scripts/lock.py sync
    touch "$STAMP"
fi

# 4. The AsyncAPI parser (node, from Debian via `devstack.py deps`): exact versions from the lock.
NPM_STAMP=tools/asyncapi/node_modules/.installed
if [ ! -f "$NPM_STAMP" ] || [ tools/asyncapi/package-lock.json -nt "$NPM_STAMP" ]; then
    if command -v npm >/dev/null; then
        say "npm ci in tools/asyncapi (the AsyncAPI parser)"
        (cd tools/asyncapi && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null) \
            && touch "$NPM_STAMP"
    else
        say "warning: npm missing: tests/unit/test_asyncapi.py cannot validate docs/asyncapi.yaml"
    fi
fi
