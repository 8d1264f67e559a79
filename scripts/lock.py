#!/usr/bin/env python3
"""The lock file (requirements.lock) against the installed environment.

    python scripts/lock.py check   # exit 1, listing the differences, unless the venv is exactly the lock
    python scripts/lock.py sync    # uninstall what the lock does not name (after installing the lock)

Run with the venv's python (it needs ``packaging``, which the lock installs). ``make venv`` syncs;
``tests/unit/test_lock.py`` checks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
#: installed but never in a lock: the installer itself and the project (editable)
UNLOCKED = {"pip", "kadence"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def locked(path: Path = LOCK) -> dict[str, str]:
    """name -> version of every pin whose environment marker holds here."""
    pins = {}
    for line in path.read_text().splitlines():
        m = _PIN.match(line)
        if not m:
            continue
        name, _extras, version, marker = m.groups()
        if marker and not Marker(marker).evaluate():
            continue
        pins[canonicalize_name(name)] = version
    return pins


def installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}


def differences(pins: dict[str, str], have: dict[str, str]) -> list[str]:
    out = []
    for name, version in sorted(pins.items()):
        if name not in have:
            out.append(f"missing: {name}=={version}")
        elif have[name] != version:
            out.append(f"version: {name} is {have[name]}, locked {version}")
    out += [f"not locked: {name}=={have[name]}" for name in sorted(set(have) - set(pins) - UNLOCKED)]
    return out


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "check"
    pins, have = locked(), installed()
    if command == "sync":
        extra = sorted(set(have) - set(pins) - UNLOCKED)
        if extra:
            print(f"lock: uninstalling what the lock does not name: {' '.join(extra)}", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *extra], check=True)
        return 0
    diff = differences(pins, have)
    for line in diff:
        print(f"lock: {line}", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
