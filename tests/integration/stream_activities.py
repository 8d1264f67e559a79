"""An activity that publishes on its workflow's stream, for the worker-killed-mid-publish drill:
run by `kadence worker` subprocesses; with KADENCE_TEST_HANG=1 it publishes five values, notes
that it did, and hangs (its worker is then SIGKILLed)."""

import asyncio
import os
from pathlib import Path

from kadence import activity


@activity.defn
async def narrate(count: int) -> str:
    attempt = activity.info().attempt
    for i in range(count):
        activity.publish("story", f"attempt {attempt} line {i}")
    if os.environ.get("KADENCE_TEST_HANG") == "1":
        Path(os.environ["KADENCE_TEST_EFFECTS"], "published").write_text(str(attempt))
        await asyncio.sleep(600)  # this worker gets SIGKILLed here
    return f"told on attempt {attempt}"


ACTIVITIES = [narrate]
