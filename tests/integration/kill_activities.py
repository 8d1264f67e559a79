"""Activities for the worker-killed-mid-activity drill, run by `kadence worker` subprocesses.

Side effects go to an idempotent store on disk (one file per idempotency key, created with
O_EXCL), so a retried attempt cannot repeat the business effect; every attempt is logged.
"""

import asyncio
import os
from pathlib import Path

from kadence import activity


def _dir() -> Path:
    return Path(os.environ["KADENCE_TEST_EFFECTS"])


def apply_effect(key: str, what: str) -> bool:
    """The pretend payment system: True when this key's effect is new."""
    path = _dir() / "effects" / key.replace("/", "_")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(what)
    return True


@activity.defn
async def charge_card(amount: int) -> str:
    info = activity.info()
    with open(_dir() / "attempts.log", "a") as fh:
        fh.write(f"{info.attempt} {info.idempotency_key} {os.getpid()}\n")
    apply_effect(info.idempotency_key, f"charge {amount}")
    if os.environ.get("KADENCE_TEST_HANG") == "1":
        await asyncio.sleep(600)  # this worker gets SIGKILLed here
    return f"charged {amount}"


ACTIVITIES = [charge_card]
WORKFLOWS: list = []
