"""Running the ``kadence`` command against a test's broker and namespace."""

from __future__ import annotations

import asyncio
import os
import sys


async def kadence(config, *args) -> tuple[int, str, str]:
    """``kadence --bootstrap ... --namespace ... ARGS``: (exit status, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadence.cli",
        "--log-level",
        "warning",
        "--bootstrap",
        config.bootstrap,
        "--namespace",
        config.namespace,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()
