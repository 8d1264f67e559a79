"""Programs in other languages that the client tests build and run: where their sources lie, a
runner that fails with their output, and the workflow they start (``Greeter``: waits for the
signal ``name``, returns ``"{greeting}, {name}!"``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from kadence import workflow

#: docs/examples/clients: the Java and Go examples and the schemas they read
CLIENTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "clients"


async def run_program(*argv: str, cwd: Path | None = None, timeout: float = 300) -> str:
    """Run ``argv`` to its end; its stdout, or an assertion with the tail of both streams."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ}
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, (argv, out.decode()[-2000:], err.decode()[-3000:])
    return out.decode()


@workflow.defn
class Greeter:
    def __init__(self) -> None:
        self.name: str | None = None

    @workflow.signal
    def name(self, name: str) -> None:
        self.name = name

    @workflow.run
    async def run(self, greeting: str) -> str:
        await workflow.wait_condition(lambda: self.name is not None)
        return f"{greeting}, {self.name}!"
