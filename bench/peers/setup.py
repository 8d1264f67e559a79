"""The peers' software, for the bench only: a virtualenv with DBOS (``requirements.txt``), and a
throw-away PostgreSQL cluster (initdb in a temp dir, a free port, stopped at the end).

PostgreSQL refuses to run as root: as root, the cluster is made and run by Debian's ``postgres``
user (``runuser``)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kadence.devstack.services import apt_install

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"


class PeerSetupError(RuntimeError):
    pass


def peer_python() -> Path:
    """The peers' virtualenv's python, made (or brought up to ``requirements.txt``) first."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".requirements"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print("bench: making the peers' virtualenv (DBOS)", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
    stamp.write_text(wanted)
    return python


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        apt_install(["postgresql"])
        return _pg_bin(name) if glob.glob(f"/usr/lib/postgresql/*/bin/{name}") else name
    raise PeerSetupError(f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)")


@contextlib.contextmanager
def postgres(port: int) -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1:``port``; yields its URL for database ``dbos_bench``."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="kadence-peers-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log = root / "data", root / "postgres.log"

    def run(*argv: str) -> None:
        done = subprocess.run([*as_user, *argv], capture_output=True, text=True)
        if done.returncode != 0:
            raise PeerSetupError(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    run(initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    t = time.monotonic()
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=100"
    run(pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "start")
    print(f"bench: PostgreSQL ready on port {port} in {time.monotonic() - t:.1f}s", file=sys.stderr, flush=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/dbos_bench"
    finally:
        with contextlib.suppress(PeerSetupError):
            run(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def postgres_pids(port: int) -> list[int]:
    """The PostgreSQL processes serving ``port`` (the postmaster and its backends)."""
    import psutil

    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if p.info["name"] == "postgres" and f"-p {port}" in cmd:
                out.append(p.pid)
                out += [c.pid for c in p.children(recursive=True)]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out
