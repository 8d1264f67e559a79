#!/usr/bin/env python3
"""Type-check the ``kadence`` package with mypy (run by ``make lint``, and so by ``make test``).

mypy cannot follow setuptools' ``package-dir`` mapping (``kadence`` is ``sdk/``, ``kadence.topics``
is ``topics/``, ...), so this builds the package as mypy expects it, out of symbolic links to the
repository's files, under ``build/typecheck/`` (made again each run; mypy's cache lives beside
it), runs ``mypy -p kadence`` there with the settings of ``pyproject.toml`` (``[tool.mypy]``), and
prints each finding with the file's path in the repository. Exit status: mypy's.

The mapping is read from ``pyproject.toml``'s ``[tool.setuptools] package-dir``, so a new folder
is checked as soon as it is packaged.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"


def package_dirs() -> dict[str, str]:
    """``kadence.topics`` -> ``topics`` ..., from pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


def build_tree() -> dict[str, str]:
    """The package as symbolic links under TREE; returns link prefix -> repository folder."""
    shutil.rmtree(TREE / "kadence", ignore_errors=True)
    prefixes: dict[str, str] = {}
    for package, folder in sorted(package_dirs().items(), key=lambda kv: kv[0].count(".")):
        target = TREE.joinpath(*package.split("."))
        if package == "kadence":  # the top package's files, beside the sub-packages' links
            target.mkdir(parents=True)
            for source in sorted((ROOT / folder).iterdir()):
                if source.suffix in (".py", ".pyi") or source.name == "py.typed":
                    (target / source.name).symlink_to(source)
        else:
            target.symlink_to(ROOT / folder, target_is_directory=True)
        prefixes[str(target.relative_to(TREE))] = folder
    return prefixes


def main() -> int:
    prefixes = build_tree()
    # longest first: kadence/topics/x.py is topics/x.py, kadence/x.py is sdk/x.py
    ordered = sorted(prefixes.items(), key=lambda kv: -len(kv[0]))
    pattern = re.compile(r"^(kadence(?:/[^:\s]+)?\.pyi?)(?=:)")

    def in_repository(match: re.Match) -> str:
        path = match.group(1)
        for prefix, folder in ordered:
            if path.startswith(prefix + "/"):
                return folder + path[len(prefix) :]
        return path

    env = {**os.environ, "MYPY_CACHE_DIR": str(TREE / ".mypy_cache")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--python-executable",
            sys.executable,
            "-p",
            "kadence",
        ],
        cwd=TREE,
        env=env,
        capture_output=True,
        text=True,
    )
    for line in (run.stdout + run.stderr).splitlines():
        print(pattern.sub(in_repository, line))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
