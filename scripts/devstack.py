#!/usr/bin/env python3
"""The dev stack's command line (``make dev``, ``make test``, ``make bench``, ``make chaos``,
``.ci/run``): ``kadence.testing.devstack``, loaded from its file, because it runs with the
system's python3 before the package is installed (it installs what the venv needs first).

    python3 scripts/devstack.py run -- <command...>   # start a broker and Redis, run the command, stop both
    python3 scripts/devstack.py jars                  # only resolve the broker jars
    python3 scripts/devstack.py deps                  # only install missing system packages
"""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parent.parent / "testing" / "devstack.py"
_spec = importlib.util.spec_from_file_location("kadence_devstack", _PATH)
devstack = importlib.util.module_from_spec(_spec)
sys.modules["kadence_devstack"] = devstack
_spec.loader.exec_module(devstack)

if __name__ == "__main__":
    sys.exit(devstack.main())
